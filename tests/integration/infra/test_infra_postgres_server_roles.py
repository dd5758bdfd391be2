"""The local PostgreSQL server (``punto-banco infra up``) provisions the services' roles for the
default schemas: owner-only password files, a service runs as its own role, the auditor reads,
a second start changes nothing and a lost password file is made good.

A server of its own, in a temporary folder on a free port (initdb: several seconds).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from services.dev.infra.common import InfraError
from services.dev.infra.postgres import PostgresServer
from services.shared.platform.settings import Settings
from services.shared.platform.store import open_application, prepare_store
from services.shoe.application import ShoeApplication
from services.tools.admin.provisioning import SERVICES
from tests.signing_keys import key_env

pytestmark = pytest.mark.slow


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def connect(env: dict[str, str]) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(
        host=env["POSTGRES_HOST"],
        port=env["POSTGRES_PORT"],
        dbname=env["POSTGRES_DBNAME"],
        user=env["POSTGRES_USER"],
        password=env["POSTGRES_PASSWORD"],
        autocommit=True,
    )


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    with tempfile.TemporaryDirectory(prefix="pb-test-pgroles-") as home:
        os.chmod(home, 0o755)  # the postgres OS user (when we are root) must reach it
        local = PostgresServer(home=Path(home), preferred_port=None)
        try:
            local.start()
            yield local
        finally:
            local.stop()


def test_infra_up_provisions_every_role_with_owner_only_passwords(server: PostgresServer) -> None:
    assert mode(server.secrets_dir) == 0o700
    files = sorted(path.name for path in server.secrets_dir.iterdir())
    assert files == sorted(f"{role}.password" for role in server.login_roles())
    assert all(mode(path) == 0o600 for path in server.secrets_dir.iterdir())
    with connect(server.env()) as conn:
        roles = conn.execute(
            "SELECT rolname, rolcanlogin FROM pg_roles WHERE rolname = ANY(%s) ORDER BY 1",
            ([*SERVICES, *(f"{s}_owner" for s in SERVICES), "auditor"],),
        ).fetchall()
        assert roles == sorted(
            [(s, True) for s in SERVICES]
            + [(f"{s}_owner", False) for s in SERVICES]
            + [("auditor", True)]
        )
        assert conn.execute(
            "SELECT rolcreaterole FROM pg_roles WHERE rolname = current_user"
        ).fetchone() == (True,)  # the project role is the local administrator


def test_a_service_runs_with_its_role_env_and_the_auditor_reads_it(server: PostgresServer) -> None:
    env = server.role_env("shoe")
    assert env["POSTGRES_USER"] == "shoe" and env["PB_POSTGRES_CREATE_TABLES"] == "no"
    settings = Settings.from_env("shoe", {**env, **key_env()})  # its secret key: the session's
    assert settings.postgres_create_tables is False
    app = open_application(lambda es: ShoeApplication(env=es), settings)
    try:
        app.shuffle_shoe("t1", "s1", 1, 16)
    finally:
        app.close()
    for service in SERVICES:
        prepare_store(Settings.from_env(service, server.role_env(service)))
    auditor = server.role_env("auditor")
    assert "PB_POSTGRES_CREATE_TABLES" not in auditor
    with connect(auditor) as conn:
        assert conn.execute("SELECT count(*) FROM shoe.shoe_events").fetchone() != (0,)


def test_a_second_start_changes_nothing_and_mends_a_lost_password(
    server: PostgresServer,
) -> None:
    again = server.provision_roles()
    assert not any(role.created or role.password for role in again.roles)
    lost = server.secrets_dir / "dealing.password"
    old = lost.read_text()
    lost.unlink()
    server.start()  # already running: provisions again, the role gets the new file's password
    assert lost.read_text() != old and mode(lost) == 0o600
    with connect(server.role_env("dealing")) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("dealing",)


def test_a_home_the_postgres_user_cannot_reach_is_refused_saying_where_to_put_it(
    tmp_path: Path,
) -> None:
    """As root the server runs as the ``postgres`` OS user: a data folder it cannot enter
    (pytest's own temporary folders are 0700) is refused before initdb, naming the fix; it
    used to make a cluster under /var/tmp that could never start (its log stayed out of reach)."""
    if os.geteuid() != 0:
        pytest.skip("only root runs the server as another OS user")
    tmp_path.chmod(0o700)
    local = PostgresServer(home=tmp_path / "pg", preferred_port=None)
    with pytest.raises(InfraError) as caught:
        local.start()
    assert "cannot reach" in caught.value.problem and "--data-dir" in caught.value.fix
    assert local.pid() is None and not (tmp_path / "pg" / "data").exists()
