"""One settings object for every process, read from the environment (and CLI overrides).

:class:`Environment` (pydantic-settings) reads and checks the variables below; a bad value is
a :class:`SettingsError` naming the variable. :class:`Settings` is what the code uses: a frozen
dataclass built from it (``Settings.from_env(service)``) or directly in tests.

Persistence is handed to eventsourcing as *its* environment (``PERSISTENCE_MODULE``,
``SQLITE_DBNAME``, ``POSTGRES_*``), so no domain or application module ever names a database:

- SQLite (default): one file per service, ``<PB_DATA_DIR>/<service>.sqlite``
  (``PB_DATA_DIR`` defaults to ``./var``).
- PostgreSQL when ``PB_PERSISTENCE=postgres``, ``PB_POSTGRES_DSN`` or any of
  ``POSTGRES_HOST``/``POSTGRES_DBNAME`` is set. Each service gets its own schema
  (``POSTGRES_SCHEMA=<PB_POSTGRES_SCHEMA_PREFIX><service>``, prefix default ""),
  so the three stores never share tables. ``PB_POSTGRES_CREATE_TABLES=no`` (default yes): the
  store was provisioned by ``punto-banco db setup`` and the service logs in as its own
  least-privilege role (``pg_roles.py``): it creates neither schema nor tables, and takes its
  events table's write lock through the owner's procedure (``pg_store.py``).

Kafka: ``KAFKA_BOOTSTRAP_SERVERS`` (default ``127.0.0.1:9092``) and ``PB_TOPIC_PREFIX``
(default ``""``), put in front of every project topic name so tests and parallel runs can
isolate their topics; who the process logs in as (``KAFKA_SECURITY_PROTOCOL``,
``KAFKA_SASL_*``, ``KAFKA_SSL_CAFILE``) in ``kafka_settings.py``.

HTTP (``endpoints.py``, ``webserver.py``): ``PB_HTTP_HOST``, the address the endpoints bind
(default ``127.0.0.1``; ``0.0.0.0`` in a container, so probes and Prometheus reach it);
``PB_HTTP_ALLOWED_HOSTS``, the Host header values answered (comma separated; default the bind
address, ``localhost`` and ``127.0.0.1``; ``*.example.com`` patterns; ``*`` turns the check
off); ports in :func:`http_port`.

Record signatures (``signing.py``, ``keys.py``): ``PB_SIGNING_KEY``, the service's private
key file (``{service}`` in it is replaced by the service's name; default
``<PB_DATA_DIR>/keys/<service>.pem``), and ``PB_KEYRING``, the public keys of every service
(default ``<PB_DATA_DIR>/keys/keyring.json``). ``punto-banco keys init`` creates both.

The shoe's secret keys (``secret_keys.py``): ``PB_SHOE_SECRET_KEY_FILE`` (default
``<PB_DATA_DIR>/keys/shoe-secret.json``, made by ``punto-banco keys init``) or
``PB_SHOE_SECRET_KEY`` (the keys themselves), never both. Only the shoe's eventsourcing
environment carries them: its Application encrypts each shoe's order and salt at rest.

Supervisors' decisions (``supervisors.py``, ``decisions.py``): ``PB_SUPERVISOR_KEYRING``, the
public keys of the supervisors who may sign a void (default
``<PB_DATA_DIR>/keys/supervisors.json``, made by ``punto-banco supervisor keygen``), and
``PB_VOID_WINDOW``, how long after a coup opened it may be voided (``24h`` by default; seconds
or ``90m``, ``7d``...). Only dealing's eventsourcing environment carries them.

Operators (B2B): ``PB_OPERATORS``, the operators whose bettors the tables serve (comma
separated names ``[a-z][a-z0-9_-]{0,31}``; default ``house``). Dealing marks every operator's
bet-commands topic, settlement reads each and answers on each operator's bet-events topic
(``contracts.topics``); settlement's eventsourcing environment carries the list (a coup's
book waits for each operator's close mark).

Settlement's cap on open bets: ``PB_MAX_BETS_PER_COUP``, the most bets one coup's book accepts
(default 50,000; a bet beyond is refused ``BOOK_FULL``), carried by settlement's eventsourcing
environment. It bounds the memory of open bets (``docs/scaling.md``). ``PB_MAX_BETS_PER_OPERATOR``
caps one operator's bets on a coup (default: an equal share of the first, so one operator's flood
never takes another's places).

Settlement's tolerance of the brokers' clocks: ``PB_BROKER_CLOCK_SKEW`` (default 100 ms, 0 to 60 s),
how much earlier than its coup's close mark (another partition leader's append time) a card may
be appended and still be taken (``settlement/claims.py``); carried by its eventsourcing
environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import SecretStr

from contracts import HOUSE
from contracts.seals import MAX_PARTITION
from services.shared.platform.environment import (
    DEFAULT_BROKER_CLOCK_SKEW,
    DEFAULT_MAX_BETS_PER_COUP,
    DEFAULT_VOID_WINDOW,
    Environment,
    SettingsError,
    check_allowed_hosts,
    check_clock_skew,
    check_http_host,
    check_max_bets,
    check_operators,
    default_allowed_hosts,
)
from services.shared.platform.kafka_settings import KafkaAuth

__all__ = [
    "HTTP_PORTS",
    "Environment",
    "Persistence",
    "PostgresSettings",
    "Settings",
    "SettingsError",
    "check_allowed_hosts",
    "check_http_host",
    "default_allowed_hosts",
    "http_port",
]

Persistence = Literal["sqlite", "postgres"]

SERVICE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,30}$")
CELL_POOL_SIZE = 2
"""A partition cell's PostgreSQL pool (its worker thread, and /ready's or /metrics' query)."""
MAX_PARTITIONS = MAX_PARTITION + 1
"""The most partitions a partitioned service's topics may have (a cell per partition)."""

