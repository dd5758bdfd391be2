"""Every setting of a process, declared once: :class:`Settings` (a pydantic model).

Each field names its variable (its alias), default and meaning; docs/operations.md's settings
table is generated from them (``settings_table`` in tests/unit/platform/test_platform_settings.py).
``Settings.from_env(service, env)`` reads a mapping (``os.environ`` by default; an empty variable
counts as unset) and raises one :class:`SettingsError` naming every bad variable;
``Settings(service=...)`` reads nothing. The store is handed to eventsourcing as ITS environment
(:meth:`Settings.eventsourcing_env`), so no domain module names a database. Passwords never
appear in a repr.
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import os
import re
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from contracts import HOUSE, check_operator
from contracts.seals import MAX_PARTITION


class SettingsError(ValueError):
    """A setting is missing or malformed; the message names the variable to fix."""


# ---- checks (also used by the services and tools for their own options) ------------------

_HOST_NAME = re.compile(
    r"(?=.{1,253}\.?$)(?!-)[a-z0-9-]{1,63}(?<!-)(?:\.(?!-)[a-z0-9-]{1,63}(?<!-))*\.?", re.I
)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|[smhd]?)", re.IGNORECASE)
_UNIT_SECONDS = {"": 1, "ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86_400}
_OFF = ("off", "none", "-", "no", "false")

DEFAULT_VOID_WINDOW = 86_400.0
DEFAULT_MAX_BETS_PER_COUP = 50_000
DEFAULT_BROKER_CLOCK_SKEW = 0.1
MAX_BROKER_CLOCK_SKEW = 60.0
MAX_PARTITIONS = MAX_PARTITION + 1
"""The most partitions a partitioned service's topics may have (a cell per partition)."""
SERVICE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,30}$")
INSTANCE_NAME = re.compile(r"^(?=.{1,32}$)[a-z][a-z0-9_]*-[a-z][a-z0-9_-]*$")
"""A service serving one operator: ``gateway-<operator>`` (its store, group, key and anchors
are named so), at most 32 characters (``contracts.ServiceName``)."""
CELL_POOL_SIZE = 2
"""A partition cell's PostgreSQL pool (its worker thread, and /ready's or /metrics' query)."""
HTTP_PORTS = {
    "dashboard": 8100,
    "shoe": 8101,
    "dealing": 8102,
    "settlement": 8103,
    "studio-bridge": 8105,
}
FENCED_FACTORY = "services.shared.platform.store.postgres:FencedFactory"
PROVISIONED_RECORDER = "services.shared.platform.store.postgres:ProvisionedRecorder"
"""eventsourcing's PostgreSQL factory and recorder, named (reading settings imports no driver)."""


