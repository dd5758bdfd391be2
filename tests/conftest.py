"""Fixtures shared by the whole test suite: real Kafka, real PostgreSQL, temporary SQLite.

Where the servers come from, in this order (the same for Kafka and PostgreSQL):

1. the environment: ``KAFKA_BOOTSTRAP_SERVERS`` / ``POSTGRES_HOST`` (+ the other
   ``POSTGRES_*``), as ``eval "$(punto-banco infra up)"`` sets them (`make test` does); an
   authenticating broker's principals are read from its folder (``PB_DATA_DIR``);
2. testcontainers, when a Docker engine answers (``PB_TEST_NO_DOCKER=1`` skips this);
3. the project's own local server if `punto-banco infra up` left one running,
   else a throw-away one started by ``services.dev.infra`` in a temporary folder on a
   free port, stopped again at the end of the session.

Nothing depends on an earlier run: PostgreSQL tests get a database created for
this session (``pb_test_<pid>_<random>``, dropped at the end), Kafka tests use
topic and group names under a per-session prefix (``topic_prefix``/``unique_topic``),
so parallel runs on one machine never collide.

Kafka clients log in as tests/kafka_logins.py says: a service as its own principal (the ACL
matrix granted for its test's topic prefix), the tests' own producers, readers and admin
clients as the broker's admin.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import settings as hypothesis_settings
from psycopg import sql

from services.dev.infra.kafka import KafkaBroker, broker_answers
from services.dev.infra.kafka_clients import KafkaLogins
from services.dev.infra.ports import LOOPBACK, free_port
from services.dev.infra.postgres import PostgresServer
from services.dev.infra.programs import KAFKA_VERSION
from services.shared.platform.settings import KafkaAuth
from tests import kafka_logins
from tests.kafka_cleanup import created_under, delete_created_topics
from tests.postgres_databases import drop_database
from tests.signing_keys import key_env

POSTGRES_KEYS = (
    "POSTGRES_HOST",
    "POSTGRES_PORT",
    "POSTGRES_DBNAME",
    "POSTGRES_USER",
    "POSTGRES_PASSWORD",
)

# Property tests check behaviour, not speed: no per-example deadline (a loaded CI machine
# would otherwise fail them at random; speed is measured by `punto-banco bench`).
hypothesis_settings.register_profile("punto-banco", deadline=None)
hypothesis_settings.load_profile("punto-banco")


def _docker_answers() -> bool:
    if os.environ.get("PB_TEST_NO_DOCKER"):
        return False
    try:
        import docker  # type: ignore[import-untyped]

        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def _wait(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer within {timeout:.0f} s")
        time.sleep(0.5)


@contextlib.contextmanager
def _kafka_container() -> Iterator[str]:
    """The same Kafka version's official image, single KRaft node, published on loopback only."""
    from testcontainers.core.container import DockerContainer

    port = free_port()
    env = {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://{LOOPBACK}:{port}",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
    }
    container = DockerContainer(f"apache/kafka:{KAFKA_VERSION}")
    for name, value in env.items():
        container = container.with_env(name, value)
    container = container.with_bind_ports(9092, (LOOPBACK, port))  # type: ignore[arg-type]
    with container:
        bootstrap = f"{LOOPBACK}:{port}"
        _wait(lambda: broker_answers(bootstrap), 120, "Kafka container")
        yield bootstrap


@contextlib.contextmanager
def _postgres_container() -> Iterator[dict[str, str]]:
    from testcontainers.core.container import DockerContainer

    port = free_port()
    password = secrets.token_hex(12)
    container = (
        DockerContainer("postgres:15")
        .with_env("POSTGRES_USER", "punto_banco")
        .with_env("POSTGRES_PASSWORD", password)
        .with_env("POSTGRES_DB", "punto_banco")
        .with_bind_ports(5432, (LOOPBACK, port))  # type: ignore[arg-type]
    )
    with container:
        env = {
            "POSTGRES_HOST": LOOPBACK,
            "POSTGRES_PORT": str(port),
            "POSTGRES_DBNAME": "punto_banco",
            "POSTGRES_USER": "punto_banco",
            "POSTGRES_PASSWORD": password,
        }
        _wait(lambda: _postgres_answers(env), 120, "PostgreSQL container")
        yield env


def _postgres_answers(env: dict[str, str]) -> bool:
    try:
        with psycopg.connect(**_conninfo(env), connect_timeout=3) as connection:
            connection.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def _conninfo(env: dict[str, str]) -> dict[str, Any]:
    return {
        "host": env["POSTGRES_HOST"],
        "port": env.get("POSTGRES_PORT", "5432"),
        "dbname": env["POSTGRES_DBNAME"],
        "user": env["POSTGRES_USER"],
        "password": env.get("POSTGRES_PASSWORD", ""),
    }


@contextlib.contextmanager
def _logged_in(bootstrap: str, logins: KafkaLogins, *, outlives: bool) -> Iterator[str]:
    """The session's broker: its logins recorded (tests/kafka_logins.py); at the end this
    session's grants revoked and, on a broker that outlives it, its topics deleted."""
    kafka_logins.use(bootstrap, logins)
    try:
        yield bootstrap
    finally:
        kafka_logins.revoke_all()
        if outlives:
            delete_created_topics(bootstrap)