OPERATORS_ENV = "PB_OPERATORS"
"""The variable naming the operators (also in settlement's eventsourcing environment)."""
MAX_BETS_ENV = "PB_MAX_BETS_PER_COUP"
"""The variable capping a coup's bets (also in settlement's eventsourcing environment)."""
OPERATOR_BETS_ENV = "PB_MAX_BETS_PER_OPERATOR"
"""The variable capping one operator's bets on a coup (also in settlement's eventsourcing
environment; empty: an equal share of the coup's cap)."""
CLOCK_SKEW_ENV = "PB_BROKER_CLOCK_SKEW"
"""The variable of the brokers' clock skew settlement tolerates (also in its eventsourcing
environment)."""


@dataclass(frozen=True, slots=True)
class PostgresSettings:
    host: str = "127.0.0.1"
    port: int = 5432
    dbname: str = "punto_banco"
    user: str = "postgres"
    password: str = field(default="", repr=False)  # never in a repr or a log line
    pool_size: int = 5

    def connect_options(self) -> dict[str, Any]:
        """psycopg's ``connect`` keyword arguments for this server (a 10 s connect timeout)."""
        return {
            "host": self.host,
            "port": self.port,
            "dbname": self.dbname,
            "user": self.user,
            "password": self.password,
            "connect_timeout": 10,
        }

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PostgresSettings:
        return cls.from_environment(Environment.read(env))

    @classmethod
    def from_environment(cls, environment: Environment) -> PostgresSettings:
        """``PB_POSTGRES_DSN`` first, then each ``POSTGRES_*`` variable that is set."""
        values: dict[str, Any] = {}
        dsn = environment.postgres_dsn.get_secret_value().strip()
        if dsn:
            values.update(_parse_dsn(dsn))
        for name in ("host", "dbname", "user", "password", "port", "pool_size"):
            value = getattr(environment, f"postgres_{name}")
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            if value not in ("", None):
                values[name] = value
        return cls(**values)


