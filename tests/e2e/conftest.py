"""End-to-end fixtures: the three real services as subprocesses against the real broker.

Each test gets its own topic prefix and data folder, and its own PostgreSQL database when the
``store`` parameter is ``postgres`` (from the ``postgres_env`` fixture of tests/conftest.py), so
tests never see each other's messages or events. The ``system`` fixture stops every service
(SIGTERM, then SIGKILL) whatever the test did.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from services.dev.demo.processes import ServiceSettings
from services.dev.demo.system import LocalSystem
from tests import kafka_logins
from tests.kafka_cleanup import created_under
from tests.postgres_databases import drop_database

FAST_SETTINGS = {"PB_RELAY_POLL_INTERVAL": "0.05", "PB_LOG_LEVEL": "INFO", "PB_HTTP_PORT": "0"}
"""A quick relay, and HTTP endpoints on any free port (tests run side by side: a fixed port
would be taken by the neighbour's service)."""


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def store(request: pytest.FixtureRequest) -> Iterator[Mapping[str, str]]:
    """The persistence settings of the services: {} for SQLite, POSTGRES_* for PostgreSQL.

    PostgreSQL gets a database of its own per test (created here, dropped afterwards): the
    services keep one schema each and track Kafka positions by topic name, so two tests must
    never share a database.
    """
    if request.param == "sqlite":
        yield {}
        return
    server: Mapping[str, str] = request.getfixturevalue("postgres_env")
    env = {key: value for key, value in server.items() if key.startswith("POSTGRES_")}
    name = f"pb_e2e_{uuid.uuid4().hex[:12]}"
    admin = psycopg.conninfo.make_conninfo(
        host=env["POSTGRES_HOST"],
        port=env.get("POSTGRES_PORT", "5432"),
        dbname=env["POSTGRES_DBNAME"],
        user=env["POSTGRES_USER"],
        password=env.get("POSTGRES_PASSWORD", ""),
        connect_timeout=10,
    )
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield {**env, "POSTGRES_DBNAME": name}
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            drop_database(connection, name)


@pytest.fixture
def system_settings(
    kafka_bootstrap: str, store: Mapping[str, str], tmp_path: Path
) -> ServiceSettings:
    return ServiceSettings(
        bootstrap=kafka_bootstrap,
        data_dir=tmp_path / "data",
        logins=kafka_logins.logins(),
        topic_prefix=created_under(f"e2e-{uuid.uuid4().hex[:12]}."),
        postgres=dict(store),
        extra=FAST_SETTINGS,
    )


@pytest.fixture
async def system(system_settings: ServiceSettings, tmp_path: Path) -> AsyncIterator[LocalSystem]:
    running = LocalSystem(system_settings, tmp_path / "logs")
    try:
        await running.start(ready_timeout=90)
        yield running
    finally:
        await running.stop(timeout=15)
        for child in running.services.values():
            assert not child.running(), f"{child.name} still running after stop"
