"""Every service of a run gets the same settings but its own Kafka login; `up` picks the store
the way the services do."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from contracts import EXTERNAL, MESSAGE_SOURCES, MESSAGE_TOPICS
from services.dev.cli.up_cmd import postgres_settings
from services.dev.demo import orchestrator
from services.dev.demo.live import money, percent
from services.dev.demo.orchestrator import DemoConfig
from services.dev.demo.processes import ServiceSettings, service_env
from services.dev.infra.common import Credentials
from services.dev.infra.kafka_acls import ROLES
from services.dev.infra.kafka_clients import KafkaLogins, sender_of
from services.shared.platform.settings import Settings

INHERITED = {
    "PATH": "/usr/bin",
    "POSTGRES_HOST": "db.example",
    "PB_POSTGRES_DSN": "host=elsewhere",
    "PB_TOPIC_PREFIX": "old.",
}


def test_services_get_the_runs_settings_and_not_inherited_persistence() -> None:
    settings = ServiceSettings("127.0.0.1:9092", Path("/tmp/pb"), topic_prefix="run1.")
    env = service_env(settings, base=INHERITED)
    assert env["PATH"] == "/usr/bin"
    assert env["KAFKA_BOOTSTRAP_SERVERS"] == "127.0.0.1:9092"
    assert env["PB_DATA_DIR"] == str(Path("/tmp/pb").resolve())
    assert env["PB_TOPIC_PREFIX"] == "run1."
    assert env["PB_PERSISTENCE"] == "sqlite"
    assert not any(key.startswith(("POSTGRES_", "PB_POSTGRES")) for key in env)


def test_each_service_logs_in_as_its_own_principal_with_the_brokers_password(
    tmp_path: Path,
) -> None:
    credentials = Credentials(tmp_path / "kafka" / "secrets")  # as the local broker keeps them
    passwords = {name: credentials.ensure(name) for name in ("shoe", "dealing", "settlement")}
    logins = KafkaLogins(home=tmp_path / "kafka")
    settings = ServiceSettings("127.0.0.1:9092", tmp_path, logins=logins)
    inherited = {**INHERITED, "KAFKA_SASL_USERNAME": "admin", "KAFKA_SASL_PASSWORD": "leaked"}
    for name, password in passwords.items():
        env = service_env(settings, base=inherited, service=name)
        assert env["KAFKA_SECURITY_PROTOCOL"] == "SASL_PLAINTEXT"
        assert (env["KAFKA_SASL_USERNAME"], env["KAFKA_SASL_PASSWORD"]) == (name, password)
        auth = Settings.from_env(name, env).kafka_auth  # what the service reads
        assert (auth.username, auth.mechanism) == (name, "SCRAM-SHA-512")


def test_without_authentication_no_inherited_credentials_reach_a_service() -> None:
    settings = ServiceSettings("127.0.0.1:9092", Path("var"))
    inherited = {**INHERITED, "KAFKA_SASL_USERNAME": "admin", "KAFKA_SASL_PASSWORD": "leaked"}
    env = service_env(settings, base=inherited, service="shoe")
    assert env["KAFKA_SECURITY_PROTOCOL"] == "PLAINTEXT"
    assert env["KAFKA_SASL_USERNAME"] == env["KAFKA_SASL_PASSWORD"] == ""


def test_the_gateway_bets_a_supervisor_voids_and_an_operator_runs_the_table() -> None:
    assert sender_of("PlaceBet") == "gateway"
    assert sender_of("VoidCoup") == "supervisor"
    for command in ("OpenTable", "CloseTable", "CloseBetting"):
        assert sender_of(command) == "operator"
    from_outside = [name for name, source in MESSAGE_SOURCES.items() if source == EXTERNAL]
    for command in from_outside:  # the ACL matrix lets each sender write what it sends
        assert MESSAGE_TOPICS[command] in ROLES[sender_of(command)].writes


def test_postgres_settings_are_passed_whole() -> None:
    postgres = {"POSTGRES_HOST": "127.0.0.1", "POSTGRES_PORT": "5433", "POSTGRES_DBNAME": "pb"}
    settings = ServiceSettings("127.0.0.1:9092", Path("var"), postgres=postgres)
    env = service_env(settings, base=INHERITED)
    assert env["PB_PERSISTENCE"] == "postgres"
    assert {key: env[key] for key in postgres} == postgres
    assert "PB_POSTGRES_DSN" not in env


@pytest.mark.parametrize(
    ("flag", "env", "expected"),
    [
        (False, {}, {}),  # SQLite by default
        (True, {}, None),  # --postgres alone: start a local server
        (False, {"PB_PERSISTENCE": "postgres"}, None),
        (
            False,
            {"POSTGRES_HOST": "h", "POSTGRES_PORT": "1"},
            {"POSTGRES_HOST": "h", "POSTGRES_PORT": "1"},
        ),
        (True, {"PB_POSTGRES_DSN": "host=h"}, {"PB_POSTGRES_DSN": "host=h"}),
        (False, {"PB_PERSISTENCE": "sqlite", "POSTGRES_HOST": "h"}, {}),
    ],
)
def test_up_chooses_the_store_like_the_services(
    flag: bool, env: dict[str, str], expected: dict[str, str] | None
) -> None:
    chosen = postgres_settings(flag, env)
    if expected is None:
        assert chosen is None
    else:
        assert chosen is not None
        assert {k: v for k, v in chosen.items() if k != "PB_PERSISTENCE"} == expected


def test_demo_options_are_checked() -> None:
    for bad in ({"coups": 0}, {"tables": 0}, {"wildness": 2.0}, {"bettors": -1}):
        with pytest.raises(ValueError):
            DemoConfig(**bad)


def test_money_is_shown_from_minor_units_without_floats() -> None:
    assert money(123456, "EUR") == "1,234.56 EUR"
    assert money(-5) == "-0.05"
    assert money(Fraction(1999, 2)) == "10.00"  # 999.5 minor units, shown rounded
    assert percent(Fraction(-1, 8)) == "-12.500 %"
    assert percent(None) == "-"


async def test_up_warns_when_the_stores_were_written_with_another_kafka(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = {"id": "cluster-a"}

    async def fake_cluster_id(bootstrap: str, timeout: float = 30.0, auth: object = None) -> str:
        return cluster["id"]

    monkeypatch.setattr(orchestrator, "cluster_id", fake_cluster_id)
    check = orchestrator.check_store_matches_kafka
    assert await check(tmp_path, "k:1", "", {}) is None  # a fresh folder
    (tmp_path / "settlement.sqlite").write_bytes(b"")
    assert await check(tmp_path, "k:1", "", {}) is None  # the same Kafka again
    cluster["id"] = "cluster-b"
    warning = await check(tmp_path, "k:1", "", {})
    assert warning is not None and "fresh --data-dir" in warning
    assert await check(tmp_path, "k:1", "other.", {"POSTGRES_HOST": "h"}) is None