def _parse_dsn(dsn: str) -> dict[str, Any]:
    from psycopg.conninfo import conninfo_to_dict

    try:
        parsed = conninfo_to_dict(dsn)
    except Exception as error:  # psycopg raises ProgrammingError for bad DSNs
        raise SettingsError(f"PB_POSTGRES_DSN is not a valid PostgreSQL DSN: {error}") from None
    out: dict[str, Any] = {}
    for name in ("host", "dbname", "user", "password"):
        if parsed.get(name):
            out[name] = str(parsed[name])
    if parsed.get("port"):
        try:
            out["port"] = int(str(parsed["port"]))
        except ValueError:
            raise SettingsError(  # the port alone: the DSN holds the password
                f"PB_POSTGRES_DSN has a port that is not a number: {parsed['port']!r}"
            ) from None
    return out


PROVISIONED_RECORDER = "services.shared.platform.store.postgres:ProvisionedRecorder"
"""eventsourcing's recorder for a store ``punto-banco db setup`` provisioned (named, not
imported: reading the settings never imports the PostgreSQL driver)."""
FENCED_FACTORY = "services.shared.platform.store.postgres:FencedFactory"
"""eventsourcing's PostgreSQL factory with the writer lease's fence (``writer_fence.py``)."""

HTTP_PORTS = {"dashboard": 8100, "shoe": 8101, "dealing": 8102, "settlement": 8103}
"""Default HTTP port of each process (/health /ready /metrics /asyncapi; the dashboard)."""

_OFF = ("off", "none", "-", "no", "false")


def http_port(service: str, env: Mapping[str, str]) -> int | None:
    """``PB_HTTP_PORT_<SERVICE>``, else ``PB_HTTP_PORT``, else the service's default port.

    ``off`` (or ``none``/``-``) disables the endpoints; ``0`` takes any free port. Read by name
    here (not in :class:`Environment`) because the variable's name holds the service's.
    """
    for key in (f"PB_HTTP_PORT_{service.upper()}", "PB_HTTP_PORT"):
        raw = env.get(key, "").strip().lower()
        if not raw:
            continue
        if raw in _OFF:
            return None
        try:
            port = int(raw)
        except ValueError:
            raise SettingsError(f"{key} must be a whole number, got {raw!r}") from None
        if not 0 <= port <= 65535:
            raise SettingsError(f"{key} must be a port number (0-65535) or 'off', got {raw!r}")
        return port
    return HTTP_PORTS.get(service)