def _unbracketed(host: str) -> str:
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def _ip_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``host`` as an IP address (an IPv6 one possibly in brackets), else None."""
    try:
        return ipaddress.ip_address(_unbracketed(host))
    except ValueError:
        return None


def _as_host(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """``address`` as a Host header names it (IPv6 in brackets)."""
    return f"[{address}]" if address.version == 6 else str(address)


def check_http_host(host: str) -> str:
    """``host`` (``PB_HTTP_HOST``) if it is an IP address or a host name, else SettingsError."""
    bare = _unbracketed(host.strip())
    address = _ip_address(bare)
    if address is not None:
        return str(address)
    if _HOST_NAME.fullmatch(bare):
        return bare.lower()
    raise SettingsError(
        f"PB_HTTP_HOST must be an IP address (127.0.0.1, 0.0.0.0, ::1) or a host name, not {host!r}"
    )


def _allowed_host(entry: str) -> str:
    """One ``PB_HTTP_ALLOWED_HOSTS`` entry as Starlette compares it (IPv6 in brackets)."""
    lowered = entry.strip().lower()
    if lowered == "*" or (lowered.startswith("*.") and _HOST_NAME.fullmatch(lowered[2:])):
        return lowered
    address = _ip_address(lowered)
    if address is not None:
        return _as_host(address)
    if "*" in lowered:
        raise SettingsError(
            f"PB_HTTP_ALLOWED_HOSTS: {entry!r} is not a pattern like '*.example.com' (or '*')"
        )
    if ":" in lowered or "/" in lowered:
        raise SettingsError(
            f"PB_HTTP_ALLOWED_HOSTS lists host names without port or scheme, not {entry!r}"
        )
    if not _HOST_NAME.fullmatch(lowered):
        raise SettingsError(f"PB_HTTP_ALLOWED_HOSTS: {entry!r} is not a host name or address")
    return lowered


def check_allowed_hosts(entries: str | Iterable[str]) -> tuple[str, ...]:
    """``PB_HTTP_ALLOWED_HOSTS`` (comma or space separated) as a checked tuple; ``()``: defaults."""
    items = re.split(r"[,\s]+", entries) if isinstance(entries, str) else list(entries)
    return tuple(dict.fromkeys(_allowed_host(item) for item in items if item.strip()))


def default_allowed_hosts(bind_host: str) -> tuple[str, ...]:
    """The bind address (unless a wildcard, which no client names), localhost, 127.0.0.1."""
    address = _ip_address(bind_host)
    if address is None:
        hosts = [bind_host.lower()]
    else:
        hosts = [] if address.is_unspecified else [_as_host(address)]
    return tuple(dict.fromkeys([*hosts, "localhost", "127.0.0.1"]))


def check_max_bets(value: object) -> int:
    """A whole number of bets, at least 1 (text or int); ValueError otherwise."""
    text = str(value).strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 18) or int(text) < 1:
        raise ValueError(f"must be a whole number of bets, at least 1, got {value!r}")
    return int(text)


def check_clock_skew(value: object) -> float:
    """A duration from 0 to :data:`MAX_BROKER_CLOCK_SKEW` (``100ms``, ``2s``, ``0``), in s."""
    found = _DURATION.fullmatch(str(value).strip())
    seconds = float(found[1]) * _UNIT_SECONDS[found[2].lower()] if found else -1.0
    if not 0 <= seconds <= MAX_BROKER_CLOCK_SKEW:
        raise ValueError(
            f"must be a duration from 0 to {MAX_BROKER_CLOCK_SKEW:.0f}s like 100ms, 2s or 0, "
            f"got {value!r}"
        )
    return seconds


def check_operators(entries: str | Iterable[str]) -> tuple[str, ...]:
    """``PB_OPERATORS``: operator names, comma separated, each once; none: the house alone."""
    parts = entries.split(",") if isinstance(entries, str) else list(entries)
    names = tuple(part.strip() for part in parts if part.strip())
    for name in names:
        check_operator(name)
    if len(set(names)) != len(names):
        raise ValueError(f"names an operator twice: {', '.join(names)}")
    return names or (HOUSE,)


def parse_duration(text: str) -> float:
    """Seconds from ``86400``, ``90s``, ``500ms``, ``30m``, ``24h`` or ``7d`` (more than 0, at
    most 10 years); ValueError naming the forms otherwise."""
    found = _DURATION.fullmatch(text.strip())
    seconds = float(found[1]) * _UNIT_SECONDS[found[2].lower()] if found else 0.0
    if not 0 < seconds <= 10 * 366 * 86_400:
        raise ValueError(f"must be a duration like 24h, 90m, 7d or 86400 (seconds), got {text!r}")
    return seconds


def _duration(value: object) -> object:
    return parse_duration(value) if isinstance(value, str) else value


def _off_is_none(value: object) -> object:
    return None if isinstance(value, str) and value.strip().lower() in _OFF else value


def _seal_interval(value: object) -> object:
    try:
        return _duration(_off_is_none(value))
    except ValueError:
        raise ValueError(f"must be a duration like 5s or 500ms, or off, got {value!r}") from None


def _one_of(shown: str, *choices: str, word: str = "got") -> Any:
    """A check that the value is one of ``choices``; the message says ``must be <shown>``."""

    def check(value: str) -> str:
        if value not in choices:
            raise ValueError(f"must be {shown}, {word} {value!r}")
        return value

    return AfterValidator(check)


def http_port(service: str, env: Mapping[str, str]) -> int | None:
    """``PB_HTTP_PORT_<SERVICE>``, else ``PB_HTTP_PORT``, else the service's default port;
    ``off`` disables the endpoints, ``0`` takes any free port."""
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


def _delays(value: object) -> object:
    """``PB_WALLET_RETRY``: comma separated seconds (``0.5,2,10,30,60``), each above 0."""
    if not isinstance(value, str):
        return value
    try:
        delays = tuple(float(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise ValueError(
            f"must be seconds separated by commas (0.5,2,10,60), got {value!r}"
        ) from None
    if not delays or any(not 0 < delay <= 3600 for delay in delays):
        raise ValueError(f"must list delays of more than 0 and at most 3600 s, got {value!r}")
    return delays


def _some_operators(value: object) -> object:
    if isinstance(value, str):
        return check_operators(value) if value.strip() else ()
    return value


def _service(name: str) -> str:
    if not (SERVICE_NAME.match(name) or INSTANCE_NAME.match(name)):
        raise ValueError(f"service name {name!r} must be lower case letters, digits or _")
    return name


def schema_name(service: str) -> str:
    """A service's PostgreSQL schema name: the service's, or for an instance (``gateway-acme``,
    whose ``-`` eventsourcing does not quote) ``gateway_acme_<6 hex of its SHA-256>`` (two
    instances never share one: ``a-b`` and ``a_b`` differ by the digest)."""
    if "-" not in service:
        return service
    digest = hashlib.sha256(service.encode()).hexdigest()[:6]
    return f"{service.replace('-', '_')}_{digest}"


def store_name(service: str, partition: int | None) -> str:
    """A store's name: the service's, or ``<service>-p<N>`` for partition N's cell."""
    return service if partition is None else f"{service}-p{partition}"


