"""The process environment, read and checked by pydantic-settings (:class:`Environment`).

Each field names its variable (the README's settings table); an empty variable counts as
unset. :meth:`Environment.read` reads ``os.environ`` or a given mapping (tests, ``up``) and
turns pydantic's errors into one :class:`SettingsError` that names each bad variable and what it
must be. The HTTP host checks live here too: the services' settings and the dashboard share them.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    SecretStr,
    StringConstraints,
    ValidationError,
)
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from contracts import HOUSE, check_operator


class SettingsError(ValueError):
    """A setting is missing or malformed; the message names the variable to fix."""


_HOST_NAME = re.compile(
    r"(?=.{1,253}\.?$)(?!-)[a-z0-9-]{1,63}(?<!-)(?:\.(?!-)[a-z0-9-]{1,63}(?<!-))*\.?", re.I
)


def check_http_host(host: str) -> str:
    """``host`` (``PB_HTTP_HOST``) if it is an IP address or a host name, else SettingsError.

    Any address is allowed: ``127.0.0.1`` (the default) keeps the endpoints on the machine,
    ``0.0.0.0`` (or ``::``) serves every interface, as a container needs.
    """
    bare = host.strip()
    if bare.startswith("[") and bare.endswith("]"):
        bare = bare[1:-1]
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        pass
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
    bare = lowered[1:-1] if lowered.startswith("[") and lowered.endswith("]") else lowered
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        address = None
    if address is not None:
        return f"[{address}]" if address.version == 6 else str(address)
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
    """The Host header values answered when ``PB_HTTP_ALLOWED_HOSTS`` is not set.

    The bind address (unless it is the wildcard 0.0.0.0 or ::, which no client names),
    ``localhost`` and ``127.0.0.1``.
    """
    hosts: list[str] = []
    try:
        address = ipaddress.ip_address(bind_host.strip("[]"))
    except ValueError:
        hosts.append(bind_host.lower())
    else:
        if not address.is_unspecified:
            hosts.append(f"[{address}]" if address.version == 6 else str(address))
    return tuple(dict.fromkeys([*hosts, "localhost", "127.0.0.1"]))


DEFAULT_VOID_WINDOW = 86_400.0
"""``PB_VOID_WINDOW`` by default: a coup may be voided for 24 hours after it opened."""

DEFAULT_MAX_BETS_PER_COUP = 50_000
"""``PB_MAX_BETS_PER_COUP`` by default: the most bets settlement accepts on one coup (its book
holds each accepted bet until the coup is settled: the cap bounds its memory, docs/scaling.md).
Five times the largest benchmarked coup (10,000 bets)."""


def check_max_bets(value: object) -> int:
    """``PB_MAX_BETS_PER_COUP`` (text or int) as a whole number of at least 1; ValueError
    saying what it must be otherwise."""
    text = str(value).strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 18) or int(text) < 1:
        raise ValueError(f"must be a whole number of bets, at least 1, got {value!r}")
    return int(text)


DEFAULT_BROKER_CLOCK_SKEW = 0.1
"""``PB_BROKER_CLOCK_SKEW`` by default, in seconds: how far settlement lets the append times of
two partition leaders disagree when it asks whether a card left the shoe before betting closed.
A genuine card is appended several hops after the close mark (settlement's BetsClosed, dealing's
DrawCards, the shoe's CardDrawn, each through a relay), which adds to it; brokers kept by NTP
disagree by a few milliseconds. Kept small: a card forged with the shoe's stolen key and
appended within it before the close is not refused as early (docs/security.md)."""

MAX_BROKER_CLOCK_SKEW = 60.0
"""The largest ``PB_BROKER_CLOCK_SKEW``: beyond, the early-card check would mean little."""


def check_clock_skew(value: object) -> float:
    """``PB_BROKER_CLOCK_SKEW`` (a duration, see :func:`parse_duration`, or ``100ms``; ``0``
    allowed) in
    seconds, at most :data:`MAX_BROKER_CLOCK_SKEW`; ValueError saying what it must be."""
    text = str(value).strip()
    found = _DURATION.fullmatch(text)
    seconds = float(found[1]) * _UNIT_SECONDS[found[2].lower()] if found else -1.0
    if not 0 <= seconds <= MAX_BROKER_CLOCK_SKEW:
        raise ValueError(
            f"must be a duration from 0 to {MAX_BROKER_CLOCK_SKEW:.0f}s like 100ms, 2s or 0, "
            f"got {value!r}"
        )
    return seconds


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|[smhd]?)", re.IGNORECASE)
_UNIT_SECONDS = {"": 1, "ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86_400}


def check_operators(entries: str | Iterable[str]) -> tuple[str, ...]:
    """``PB_OPERATORS``: comma separated operator names (``contracts.check_operator``),
    each once; none means the house alone."""
    parts = entries.split(",") if isinstance(entries, str) else list(entries)
    names = tuple(part.strip() for part in parts if part.strip())
    for name in names:
        check_operator(name)
    if len(set(names)) != len(names):
        raise ValueError(f"names an operator twice: {', '.join(names)}")
    return names or (HOUSE,)


def parse_duration(text: str) -> float:
    """Seconds from ``86400``, ``90s``, ``30m``, ``24h`` or ``7d`` (more than 0, at most 10
    years); ValueError naming the forms otherwise."""
    found = _DURATION.fullmatch(text.strip())
    seconds = float(found[1]) * _UNIT_SECONDS[found[2].lower()] if found else 0.0
    if not 0 < seconds <= 10 * 366 * 86_400:
        raise ValueError(f"must be a duration like 24h, 90m, 7d or 86400 (seconds), got {text!r}")
    return seconds


def duration_seconds(value: object) -> object:
    """A setting's duration (text, see :func:`parse_duration`) in seconds; a number stays."""
    return parse_duration(value) if isinstance(value, str) else value


def _one_of(shown: str, *choices: str, word: str = "got") -> Any:
    """A check that the value is one of ``choices``; the message says ``must be <shown>``."""

    def check(value: str) -> str:
        if value not in choices:
            raise ValueError(f"must be {shown}, {word} {value!r}")
        return value

    return AfterValidator(check)


Stripped = Annotated[str, StringConstraints(strip_whitespace=True)]
Lower = Annotated[str, StringConstraints(strip_whitespace=True, to_lower=True)]
Upper = Annotated[str, StringConstraints(strip_whitespace=True, to_upper=True)]


class Environment(BaseSettings):
    """The variables every process reads, with their defaults (see the README's table)."""

    model_config = SettingsConfigDict(case_sensitive=True, extra="ignore", frozen=True)

    data_dir: Path = Field(Path("var"), alias="PB_DATA_DIR")
    persistence: Annotated[
        Lower, _one_of("'sqlite' or 'postgres'", "", "sqlite", "postgres", "postgresql")
    ] = Field("", alias="PB_PERSISTENCE")
    postgres_dsn: SecretStr = Field(SecretStr(""), alias="PB_POSTGRES_DSN")  # holds a password
    postgres_host: str = Field("", alias="POSTGRES_HOST")
    postgres_port: int | None = Field(None, alias="POSTGRES_PORT")
    postgres_dbname: str = Field("", alias="POSTGRES_DBNAME")
    postgres_user: str = Field("", alias="POSTGRES_USER")
    postgres_password: SecretStr = Field(SecretStr(""), alias="POSTGRES_PASSWORD")
    postgres_pool_size: int | None = Field(None, alias="POSTGRES_POOL_SIZE")
    postgres_schema_prefix: str = Field("", alias="PB_POSTGRES_SCHEMA_PREFIX")
    postgres_create_tables: bool = Field(True, alias="PB_POSTGRES_CREATE_TABLES")
    kafka_bootstrap_servers: Stripped = Field("127.0.0.1:9092", alias="KAFKA_BOOTSTRAP_SERVERS")
    kafka_security_protocol: Annotated[
        Upper,
        _one_of(
            "PLAINTEXT, SASL_PLAINTEXT, SASL_SSL or SSL",
            *("", "PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL"),
        ),
    ] = Field("", alias="KAFKA_SECURITY_PROTOCOL")
    kafka_sasl_mechanism: Annotated[
        Upper, _one_of("SCRAM-SHA-512 or SCRAM-SHA-256", "", "SCRAM-SHA-512", "SCRAM-SHA-256")
    ] = Field("", alias="KAFKA_SASL_MECHANISM")
    kafka_sasl_username: Stripped = Field("", alias="KAFKA_SASL_USERNAME")
    kafka_sasl_password: SecretStr = Field(SecretStr(""), alias="KAFKA_SASL_PASSWORD")
    kafka_ssl_cafile: Stripped = Field("", alias="KAFKA_SSL_CAFILE")
    topic_prefix: str = Field("", alias="PB_TOPIC_PREFIX")
    consumer_group: str = Field("", alias="PB_CONSUMER_GROUP")
    topic_partitions: int | None = Field(None, alias="PB_TOPIC_PARTITIONS")
    partitioned: bool = Field(False, alias="PB_PARTITIONED")
    relay_batch_size: int | None = Field(None, alias="PB_RELAY_BATCH_SIZE")
    relay_poll_interval: float = Field(0.2, alias="PB_RELAY_POLL_INTERVAL")
    consumer_max_records: int | None = Field(None, alias="PB_CONSUMER_MAX_RECORDS")
    log_level: Annotated[str, StringConstraints(strip_whitespace=True, to_upper=True)] = Field(
        "INFO", alias="PB_LOG_LEVEL"
    )
    log_format: Annotated[Lower, _one_of("'text' or 'json'", "text", "json", word="not")] = Field(
        "text", alias="PB_LOG_FORMAT"
    )
    http_host: Annotated[str, AfterValidator(check_http_host)] = Field(
        "127.0.0.1", alias="PB_HTTP_HOST"
    )
    http_allowed_hosts: Annotated[
        tuple[str, ...], NoDecode, BeforeValidator(check_allowed_hosts)
    ] = Field((), alias="PB_HTTP_ALLOWED_HOSTS")
    signing_key: Stripped = Field("", alias="PB_SIGNING_KEY")
    keyring: Stripped = Field("", alias="PB_KEYRING")
    shoe_secret_key_file: Stripped = Field("", alias="PB_SHOE_SECRET_KEY_FILE")
    shoe_secret_key: SecretStr = Field(SecretStr(""), alias="PB_SHOE_SECRET_KEY")
    supervisor_keyring: Stripped = Field("", alias="PB_SUPERVISOR_KEYRING")
    void_window: Annotated[float, BeforeValidator(duration_seconds)] = Field(
        DEFAULT_VOID_WINDOW, alias="PB_VOID_WINDOW"
    )
    max_bets_per_coup: Annotated[int, BeforeValidator(check_max_bets)] = Field(
        DEFAULT_MAX_BETS_PER_COUP, alias="PB_MAX_BETS_PER_COUP"
    )
    max_bets_per_operator: Annotated[
        int | None, BeforeValidator(lambda value: None if value is None else check_max_bets(value))
    ] = Field(None, alias="PB_MAX_BETS_PER_OPERATOR")
    broker_clock_skew: Annotated[float, BeforeValidator(check_clock_skew)] = Field(
        DEFAULT_BROKER_CLOCK_SKEW, alias="PB_BROKER_CLOCK_SKEW"
    )
    # Operators (B2B): whose gateways' topics dealing marks and settlement reads.
    operators: Annotated[tuple[str, ...], NoDecode, BeforeValidator(check_operators)] = Field(
        (HOUSE,), alias="PB_OPERATORS"
    )

    @classmethod
    def read(cls, env: Mapping[str, str] | None = None) -> Environment:
        """The variables of ``env`` (default ``os.environ``); SettingsError names the bad ones."""
        token = _ENVIRON.set(env)
        try:
            return cls()
        except ValidationError as error:
            raise _readable(error) from None
        finally:
            _ENVIRON.reset(token)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The environment only (no .env or secrets files): ``os.environ`` or the given one."""
        environ = _ENVIRON.get()
        return (
            init_settings,
            _MappingSource(settings_cls, os.environ if environ is None else environ),
        )


_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar("pb_environment", default=None)
"""The mapping :meth:`Environment.read` was given, for the duration of the read."""


class _MappingSource(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping; empty values are unset."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {key: value for key, value in self._environ.items() if value != ""}


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
        name = str(item["loc"][0]) if item["loc"] else "settings"
        if item["type"] == "value_error":
            what = str(item["ctx"]["error"])
            problems.append(what if what.startswith(name) else f"{name} {what}")
        else:
            expected = _EXPECTED.get(item["type"], item["msg"].lower())
            problems.append(f"{name} {expected}, got {item['input']!r}")
    return SettingsError("; ".join(problems))