def store_name(service: str, partition: int | None) -> str:
    """A store's name: the service's, or ``<service>-p<N>`` for partition N's cell."""
    return service if partition is None else f"{service}-p{partition}"


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a service process needs to know about its surroundings."""

    service: str
    data_dir: Path = Path("var")
    persistence: Persistence = "sqlite"
    postgres: PostgresSettings = field(default_factory=PostgresSettings)
    kafka_bootstrap_servers: str = "127.0.0.1:9092"
    kafka_auth: KafkaAuth = field(default_factory=KafkaAuth)  # KAFKA_SECURITY_PROTOCOL, ...
    topic_prefix: str = ""
    postgres_schema_prefix: str = ""
    postgres_create_tables: bool = True  # PB_POSTGRES_CREATE_TABLES; no: provisioned store
    consumer_group_id: str = ""
    topic_partitions: int = 3
    # Scale-out (partitioned.py): PB_PARTITIONED runs the service as one cell per Kafka
    # partition it is assigned, each cell with its own store; ``partition`` is a cell's.
    partitioned: bool = False
    partition: int | None = None
    topic_replication_factor: int = 1
    relay_batch_size: int = 2000
    relay_poll_interval: float = 0.2
    consumer_max_records: int = 5000
    consumer_poll_timeout: float = 0.05
    log_level: str = "INFO"
    # Operations (endpoints.py, logs.py): HTTP endpoints and log format.
    http_host: str = "127.0.0.1"  # PB_HTTP_HOST: any address; 0.0.0.0 in containers
    http_port: int | None = None  # None: no HTTP endpoints; 0: any free port
    http_allowed_hosts: tuple[str, ...] = ()  # PB_HTTP_ALLOWED_HOSTS; () = the defaults
    log_format: str = "text"  # "text" or "json" (JSON lines)
    # Record signatures (keys.py): "" means the default under <data dir>/keys/.
    signing_key: str = ""  # PB_SIGNING_KEY; "{service}" is replaced by the service's name
    keyring: str = ""  # PB_KEYRING
    # The shoe's secret keys (secret_keys.py): "" means the default file under <data dir>/keys/.
    shoe_secret_key_file: str = ""  # PB_SHOE_SECRET_KEY_FILE
    shoe_secret_key: str = field(default="", repr=False)  # PB_SHOE_SECRET_KEY: the keys
    # Supervisors' decisions (supervisors.py, decisions.py): dealing's keyring and void window.
    supervisor_keyring: str = ""  # PB_SUPERVISOR_KEYRING; "": <data dir>/keys/supervisors.json
    void_window: float = DEFAULT_VOID_WINDOW  # PB_VOID_WINDOW, in seconds
    # Settlement: the most bets one coup's book accepts (BOOK_FULL beyond).
    max_bets_per_coup: int = DEFAULT_MAX_BETS_PER_COUP  # PB_MAX_BETS_PER_COUP
    max_bets_per_operator: int | None = None  # PB_MAX_BETS_PER_OPERATOR; None: an equal share
    # Settlement: how far two brokers' append times may disagree (the early-card check), in s.
    broker_clock_skew: float = DEFAULT_BROKER_CLOCK_SKEW  # PB_BROKER_CLOCK_SKEW
    # Operators (B2B): PB_OPERATORS, checked by environment.check_operators.
    operators: tuple[str, ...] = (HOUSE,)

    def __post_init__(self) -> None:
        if not SERVICE_NAME.match(self.service):
            raise SettingsError(
                f"service name {self.service!r} must be lower case letters, digits or _"
            )
        if self.log_format not in ("text", "json"):
            raise SettingsError(f"PB_LOG_FORMAT must be 'text' or 'json', not {self.log_format!r}")
        check_http_host(self.http_host)
        try:  # none given: the house alone
            object.__setattr__(self, "operators", check_operators(self.operators))
        except ValueError as error:
            raise SettingsError(f"PB_OPERATORS {error}") from None
        if self.partition is not None and not 0 <= self.partition < MAX_PARTITIONS:
            raise SettingsError(f"partition {self.partition} is not in 0..{MAX_PARTITIONS - 1}")
        try:
            object.__setattr__(self, "max_bets_per_coup", check_max_bets(self.max_bets_per_coup))
        except ValueError as error:
            raise SettingsError(f"{MAX_BETS_ENV} {error}") from None
        if self.max_bets_per_operator is not None:
            try:
                check_max_bets(self.max_bets_per_operator)
            except ValueError as error:
                raise SettingsError(f"{OPERATOR_BETS_ENV} {error}") from None
        try:
            object.__setattr__(self, "broker_clock_skew", check_clock_skew(self.broker_clock_skew))
        except ValueError as error:
            raise SettingsError(f"{CLOCK_SKEW_ENV} {error}") from None
        if self.shoe_secret_key and self.shoe_secret_key_file:
            raise SettingsError(
                "PB_SHOE_SECRET_KEY and PB_SHOE_SECRET_KEY_FILE are both set: give the shoe's "
                "secret keys one way (the file, made by `punto-banco keys init`, or the variable)"
            )

    @classmethod
    def from_env(
        cls,
        service: str,
        env: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Settings:
        """Read settings for ``service`` from ``env`` (default ``os.environ``).

        Keyword ``overrides`` (e.g. from CLI options) win over the environment.
        """
        env = os.environ if env is None else env
        read = Environment.read(env)
        wants_postgres = read.persistence in ("postgres", "postgresql") or (
            read.persistence == ""
            and bool(
                read.postgres_dsn.get_secret_value().strip()
                or read.postgres_host
                or read.postgres_dbname
            )
        )
        values: dict[str, Any] = {
            "service": service,
            "data_dir": read.data_dir,
            "persistence": "postgres" if wants_postgres else "sqlite",
            "postgres": PostgresSettings.from_environment(read),
            "kafka_bootstrap_servers": read.kafka_bootstrap_servers,
            "kafka_auth": KafkaAuth.from_environment(read),
            "topic_prefix": read.topic_prefix,
            "postgres_schema_prefix": read.postgres_schema_prefix,
            "postgres_create_tables": read.postgres_create_tables,
            "consumer_group_id": read.consumer_group,
            "partitioned": read.partitioned,
            "relay_poll_interval": read.relay_poll_interval,
            "log_level": read.log_level,
            "log_format": read.log_format,
            "http_host": read.http_host,
            "http_port": http_port(service, env),
            "http_allowed_hosts": read.http_allowed_hosts,
            "signing_key": read.signing_key,
            "keyring": read.keyring,
            "shoe_secret_key_file": read.shoe_secret_key_file,
            "shoe_secret_key": read.shoe_secret_key.get_secret_value().strip(),
            "supervisor_keyring": read.supervisor_keyring,
            "void_window": read.void_window,
            "max_bets_per_coup": read.max_bets_per_coup,
            "max_bets_per_operator": read.max_bets_per_operator,
            "broker_clock_skew": read.broker_clock_skew,
            "operators": read.operators,
        }
        for name in ("topic_partitions", "relay_batch_size", "consumer_max_records"):
            if getattr(read, name) is not None:
                values[name] = getattr(read, name)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def for_service(self, service: str) -> Settings:
        """The same surroundings for another service (e.g. starting all three)."""
        return replace(self, service=service)

    def for_partition(self, partition: int) -> Settings:
        """A partition cell's settings (``partitioned.py``): the store, the consumer group of
        its offsets and its seal anchors are the partition's own; no HTTP endpoints (the
        process serves them for all its cells)."""
        return replace(self, partition=partition, http_port=None)

    @property
    def store_name(self) -> str:
        """The store's name: the service's, ``<service>-p<N>`` for partition N's cell."""
        return store_name(self.service, self.partition)

    @property
    def allowed_hosts(self) -> tuple[str, ...]:
        """The Host header values the HTTP endpoints answer (``PB_HTTP_ALLOWED_HOSTS``)."""
        return self.http_allowed_hosts or default_allowed_hosts(self.http_host)

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / f"{self.store_name}.sqlite"

    @property
    def keys_dir(self) -> Path:
        """Where ``punto-banco keys init`` puts keys unless PB_SIGNING_KEY / PB_KEYRING say."""
        return self.data_dir / "keys"

    @property
    def signing_key_path(self) -> Path:
        """The service's private signing key (PEM)."""
        if self.signing_key:
            return Path(self.signing_key.replace("{service}", self.service))
        return self.keys_dir / f"{self.service}.pem"

    @property
    def keyring_path(self) -> Path:
        """The keyring: every service's public keys (JSON)."""
        return Path(self.keyring) if self.keyring else self.keys_dir / "keyring.json"

    @property
    def shoe_secret_key_path(self) -> Path:
        """The shoe's secret key file (a JWK Set; unused when PB_SHOE_SECRET_KEY is set)."""
        if self.shoe_secret_key_file:
            return Path(self.shoe_secret_key_file)
        return self.keys_dir / "shoe-secret.json"

    def secret_key_env(self) -> dict[str, str]:
        """The shoe's secret keys as its Application reads them (both variables, one empty,
        so that the process environment cannot add the other)."""
        if self.shoe_secret_key:
            return {"PB_SHOE_SECRET_KEY": self.shoe_secret_key, "PB_SHOE_SECRET_KEY_FILE": ""}
        return {"PB_SHOE_SECRET_KEY": "", "PB_SHOE_SECRET_KEY_FILE": str(self.shoe_secret_key_path)}

    @property
    def postgres_schema(self) -> str:
        """The store's own schema: ``PB_POSTGRES_SCHEMA_PREFIX`` + service name (a cell's:
        + ``_p<N>``)."""
        suffix = "" if self.partition is None else f"_p{self.partition}"
        return f"{self.postgres_schema_prefix}{self.service}{suffix}"

    def topic(self, name: str) -> str:
        """The Kafka topic actually used for the logical project topic ``name``."""
        return f"{self.topic_prefix}{name}"

    def logical_topic(self, topic: str) -> str:
        """Inverse of :meth:`topic`."""
        if self.topic_prefix and topic.startswith(self.topic_prefix):
            return topic[len(self.topic_prefix) :]
        return topic

    @property
    def consumer_group(self) -> str:
        """``PB_CONSUMER_GROUP`` if set, else ``<topic prefix>punto-banco-<service>``.

        A partition cell commits its offsets under the group's name + ``.p<N>`` (it is
        assigned its partition, no member of a group); the process's membership of the
        group itself says which cells it runs (``partitioned.py``)."""
        group = self.consumer_group_id or f"{self.topic_prefix}punto-banco-{self.service}"
        return group if self.partition is None else f"{group}.p{self.partition}"

    @property
    def supervisor_keyring_path(self) -> Path:
        """The supervisors' public keys: who may sign a void (JSON, ``supervisors.py``)."""
        if self.supervisor_keyring:
            return Path(self.supervisor_keyring)
        return self.keys_dir / "supervisors.json"

    @property
    def supervisor_keys_dir(self) -> Path:
        """Where ``punto-banco supervisor keygen`` puts private keys unless told otherwise."""
        return self.keys_dir / "supervisors"

    def decision_env(self) -> dict[str, str]:
        """Dealing's supervisors keyring and void window, as its Application reads them."""
        return {
            "PB_SUPERVISOR_KEYRING": str(self.supervisor_keyring_path),
            "PB_VOID_WINDOW": repr(float(self.void_window)),
        }

    def eventsourcing_env(self) -> dict[str, str]:
        """The environment given to the service's eventsourcing ``Application(env=...)``
        (the shoe's also names its secret keys, dealing's its supervisors keyring and void
        window)."""
        env = self._store_env()
        if self.service == "shoe":
            env.update(self.secret_key_env())
        if self.service == "dealing":
            env.update(self.decision_env())
        if self.service == "settlement":
            env[OPERATORS_ENV] = ",".join(self.operators)
            env[MAX_BETS_ENV] = str(self.max_bets_per_coup)
            env[OPERATOR_BETS_ENV] = str(self.max_bets_per_operator or "")
            env[CLOCK_SKEW_ENV] = repr(float(self.broker_clock_skew))
        return env

    def _store_env(self) -> dict[str, str]:
        if self.persistence == "postgres":
            pg = self.postgres
            env = {
                "PERSISTENCE_MODULE": FENCED_FACTORY,
                "POSTGRES_HOST": pg.host,
                "POSTGRES_PORT": str(pg.port),
                "POSTGRES_DBNAME": pg.dbname,
                "POSTGRES_USER": pg.user,
                "POSTGRES_PASSWORD": pg.password,
                "POSTGRES_SCHEMA": self.postgres_schema,
                "POSTGRES_POOL_SIZE": str(
                    pg.pool_size if self.partition is None else min(pg.pool_size, CELL_POOL_SIZE)
                ),
                # a cell: at most 2 more under load (the default 10 per cell, times every
                # cell of every service, would exceed a server's max_connections)
                "POSTGRES_MAX_OVERFLOW": "10" if self.partition is None else "2",
                "POSTGRES_LOCK_TIMEOUT": "5",
                "CREATE_TABLE": "yes" if self.postgres_create_tables else "no",
            }
            if not self.postgres_create_tables:
                env["PROCESS_RECORDER_TOPIC"] = PROVISIONED_RECORDER
            return env
        return {
            "PERSISTENCE_MODULE": "eventsourcing.sqlite",
            "SQLITE_DBNAME": str(self.sqlite_path),
            "SQLITE_LOCK_TIMEOUT": "10",
        }

    def describe_store(self) -> str:
        if self.persistence == "postgres":
            pg = self.postgres
            where = f"{pg.user}@{pg.host}:{pg.port}/{pg.dbname}"
            return f"postgresql://{where} schema {self.postgres_schema}"
        return f"sqlite {self.sqlite_path}"