# ---- the two logins a process holds: Kafka's and PostgreSQL's -----------------------------

PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL")
MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")


@dataclass(frozen=True, slots=True)
class KafkaAuth:
    """One principal's way in to the broker (PLAINTEXT: nobody's, the default); the protocol
    and the mechanism are checked where they are read (:class:`Settings`' fields)."""

    protocol: str = "PLAINTEXT"
    mechanism: str = "SCRAM-SHA-512"
    username: str = ""
    password: str = field(default="", repr=False)
    cafile: str = ""

    def __post_init__(self) -> None:
        if self.password and not self.sasl:  # a password that would not be sent
            raise SettingsError(
                f"KAFKA_SASL_PASSWORD is set but KAFKA_SECURITY_PROTOCOL is {self.protocol}, "
                "which sends no credentials: set it to SASL_PLAINTEXT (or SASL_SSL beyond this "
                "machine)"
            )

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")

    def ssl_context(self) -> ssl.SSLContext:
        """TLS checked against ``cafile`` (else the system's CAs), the broker's name included;
        read when a client is made (a mounted secret may appear after the settings)."""
        if self.cafile and not Path(self.cafile).is_file():
            raise SettingsError(
                f"KAFKA_SSL_CAFILE={self.cafile!r} is not a file: give the CA certificate (PEM) "
                "that signed the broker's (`punto-banco infra up` prints the local one)"
            )
        return ssl.create_default_context(cafile=self.cafile or None)

    def check_principal(self) -> None:
        """SettingsError unless a SASL protocol has its username and password (checked when a
        client is made: ``keys init`` or ``audit`` never connect)."""
        login = ("KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD")
        missing = [name for name in login if not self.env()[name]]
        if self.sasl and missing:
            raise SettingsError(
                f"KAFKA_SECURITY_PROTOCOL={self.protocol} needs {' and '.join(missing)} (the "
                "principal this process logs in as; `punto-banco infra credentials <principal>` "
                "prints them for the local broker)"
            )

    def client_options(self) -> dict[str, Any]:
        """aiokafka's keyword arguments for this login (none for PLAINTEXT)."""
        self.check_principal()
        if self.protocol == "PLAINTEXT":
            return {}
        options: dict[str, Any] = {
            "security_protocol": self.protocol,
            "ssl_context": self.ssl_context() if self.tls else None,
        }
        if self.sasl:
            options["sasl_mechanism"] = self.mechanism
            options["sasl_plain_username"] = self.username
            options["sasl_plain_password"] = self.password
        return options

    def env(self) -> dict[str, str]:
        """These settings as a child process reads them (all five, empty where unset)."""
        return {
            "KAFKA_SECURITY_PROTOCOL": self.protocol,
            "KAFKA_SASL_MECHANISM": self.mechanism,
            "KAFKA_SASL_USERNAME": self.username,
            "KAFKA_SASL_PASSWORD": self.password,
            "KAFKA_SSL_CAFILE": self.cafile,
        }

    def describe(self) -> str:
        """For logs: the protocol and who logs in, never the password."""
        return f"{self.protocol} as {self.username}" if self.sasl else self.protocol


@dataclass(frozen=True, slots=True)
class PostgresSettings:
    host: str = "127.0.0.1"
    port: int = 5432
    dbname: str = "punto_banco"
    user: str = "postgres"
    password: str = field(default="", repr=False)
    pool_size: int = 5

    def connect_options(self) -> dict[str, Any]:
        """psycopg's ``connect`` keyword arguments for this server (a 10 s connect timeout)."""
        options = dataclasses.asdict(self)
        del options["pool_size"]  # the pool's, not the connection's
        return options | {"connect_timeout": 10}


def _parse_dsn(dsn: str) -> dict[str, Any]:
    from psycopg.conninfo import conninfo_to_dict

    try:
        parsed = conninfo_to_dict(dsn)
    except Exception as error:  # psycopg raises ProgrammingError for bad DSNs
        raise SettingsError(f"PB_POSTGRES_DSN is not a valid PostgreSQL DSN: {error}") from None
    out: dict[str, Any] = {
        name: str(parsed[name])
        for name in ("host", "dbname", "user", "password")
        if parsed.get(name)
    }
    if parsed.get("port"):
        try:
            out["port"] = int(str(parsed["port"]))
        except ValueError:
            raise SettingsError(  # the port alone: the DSN holds the password
                f"PB_POSTGRES_DSN has a port that is not a number: {parsed['port']!r}"
            ) from None
    return out


# ---- the settings --------------------------------------------------------------------------

Stripped = Annotated[str, StringConstraints(strip_whitespace=True)]
Lower = Annotated[str, StringConstraints(strip_whitespace=True, to_lower=True)]
Upper = Annotated[str, StringConstraints(strip_whitespace=True, to_upper=True)]


