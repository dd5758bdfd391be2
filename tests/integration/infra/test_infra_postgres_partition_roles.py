"""``punto-banco db setup`` for a partitioned deployment, on a real server: the schemas of
every partition, each as the service's one schema would be (owner, trigger, grants); a cell
starts on its provisioned partition schema as the service's own role (writer lease, fenced
writes, ``PB_POSTGRES_CREATE_TABLES=no``); the role writes only its own service's partitions;
the auditor reads them all and the partitioned audit passes.

A database made for this module and dropped after it; the roles get a random prefix and are
dropped too (the server's user must have CREATEROLE, as for test_infra_postgres_roles.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors, sql
from typer.testing import CliRunner

from services.dev.simulation import LocalSystem, play
from services.shared.platform.settings import PostgresSettings, Settings, replace
from services.shared.platform.store import prepare_store, writer_lease
from services.tools.admin.provisioning import SERVICES, Provisioning, provision
from services.tools.cli.main import app
from tests.postgres_databases import database_for_roles
from tests.signing_keys import key_env
from tests.unit.audit.helpers import tables_of

pytestmark = pytest.mark.postgres

PREFIX = f"pbc{secrets.token_hex(3)}_"
PARTITIONS = 2
SHOE_SECRET_FILE = key_env()["PB_SHOE_SECRET_KEY_FILE"]


def connect(pg: PostgresSettings) -> psycopg.Connection[Any]:
    return psycopg.connect(**pg.connect_options(), autocommit=True)


@pytest.fixture(scope="module")
def admin(_postgres_server_env: dict[str, str]) -> Iterator[PostgresSettings]:
    """The server's user, in a database of this module's own."""
    yield from database_for_roles(_postgres_server_env, "pb_cells", PREFIX)


@pytest.fixture(scope="module")
def provisioned(admin: PostgresSettings) -> tuple[Provisioning, dict[str, str]]:
    done = provision(admin, SERVICES, role_prefix=PREFIX, partitions=PARTITIONS)
    return done, {role.name: role.password for role in done.roles if role.password}


def login(admin: PostgresSettings, passwords: dict[str, str], role: str) -> PostgresSettings:
    return dataclasses.replace(admin, user=role, password=passwords[role])


def cell_settings(
    admin: PostgresSettings, passwords: dict[str, str], service: str, partition: int
) -> Settings:
    """A cell's settings as a PB_PARTITIONED process makes them, logged in as the service."""
    return Settings(
        service=service,
        persistence="postgres",
        postgres=login(admin, passwords, f"{PREFIX}{service}"),
        postgres_create_tables=False,
        partitioned=True,
        shoe_secret_key_file=SHOE_SECRET_FILE,
    ).for_partition(partition)


@pytest.fixture(scope="module")
def played(
    admin: PostgresSettings, provisioned: tuple[Provisioning, dict[str, str]]
) -> tuple[PostgresSettings, dict[str, str]]:
    """Each partition's three cells start on their provisioned schemas (writer lease first,
    then the fenced store, as ``host/service.py`` does) and play a table of that partition."""
    _done, passwords = provisioned

    async def run_cells(partition: int) -> None:
        leases, envs = [], {}
        for service in SERVICES:
            settings = cell_settings(admin, passwords, service, partition)
            lease = writer_lease(settings)
            assert await lease.acquire(asyncio.Event())
            leases.append(lease)
            prepare_store(settings)  # checks the provisioned store
            envs[service] = {**settings.eventsourcing_env(), **lease.fence_env()}
        try:
            (table,) = tables_of(partition, PARTITIONS, count=1)
            with LocalSystem(envs) as system:
                play(system, table, 5, bets_per_coup=3, decks=1, seed=partition + 1)
                system.pump()
                system.seal()
        finally:
            for lease in leases:
                await lease.release()

    for partition in range(PARTITIONS):
        asyncio.run(run_cells(partition))
    return admin, passwords


def count(conn: psycopg.Connection[Any], schema: str, table: str) -> int:
    row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, table)))
    found = row.fetchone()
    return int(found[0]) if found else 0


def test_every_partition_schema_is_provisioned_as_the_services_one(
    provisioned: tuple[Provisioning, dict[str, str]],
) -> None:
    done, _passwords = provisioned
    schemas = {(s.roles.service, s.roles.schema, s.roles.owner) for s in done.stores}
    assert schemas == {
        (service, f"{service}_p{n}", f"{PREFIX}{service}_owner")
        for service in SERVICES
        for n in range(PARTITIONS)
    }
    assert len(done.roles) == 2 * len(SERVICES) + 1  # each role once, however many partitions
    for store in done.stores:
        assert store.tables.events == [f"{store.roles.service}_events"]
        granted = {(g.grantee, g.privileges, g.target) for g in store.grants}
        assert (store.roles.login, "SELECT, INSERT", (store.roles.schema, store.tables.events[0]))\
            in granted  # fmt: skip