def _configured_logins(bootstrap: str) -> KafkaLogins:
    """The logins of the broker the environment names: its principals' when it is a local
    authenticating broker (PB_KAFKA_HOME or PB_DATA_DIR finds its folder), nobody's for
    PLAINTEXT; never an authenticating broker without credentials."""
    try:
        logins = KafkaLogins.for_bootstrap(bootstrap)
    except ValueError:  # SettingsError: SASL said, and no principal given
        logins = KafkaLogins(shared=KafkaAuth("SASL_PLAINTEXT", username="-", password="-"))
    if logins.authenticated and logins.home is None:
        pytest.fail(
            f"KAFKA_BOOTSTRAP_SERVERS={bootstrap} authenticates (KAFKA_SECURITY_PROTOCOL="
            f"{os.environ.get('KAFKA_SECURITY_PROTOCOL')}) but the session cannot find its "
            "principals: set PB_DATA_DIR (or PB_KAFKA_HOME) to the folder of the `infra up` "
            "that started it"
        )
    return logins


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """``host:port`` of a real Kafka broker for this test session (how each client logs in to
    it: tests/kafka_logins.py)."""
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if configured:
        with _logged_in(configured, _configured_logins(configured), outlives=True) as bootstrap:
            yield bootstrap
        return
    if _docker_answers():
        with _kafka_container() as bootstrap, _logged_in(bootstrap, KafkaLogins(), outlives=False):
            yield bootstrap
        return
    project = KafkaBroker.for_project(port=None)
    if project.status().running:
        running = project.bootstrap()
        assert running is not None
        with _logged_in(running, KafkaLogins.of_broker(project), outlives=True):
            yield running
        return
    with tempfile.TemporaryDirectory(prefix="pb-test-kafka-") as home:
        broker = KafkaBroker(home=Path(home), preferred_port=None)
        try:
            bootstrap = broker.start()
            with _logged_in(bootstrap, KafkaLogins.of_broker(broker), outlives=False):
                yield bootstrap
        finally:
            broker.stop()


@pytest.fixture(scope="session")
def _postgres_server_env() -> Iterator[dict[str, str]]:
    """Settings of a PostgreSQL server whose user may create databases."""
    if os.environ.get("POSTGRES_HOST"):
        missing = [key for key in POSTGRES_KEYS if key not in os.environ]
        if missing:
            pytest.fail(f"POSTGRES_HOST is set but {', '.join(missing)} not: set all POSTGRES_*")
        yield {key: os.environ[key] for key in POSTGRES_KEYS}
        return
    if _docker_answers():
        with _postgres_container() as env:
            yield env
        return
    project = PostgresServer.for_project(port=None)
    if project.status().running:
        yield project.env()
        return
    with tempfile.TemporaryDirectory(prefix="pb-test-postgres-") as home:
        os.chmod(home, 0o755)  # the postgres OS user (when we are root) must reach it
        server = PostgresServer(home=Path(home), preferred_port=None)
        try:
            yield server.start()
        finally:
            server.stop()


@pytest.fixture(scope="session")
def postgres_env(_postgres_server_env: dict[str, str]) -> Iterator[dict[str, str]]:
    """POSTGRES_* settings (as eventsourcing.postgres reads them) of a database made fresh
    for this session and dropped at its end."""
    name = f"pb_test_{os.getpid()}_{secrets.token_hex(4)}"
    admin = _conninfo(_postgres_server_env)
    with psycopg.connect(**admin, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield {**_postgres_server_env, "POSTGRES_DBNAME": name}
    finally:
        with psycopg.connect(**admin, autocommit=True) as connection:
            drop_database(connection, name)


@pytest.fixture(scope="session")
def postgres_dsn(postgres_env: dict[str, str]) -> str:
    """The same fresh database as a libpq connection string."""
    return psycopg.conninfo.make_conninfo(**_conninfo(postgres_env))


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    """A path for a new SQLite database file (it does not exist yet)."""
    return tmp_path / "events.sqlite"


@pytest.fixture(scope="session")
def signing_keys() -> dict[str, str]:
    """``PB_SIGNING_KEY`` / ``PB_KEYRING`` of this session's keys (tests/signing_keys.py): the
    services sign what they publish and refuse what their keyring cannot verify.
    ``kafka_tools.settings_for`` adds them already; ``signing_keys.ensure_key(name)`` gives a
    test's own service (``counter``...) a key."""
    return key_env()


@pytest.fixture(scope="session")
def topic_prefix() -> str:
    """A prefix unique to this test session for Kafka topic and group names."""
    return created_under(f"pb-test-{os.getpid()}-{secrets.token_hex(3)}")


@pytest.fixture
def unique_topic(topic_prefix: str, request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``unique_topic("bets")`` -> a Kafka topic (or group) name no other test or run uses."""
    counter = itertools.count(1)
    test = "".join(ch if ch.isalnum() else "-" for ch in request.node.name)[:60]

    def make(name: str = "t") -> str:
        return f"{topic_prefix}.{test}.{name}.{next(counter)}"

    return make