def _var(alias: str, default: Any, shown: str | None = None, **more: Any) -> Any:
    """A setting's field: its variable and default (``shown``: the default as the table says
    it); its meaning is the docstring under it."""
    extra: Any = {"shown": shown} if shown is not None else None
    return Field(default, alias=alias, json_schema_extra=extra, **more)


class Settings(BaseModel):
    """Everything a service process needs to know about its surroundings."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        validate_by_name=True,
        validate_default=True,
        use_attribute_docstrings=True,
    )

    service: Annotated[str, AfterValidator(_service)]
    kafka_bootstrap_servers: Stripped = _var("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    """the broker"""
    kafka_security_protocol: Annotated[
        Upper, _one_of("PLAINTEXT, SASL_PLAINTEXT, SASL_SSL or SSL", "", *PROTOCOLS)
    ] = _var("KAFKA_SECURITY_PROTOCOL", "", "`PLAINTEXT`")
    """`SASL_PLAINTEXT` (the local broker of `infra up`, on loopback), `SASL_SSL` (beyond this
    machine), `SSL`"""
    kafka_sasl_mechanism: Annotated[
        Upper, _one_of("SCRAM-SHA-512 or SCRAM-SHA-256", "", *MECHANISMS)
    ] = _var("KAFKA_SASL_MECHANISM", "", "`SCRAM-SHA-512`")
    """or `SCRAM-SHA-256`"""
    kafka_sasl_username: Stripped = _var("KAFKA_SASL_USERNAME", "")
    """the principal this process logs in as (each service, tool and client its own:
    docs/security.md); `infra credentials NAME` prints it"""
    kafka_sasl_password: Stripped = _var("KAFKA_SASL_PASSWORD", "", repr=False)
    """the principal's password"""
    kafka_ssl_cafile: Stripped = _var("KAFKA_SSL_CAFILE", "", "the system's CAs")
    """the CA that signed the broker's certificate (TLS only); `infra up` prints the local one"""
    data_dir: Path = _var("PB_DATA_DIR", Path("var"))
    """SQLite stores `<dir>/<service>.sqlite`"""
    persistence: Annotated[
        Lower,
        _one_of("'sqlite' or 'postgres'", "sqlite", "postgres", "postgresql"),
        AfterValidator(lambda name: "postgres" if name == "postgresql" else name),
    ] = _var("PB_PERSISTENCE", "sqlite")
    """`postgres` to use PostgreSQL (also chosen when `POSTGRES_HOST`/`POSTGRES_DBNAME` or
    `PB_POSTGRES_DSN` is set); each service gets its own schema"""
    postgres_host: str = _var("POSTGRES_HOST", "", "`127.0.0.1`")
    """PostgreSQL, as `punto-banco infra up` prints it"""
    postgres_port: int | None = _var("POSTGRES_PORT", None, "`5432`")
    """its port"""
    postgres_dbname: str = _var("POSTGRES_DBNAME", "", "`punto_banco`")
    """its database"""
    postgres_user: str = _var("POSTGRES_USER", "", "`postgres`")
    """the role the service logs in as"""
    postgres_password: str = _var("POSTGRES_PASSWORD", "", repr=False)
    """that role's password"""
    postgres_dsn: str = _var("PB_POSTGRES_DSN", "", repr=False)
    """PostgreSQL as one DSN (`postgresql://user:password@host:port/db`); the `POSTGRES_*`
    variables win over its parts"""
    postgres_pool_size: int | None = _var("POSTGRES_POOL_SIZE", None, "`5`")
    """connections per service"""
    postgres_schema_prefix: str = _var("PB_POSTGRES_SCHEMA_PREFIX", "")
    """put in front of each service's schema name"""
    postgres_create_tables: bool = _var("PB_POSTGRES_CREATE_TABLES", True)
    """`no`: the store was provisioned by `punto-banco db setup` (or `infra up`); the service
    creates no schema or tables and runs as its own least-privilege role (as deploy/k8s and
    compose run it). `yes` gives no rights: a login that may not create tables in its schema is
    told to set `no` (docs/security.md)"""
    topic_prefix: str = _var("PB_TOPIC_PREFIX", "")
    """put in front of every topic name (tests isolate themselves so)"""
    consumer_group_id: str = _var("PB_CONSUMER_GROUP", "", "`<prefix>punto-banco-<service>`")
    """the consumer group"""
    topic_partitions: int = _var("PB_TOPIC_PARTITIONS", 3)
    """partitions of the topics a service creates"""
    topic_replication_factor: int = 1
    partitioned: bool = _var("PB_PARTITIONED", False)
    """`yes`: the service runs a cell per Kafka partition it is given, each with its own store,
    so several processes share the work (docs/scaling.md); `audit`, `recall`, `replay` then read
    every partition's stores, and `db setup` provisions every partition's schema
    (`--partitions`, default `PB_TOPIC_PARTITIONS`)"""
    partition: int | None = None  # a cell's partition (Settings.for_partition)
    relay_batch_size: int = _var("PB_RELAY_BATCH_SIZE", 2000)
    """the outbox relay's batch"""
    relay_poll_interval: float = _var("PB_RELAY_POLL_INTERVAL", 0.2)
    """the outbox relay's idle poll (seconds)"""
    consumer_max_records: int = _var("PB_CONSUMER_MAX_RECORDS", 5000)
    """records fetched at most per batch"""
    seal_interval: Annotated[float | None, BeforeValidator(_seal_interval)] = _var(
        "PB_SEAL_INTERVAL", 5.0, "`5s`"
    )
    """how often a running service seals its new events (a duration like `5s`); `off`: only
    when it stops"""
    log_level: Upper = _var("PB_LOG_LEVEL", "INFO")
    """logging level"""
    log_format: Annotated[Lower, _one_of("'text' or 'json'", "text", "json", word="not")] = _var(
        "PB_LOG_FORMAT", "text"
    )
    """`json` for JSON lines"""
    http_host: Annotated[str, AfterValidator(check_http_host)] = _var("PB_HTTP_HOST", "127.0.0.1")
    """the address the HTTP endpoints (and the dashboard) bind; any address: `0.0.0.0` (or `::`)
    in a container, so probes and Prometheus reach it"""
    http_port: Annotated[int | None, BeforeValidator(_off_is_none)] = _var(
        "PB_HTTP_PORT", None, "shoe 8101, dealing 8102, settlement 8103, dashboard 8100"
    )
    """the HTTP port (`PB_HTTP_PORT_<SERVICE>` for one service); `off` for none, `0` for any
    free port"""
    http_allowed_hosts: Annotated[tuple[str, ...], BeforeValidator(check_allowed_hosts)] = _var(
        "PB_HTTP_ALLOWED_HOSTS", (), "the bind address, `localhost`, `127.0.0.1`"
    )
    """the Host header values answered, comma separated (`*.example.com` patterns; `*` turns the
    check off); set it when binding `0.0.0.0` to the names clients use"""
    signing_key: Stripped = _var("PB_SIGNING_KEY", "", "`<PB_DATA_DIR>/keys/<service>.pem`")
    """the service's private key (mode 0600); `{service}` in it is replaced by the service's
    name"""
    keyring: Stripped = _var("PB_KEYRING", "", "`<PB_DATA_DIR>/keys/keyring.json`")
    """every service's public keys: what a record's `pb-sig` is checked with"""
    shoe_secret_key_file: Stripped = _var(
        "PB_SHOE_SECRET_KEY_FILE", "", "`<PB_DATA_DIR>/keys/shoe-secret.json`"
    )
    """the shoe only: its secret keys (a JWK Set, mode 0600, made by `keys init`), which encrypt
    each shoe's order and salt at rest; the first key encrypts, all decrypt"""
    shoe_secret_key: Stripped = _var("PB_SHOE_SECRET_KEY", "", repr=False)
    """the shoe only, instead of the file: `<key id>:<base64 of 32 bytes>[,...]`, the first
    encrypting"""
    supervisor_keyring: Stripped = _var(
        "PB_SUPERVISOR_KEYRING", "", "`<PB_DATA_DIR>/keys/supervisors.json`"
    )
    """dealing (and `audit`): the supervisors' public keys, who may sign a void (`supervisor
    keygen` adds one; read again when it changes)"""
    void_window: Annotated[float, BeforeValidator(_duration)] = _var(
        "PB_VOID_WINDOW", DEFAULT_VOID_WINDOW, "`24h`"
    )
    """dealing: how long after a coup opened it may be voided (seconds, or `90m`, `24h`, `7d`)"""
    max_bets_per_coup: Annotated[int, BeforeValidator(check_max_bets)] = _var(
        "PB_MAX_BETS_PER_COUP", DEFAULT_MAX_BETS_PER_COUP
    )
    """settlement: the most bets one coup accepts (all operators together); a bet beyond is
    refused `BOOK_FULL`. It bounds the memory of open bets: about 670 bytes each, 2.2 KB with
    the longest ids (`docs/scaling.md`)"""
    max_bets_per_operator: Annotated[
        int | None, BeforeValidator(lambda value: None if value is None else check_max_bets(value))
    ] = _var("PB_MAX_BETS_PER_OPERATOR", None, "`PB_MAX_BETS_PER_COUP` / the number of operators")
    """settlement: the most bets one coup accepts from one operator (`BOOK_FULL` beyond); the
    default shares the coup's cap equally, so one operator's flood never takes another's places;
    higher over-commits the coup's cap (`docs/scaling.md`)"""
    broker_clock_skew: Annotated[float, BeforeValidator(check_clock_skew)] = _var(
        "PB_BROKER_CLOCK_SKEW", DEFAULT_BROKER_CLOCK_SKEW, "`100ms`"
    )
    """settlement: how far the brokers' clocks may disagree (`0` to `60s`). A card the shoe drew
    is refused (`UNEXPECTED_CARD`) when its record was appended before its coup's close mark, two
    append times of two partition leaders: one appended at most this long before the mark is
    taken, so a leader whose clock is behind refuses no genuine card. Keep the brokers on NTP and
    this small: a card forged with the shoe's stolen key within it before the close stands
    (docs/security.md)"""
    operators: Annotated[tuple[str, ...], BeforeValidator(check_operators)] = _var(
        "PB_OPERATORS", (HOUSE,), "`house`"
    )
    """the operators (B2B) whose bettors the tables serve, comma separated
    (`[a-z][a-z0-9_-]{0,31}`): dealing marks each one's bet-commands topic, settlement reads each
    and answers on each one's bet-events topic (see docs/integrating.md)"""
    gateway_operators: Annotated[tuple[str, ...], BeforeValidator(_some_operators)] = _var(
        "PB_GATEWAY_OPERATORS", (), "every operator in the operators folder"
    )
    """the gateway: the operators this process serves, comma separated (each at most 24
    characters: its service `gateway-<operator>` names its store, consumer group, key and seal
    anchors)"""
    operators_dir: Stripped = _var("PB_OPERATORS_DIR", "", "`<PB_DATA_DIR>/keys/operators`")
    """the gateway: the operators' secret files (`operators add`)"""
    gateway_port: int = _var("PB_GATEWAY_PORT", 8104, ge=0, le=65535)
    """the gateway's HTTP API and its `/health`, `/ready`, `/metrics` (on `PB_HTTP_HOST`)"""
    gateway_answer_wait: float = _var("PB_GATEWAY_ANSWER_WAIT", 10.0, "`10` (s)", gt=0, le=3600)
    """how long `POST /v1/bets` waits for settlement's answer at most (then 202 PENDING)"""
    gateway_rate: float = _var("PB_GATEWAY_RATE", 200.0, "`200`", gt=0, le=1_000_000)
    """per operator: requests per second (over: 429 with `Retry-After`)"""
    gateway_burst: int = _var("PB_GATEWAY_BURST", 400, ge=1)
    """per operator: the burst of requests taken above the rate"""
    gateway_max_body: int = _var("PB_GATEWAY_MAX_BODY", 4096, ge=256, le=1_048_576)
    """the largest request body, in bytes (over: 413)"""
    wallet_timeout: float = _var("PB_WALLET_TIMEOUT", 5.0, "`5` (s)", gt=0, le=300)
    """a wallet call's time-out (a debit without an answer by then is rolled back)"""
    wallet_retry: Annotated[tuple[float, ...], BeforeValidator(_delays)] = _var(
        "PB_WALLET_RETRY", (0.5, 2.0, 10.0, 30.0, 60.0), "`0.5,2,10,30,60`"
    )
    """seconds between tries of a credit or rollback without an answer; the last repeats for
    ever"""
    wallet_max_in_flight: int = _var("PB_WALLET_MAX_IN_FLIGHT", 32, ge=1, le=10_000)
    """per operator: wallet calls in flight at once"""
    wallet_zero_credits: bool = _var("PB_WALLET_ZERO_CREDITS", False)
    """`yes`: a losing bet gets a zero credit (round closure)"""
    wallet_silence: float = _var("PB_WALLET_SILENCE", 60.0, "`60` (s)", gt=0, le=86_400)
    """`/ready` names an operator whose wallet has left calls unanswered this long"""
    studio_table: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:-]{0,64}$")] = _var(
        "PB_STUDIO_TABLE", "", "none (required)"
    )
    """the studio bridge: the table its device deals (the key of every read it publishes)"""
    studio_device: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,32}$")] = _var(
        "PB_STUDIO_DEVICE", "shoe-1", "`shoe-1`"
    )
    """the studio bridge: the device id it expects in every line (another's lines are refused)"""
    studio_device_host: Stripped = _var("PB_STUDIO_DEVICE_HOST", "127.0.0.1")
    """the studio bridge: the device's TCP host"""
    studio_device_port: int = _var("PB_STUDIO_DEVICE_PORT", 0, "none (required)", ge=0, le=65535)
    """the studio bridge: the device's TCP port"""
    studio_silence: float = _var("PB_STUDIO_SILENCE", 30.0, "`30` (s)", gt=0, le=3600)
    """the studio bridge: a device connection that sends nothing this long is opened again"""

    def __init__(self, service: str | None = None, /, **values: Any) -> None:
        """``values`` by field name or by variable; given both ways, the later wins."""
        if service is not None:
            values["service"] = service
        fields = type(self).model_fields
        by_alias = {(fields[n].alias if n in fields else None) or n: v for n, v in values.items()}
        try:
            super().__init__(**by_alias)
        except ValidationError as error:
            raise _readable(error) from None

    @model_validator(mode="before")
    @classmethod
    def _logins(cls, data: Any) -> Any:
        """``postgres=`` and ``kafka_auth=`` given whole become their variables' fields."""
        if not isinstance(data, dict):
            return data
        given: dict[str, Any] = {}
        pg = data.pop("postgres", None)
        if isinstance(pg, PostgresSettings):
            given |= {f"postgres_{n}": v for n, v in dataclasses.asdict(pg).items()}
            given["postgres_dsn"] = ""
        auth = data.pop("kafka_auth", None)
        if isinstance(auth, KafkaAuth):
            given |= {name.lower(): value for name, value in auth.env().items()}
        for name, value in given.items():  # by alias: it wins over the environment's
            data.pop(name, None)
            data[cls.model_fields[name].alias or name] = value
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.partition is not None and not 0 <= self.partition < MAX_PARTITIONS:
            raise ValueError(f"partition {self.partition} is not in 0..{MAX_PARTITIONS - 1}")
        if self.shoe_secret_key and self.shoe_secret_key_file:
            raise ValueError(
                "PB_SHOE_SECRET_KEY and PB_SHOE_SECRET_KEY_FILE are both set: give the shoe's "
                "secret keys one way (the file, made by `punto-banco keys init`, or the variable)"
            )
        self.kafka_auth, self.postgres  # noqa: B018 (checked now: a login that cannot work)
        return self

    @classmethod
    def from_env(
        cls, service: str, env: Mapping[str, str] | None = None, **overrides: Any
    ) -> Settings:
        """``service``'s settings from ``env`` (default ``os.environ``); ``overrides`` (e.g.
        CLI options; None: not given) win over it."""
        environ = os.environ if env is None else env
        aliases = {info.alias for info in cls.model_fields.values()} - {None}
        values: dict[str, Any] = {
            name: value for name, value in environ.items() if name in aliases and value != ""
        }  # an empty variable counts as unset
        port_problem = ""
        try:
            values["http_port"] = http_port(service, environ)
        except SettingsError as error:  # named with every other bad variable, not alone
            port_problem = str(error)
        values |= {name: value for name, value in overrides.items() if value is not None}
        try:
            read = cls(service, **values)
        except SettingsError as error:
            raise SettingsError("; ".join(filter(None, [port_problem, str(error)]))) from None
        if port_problem:
            raise SettingsError(port_problem)
        named = {"postgres_dsn", "postgres_host", "postgres_dbname"} & read.model_fields_set
        if "persistence" not in read.model_fields_set and named:
            return replace(read, persistence="postgres")
        return read

    def for_service(self, service: str) -> Settings:
        """The same surroundings for another service (e.g. starting all three)."""
        return replace(self, service=service)

    def for_partition(self, partition: int) -> Settings:
        """A partition cell's: its own store, offsets' group and anchors; no HTTP endpoints
        (the process serves them for all its cells)."""
        return replace(self, partition=partition, http_port=None)

    @property
    def kafka_auth(self) -> KafkaAuth:
        return KafkaAuth(
            self.kafka_security_protocol or "PLAINTEXT",
            self.kafka_sasl_mechanism or "SCRAM-SHA-512",
            self.kafka_sasl_username,
            self.kafka_sasl_password,
            self.kafka_ssl_cafile,
        )

    @property
    def postgres(self) -> PostgresSettings:
        """``PB_POSTGRES_DSN`` first, then each ``POSTGRES_*`` variable that is set."""
        values = _parse_dsn(self.postgres_dsn.strip()) if self.postgres_dsn.strip() else {}
        for each in dataclasses.fields(PostgresSettings):
            value = getattr(self, f"postgres_{each.name}")
            if value not in ("", None):
                values[each.name] = value
        return PostgresSettings(**values)

    @property
    def store_name(self) -> str:
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
        return self.data_dir / "keys"

    @property
    def signing_key_path(self) -> Path:
        if self.signing_key:
            return Path(self.signing_key.replace("{service}", self.service))
        return self.keys_dir / f"{self.service}.pem"

    @property
    def keyring_path(self) -> Path:
        return Path(self.keyring) if self.keyring else self.keys_dir / "keyring.json"

    @property
    def shoe_secret_key_path(self) -> Path:
        if self.shoe_secret_key_file:
            return Path(self.shoe_secret_key_file)
        return self.keys_dir / "shoe-secret.json"

    @property
    def supervisor_keyring_path(self) -> Path:
        if self.supervisor_keyring:
            return Path(self.supervisor_keyring)
        return self.keys_dir / "supervisors.json"

    @property
    def supervisor_keys_dir(self) -> Path:
        return self.keys_dir / "supervisors"

    @property
    def postgres_schema(self) -> str:
        """``PB_POSTGRES_SCHEMA_PREFIX`` + service name (a cell's: + ``_p<N>``)."""
        suffix = "" if self.partition is None else f"_p{self.partition}"
        return f"{self.postgres_schema_prefix}{schema_name(self.service)}{suffix}"

    @property
    def consumer_group(self) -> str:
        """``PB_CONSUMER_GROUP`` or ``<topic prefix>punto-banco-<service>``; a cell commits
        under it + ``.p<N>`` (assigned its partition, it is no member of the group)."""
        group = self.consumer_group_id or f"{self.topic_prefix}punto-banco-{self.service}"
        return group if self.partition is None else f"{group}.p{self.partition}"

    def topic(self, name: str) -> str:
        """The Kafka topic of the logical project topic ``name``."""
        return f"{self.topic_prefix}{name}"

    def logical_topic(self, topic: str) -> str:
        """Inverse of :meth:`topic`."""
        return topic.removeprefix(self.topic_prefix)

    def secret_key_env(self) -> dict[str, str]:
        """The shoe's secret keys as its Application reads them (one of the two empty)."""
        if self.shoe_secret_key:
            return {"PB_SHOE_SECRET_KEY": self.shoe_secret_key, "PB_SHOE_SECRET_KEY_FILE": ""}
        return {"PB_SHOE_SECRET_KEY": "", "PB_SHOE_SECRET_KEY_FILE": str(self.shoe_secret_key_path)}

    def eventsourcing_env(self) -> dict[str, str]:
        """The environment of the service's eventsourcing ``Application(env=...)``: its store,
        and what its domain reads (the shoe's keys, dealing's voids, settlement's limits)."""
        env = self._store_env()
        if self.service == "shoe":
            env.update(self.secret_key_env())
        if self.service == "dealing":
            env["PB_SUPERVISOR_KEYRING"] = str(self.supervisor_keyring_path)
            env["PB_VOID_WINDOW"] = repr(float(self.void_window))
        if self.service == "settlement":
            env["PB_OPERATORS"] = ",".join(self.operators)
            env["PB_MAX_BETS_PER_COUP"] = str(self.max_bets_per_coup)
            env["PB_MAX_BETS_PER_OPERATOR"] = str(self.max_bets_per_operator or "")
            env["PB_BROKER_CLOCK_SKEW"] = repr(float(self.broker_clock_skew))
        return env

    def _store_env(self) -> dict[str, str]:
        if self.persistence != "postgres":
            return {
                "PERSISTENCE_MODULE": "eventsourcing.sqlite",
                "SQLITE_DBNAME": str(self.sqlite_path),
                "SQLITE_LOCK_TIMEOUT": "10",
            }
        pg, cell = self.postgres, self.partition is not None
        env = {
            "PERSISTENCE_MODULE": FENCED_FACTORY,
            "POSTGRES_HOST": pg.host,
            "POSTGRES_PORT": str(pg.port),
            "POSTGRES_DBNAME": pg.dbname,
            "POSTGRES_USER": pg.user,
            "POSTGRES_PASSWORD": pg.password,
            "POSTGRES_SCHEMA": self.postgres_schema,
            # a cell's pool is small: every cell of every service shares max_connections
            "POSTGRES_POOL_SIZE": str(min(pg.pool_size, CELL_POOL_SIZE) if cell else pg.pool_size),
            "POSTGRES_MAX_OVERFLOW": "2" if cell else "10",
            "POSTGRES_LOCK_TIMEOUT": "5",
            "CREATE_TABLE": "yes" if self.postgres_create_tables else "no",
        }
        if not self.postgres_create_tables:
            env["PROCESS_RECORDER_TOPIC"] = PROVISIONED_RECORDER
        return env

    def describe_store(self) -> str:
        if self.persistence == "postgres":
            pg = self.postgres
            where = f"{pg.user}@{pg.host}:{pg.port}/{pg.dbname}"
            return f"postgresql://{where} schema {self.postgres_schema}"
        return f"sqlite {self.sqlite_path}"


def replace(settings: Settings, **changes: Any) -> Settings:
    """A copy of ``settings`` with ``changes`` (by field name; ``postgres=``, ``kafka_auth=``
    whole), checked again: ``dataclasses.replace`` for the settings."""
    try:
        return type(settings).model_validate({**dict(settings), **changes})
    except ValidationError as error:
        raise _readable(error) from None


_EXPECTED = {
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "path_type": "must be a folder path",
    "bool_parsing": "must be yes or no",
}


def _readable(error: ValidationError) -> SettingsError:
    """One message naming every bad variable, what it must be and what it was."""
    problems = []
    for item in error.errors():
        name = str(item["loc"][0]) if item["loc"] else ""
        if item["type"] == "value_error":
            what = str(item["ctx"]["error"])
            problems.append(what if not name or what.startswith(name) else f"{name} {what}")
        else:
            expected = _EXPECTED.get(item["type"], item["msg"].lower())
            problems.append(f"{name} {expected}, got {item['input']!r}")
    return SettingsError("; ".join(problems))