def test_the_cells_wrote_their_partition_schemas_as_the_services_roles(
    played: tuple[PostgresSettings, dict[str, str]],
) -> None:
    admin, _passwords = played
    with connect(admin) as conn:
        for service in SERVICES:
            for n in range(PARTITIONS):
                assert count(conn, f"{service}_p{n}", f"{service}_events") > 0, (service, n)
                owner = conn.execute(
                    "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = %s::regclass",
                    (f"{service}_p{n}.{service}_events",),
                ).fetchone()
                assert owner == (f"{PREFIX}{service}_owner",)


def test_a_service_role_writes_only_its_own_partitions_and_never_changes_them(
    played: tuple[PostgresSettings, dict[str, str]],
) -> None:
    admin, passwords = played
    with connect(login(admin, passwords, f"{PREFIX}shoe")) as conn:
        with pytest.raises(errors.InsufficientPrivilege, match="permission denied for schema"):
            conn.execute("SELECT count(*) FROM dealing_p0.dealing_events")
        with pytest.raises(errors.InsufficientPrivilege, match="permission denied for table"):
            conn.execute("UPDATE shoe_p1.shoe_events SET topic = topic")
        assert count(conn, "shoe_p1", "shoe_events") > 0


def test_the_auditor_reads_every_partition_and_the_audit_passes(
    played: tuple[PostgresSettings, dict[str, str]], tmp_path: Path
) -> None:
    admin, passwords = played
    auditor = login(admin, passwords, f"{PREFIX}auditor")
    env = {
        "PB_PERSISTENCE": "postgres",
        "PB_PARTITIONED": "yes",
        "PB_DATA_DIR": str(tmp_path),
        "PB_POSTGRES_SCHEMA_PREFIX": "",
        "PB_POSTGRES_DSN": "",
        "POSTGRES_HOST": auditor.host,
        "POSTGRES_PORT": str(auditor.port),
        "POSTGRES_DBNAME": auditor.dbname,
        "POSTGRES_USER": auditor.user,
        "POSTGRES_PASSWORD": auditor.password,
    }
    result = CliRunner().invoke(
        app, ["audit", "--postgres", "--json", "--allow-warnings", "--partitions", "2"], env=env
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["errors"] == 0 and sorted(report["partitions"]) == ["0", "1"]
    assert all(p["checked"]["coups"] >= 5 for p in report["partitions"].values())


def test_partitioned_processes_share_the_services_lease_which_no_other_login_takes(
    provisioned: tuple[Provisioning, dict[str, str]], admin: PostgresSettings
) -> None:
    """The service's unpartitioned schema holds only its lease's tables: the service's
    partitioned processes lock it shared (as its own role), an unpartitioned writer of the
    service then waits, and the auditor may not lock it at all."""
    done, passwords = provisioned
    assert [(s.roles.schema, s.tables.lease) for s in done.shared_leases] == [
        (service, ["pb_writer_lease", "pb_writer_fence"]) for service in SERVICES
    ]
    base = replace(cell_settings(admin, passwords, "settlement", 0), partition=None)

    async def share() -> None:
        first, second = writer_lease(base, shared=True), writer_lease(base, shared=True)
        assert await first._try() and await second._try()
        unpartitioned = writer_lease(replace(base, partitioned=False))
        assert not await unpartitioned._try()
        assert unpartitioned.holder is not None and "backend pid" in unpartitioned.holder
        for lease in (first, second):
            await lease.release()
        assert await unpartitioned._try()
        await unpartitioned.release()

    asyncio.run(share())
    with connect(login(admin, passwords, f"{PREFIX}auditor")) as auditor:
        assert count(auditor, "settlement", "pb_writer_lease") == 0  # it may read it, only
        for mode in ("SHARE", "EXCLUSIVE"):
            with (
                pytest.raises(errors.InsufficientPrivilege, match="permission denied"),
                auditor.transaction(),
            ):
                auditor.execute(f"LOCK TABLE settlement.pb_writer_lease IN {mode} MODE NOWAIT")
    report = [line for line in done.describe() if "the lease partitioned processes share" in line]
    assert len(report) == len(SERVICES) and any(".settlement: created" in line for line in report)
