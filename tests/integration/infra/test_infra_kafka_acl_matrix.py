"""The broker's ACL matrix, TLS files and secret files, without a broker.

The matrix is written out here by hand (who writes and reads which topic) and compared
with what ``kafka_acls.py`` derives from the contracts and with what the services really
subscribe to, so a new topic or subscription cannot silently change who may do what.
"""

from __future__ import annotations

import importlib
import re
import stat
from pathlib import Path
from unittest.mock import MagicMock

import pytest
from cryptography import x509

from contracts import (
    BET_COMMANDS,
    DEAD_LETTERS,
    EXTERNAL,
    INCIDENTS,
    MESSAGE_SOURCES,
    MESSAGE_TOPICS,
    SEALS,
    TABLE_COMMANDS,
    TABLE_EVENTS,
    TOPIC_MESSAGES,
    TOPIC_OWNERS,
    bet_commands_topic,
    bet_events_topic,
)
from services.dev.infra.common import Credentials, InfraError, read_private, write_private
from services.dev.infra.kafka_acls import (
    ROLES,
    SERVICE_READS,
    _each_operator,
    consumer_group,
    gateway_operator,
    principal_acls,
    project_acls,
    role_for,
    role_of,
)
from services.dev.infra.kafka_admin import AclOperation, PatternType, ResourceType, salted_password
from services.dev.infra.kafka_auth import (
    auth_from_env,
    check_host,
    scram_format_arguments,
    tls_names,
)
from services.dev.infra.kafka_principals import BrokerPrincipals
from services.dev.infra.kafka_tls import broker_names, ensure_tls
from services.shared.platform.settings import Settings
from tests.integration.infra.kafka_matrix import EVERY_TOPIC, READS, WRITES


def test_the_derived_matrix_is_the_one_written_out_here() -> None:
    assert {name: frozenset(role.writes) for name, role in ROLES.items()} == WRITES
    assert {name: frozenset(role.reads) for name, role in ROLES.items()} == READS


@pytest.mark.parametrize("service", ["shoe", "dealing", "settlement"])
def test_a_service_reads_exactly_the_topics_it_subscribes_to(service: str) -> None:
    module = importlib.import_module(f"services.{service}.service")
    built = module.build_service(Settings(service=service))
    definition = getattr(built, "definition", built)  # a FastStream service, or its definition
    subscribed = {subscription.topic for subscription in definition.subscriptions(MagicMock())}
    assert subscribed == set(SERVICE_READS[service])
    assert subscribed == READS[service]


def test_an_owned_topic_is_written_by_its_owner_alone() -> None:
    for topic, owner in TOPIC_OWNERS.items():
        assert {name for name, writes in WRITES.items() if topic in writes} == {owner}


def test_every_message_from_outside_has_a_principal_allowed_to_send_it() -> None:
    from_outside = [name for name, source in MESSAGE_SOURCES.items() if source == EXTERNAL]
    external = {MESSAGE_TOPICS[name] for name in from_outside}
    senders = WRITES["gateway"] | WRITES["operator"] | WRITES["supervisor"]
    # the gateway is a service too: its dead letters, incidents and seal anchors
    assert external == senders - {DEAD_LETTERS, INCIDENTS, SEALS} == {BET_COMMANDS, TABLE_COMMANDS}


def test_bindings_are_topic_and_group_reads_and_writes_under_the_run_prefixes() -> None:
    bindings = project_acls("run7.", "grp7.")
    assert {b.operation for b in bindings} == {AclOperation.READ, AclOperation.WRITE}
    assert {b.resource_type for b in bindings} == {ResourceType.TOPIC, ResourceType.GROUP}
    for binding in bindings:
        assert binding.host == "*" and binding.principal.startswith("User:")
        if binding.resource_type is ResourceType.TOPIC:
            assert binding.pattern is PatternType.LITERAL
            assert binding.name.removeprefix("run7.") in EVERY_TOPIC
    groups = {
        (b.principal, b.name, b.pattern) for b in bindings if b.resource_type is ResourceType.GROUP
    }
    assert ("User:settlement", "grp7.punto-banco-settlement", PatternType.LITERAL) in groups
    assert ("User:settlement", "grp7.punto-banco-settlement.", PatternType.PREFIXED) in groups
    readers = [name for name, role in ROLES.items() if role.reads]  # not the studio bridge
    assert len(groups) == 2 * len(readers) == 2 * (len(ROLES) - 1)
    # What Settings names a service's consumer group is the group its principal may use.
    settings = Settings(service="dealing", topic_prefix="grp7.")
    assert settings.consumer_group == consumer_group("dealing", "grp7.")


def test_a_principal_has_a_role_by_its_exact_name_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 20, item 11: a name is never read in parts. ``operator-acme`` got the table
    commands and ``gateway-house`` the house's bets from their first part; now a role is a
    role's own name, ``gateway-<operator>`` of a served operator, or given explicitly."""
    assert role_of("gateway") == "gateway" and role_of("operator") == "operator"
    for name in ("operator-acme", "operator-floor-2", "gateway-acme", "gateway-house", "nobody"):
        assert role_of(name) is None, name
    assert role_of("gateway-acme", ("house", "acme")) == "gateway"
    assert role_of("gateway-house", ("house", "acme")) is None
    assert gateway_operator("gateway") == "house" and gateway_operator("gateway-acme") == "acme"
    for name in ("gateway-house", "gateway-", "gateway-Acme", "gatewayacme", "croupier"):
        with pytest.raises(ValueError, match="gateway-<operator>"):
            gateway_operator(name)
    # `infra credentials NAME --add` refuses before it asks the broker anything.
    monkeypatch.setenv("PB_OPERATORS", "house,acme")
    principals = BrokerPrincipals(tmp_path)
    for name, role in (
        ("operator-acme", None),
        ("gateway-house", None),
        ("gateway-house", "gateway"),
    ):
        with pytest.raises(InfraError) as caught:
            principals.add("127.0.0.1:1", name, role)
        assert name in caught.value.problem and "Traceback" not in caught.value.problem
    assert "--role" in caught.value.fix or "gateway-<operator>" in caught.value.fix
    assert not (tmp_path / "secrets").exists()  # no password was made
    acme = principal_acls("gateway-acme", "gateway")
    assert {b.principal for b in acme} == {"User:gateway-acme"}
    # Its group is its own: the base gateway's prefix "punto-banco-gateway." does not cover it.
    assert {b.name for b in acme if b.resource_type is ResourceType.GROUP} == {
        "punto-banco-gateway-acme",
        "punto-banco-gateway-acme.",
    }


def test_scram_sha_512_salted_password_is_pbkdf2_hmac_sha512() -> None:
    # RFC 5802 Hi() with HMAC-SHA-512 = PBKDF2-HMAC-SHA512, dkLen 64 (checked independently).
    import hmac

    password, salt, iterations = b"pencil", b"\x01" * 32, 3
    u = hmac.new(password, salt + b"\x00\x00\x00\x01", "sha512").digest()
    result = bytearray(u)
    for _ in range(iterations - 1):
        u = hmac.new(password, u, "sha512").digest()
        result = bytearray(a ^ b for a, b in zip(result, u, strict=True))
    assert salted_password("pencil", salt, iterations) == bytes(result)


def test_format_arguments_create_every_user_with_sha512() -> None:
    arguments = scram_format_arguments({"admin": "s3cret", "shoe": "pw"})
    assert arguments == [
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,iterations=8192,password=s3cret]",
        "--add-scram",
        "SCRAM-SHA-512=[name=shoe,iterations=8192,password=pw]",
    ]


def test_authentication_mode_and_tls_host_are_checked() -> None:
    assert auth_from_env({}) == "scram"  # authentication by default
    assert auth_from_env({"PB_KAFKA_AUTH": " NONE "}) == "none"  # the opt-out
    assert auth_from_env({"PB_KAFKA_AUTH": " SCRAM "}) == "scram"
    with pytest.raises(InfraError) as caught:
        auth_from_env({"PB_KAFKA_AUTH": "plain"})
    assert "none" in caught.value.fix and "scram" in caught.value.fix
    assert check_host("10.0.0.5") == "10.0.0.5"
    assert check_host("kafka.example.com") == "kafka.example.com"
    with pytest.raises(InfraError):
        check_host("bad host;rm")
    everywhere = tls_names("0.0.0.0", "casino-1.example")
    assert everywhere == ["localhost", "127.0.0.1", "casino-1.example"]


def test_secrets_are_owner_only_and_a_loosened_one_is_refused(tmp_path: Path) -> None:
    credentials = Credentials(tmp_path / "secrets")
    password = credentials.ensure("gateway")
    assert credentials.ensure("gateway") == password  # kept, not replaced
    assert len(password) >= 40
    path = credentials.path("gateway")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    path.chmod(0o644)
    with pytest.raises(InfraError) as caught:
        credentials.read("gateway")
    assert "chmod 600" in caught.value.fix
    with pytest.raises(InfraError):
        credentials.path("../admin")
    write_private(tmp_path / "x" / "secret", "s")
    assert read_private(tmp_path / "x" / "secret") == "s"


def test_the_broker_certificate_is_issued_again_for_a_new_host_by_the_same_ca(
    tmp_path: Path,
) -> None:
    files = ensure_tls(tmp_path, ["localhost", "127.0.0.1"])
    ca_before = files.ca_cert.read_bytes()
    leaf = x509.load_pem_x509_certificates(files.broker_pem.read_bytes())[0]
    assert broker_names(leaf) == {"localhost", "127.0.0.1"}
    for secret in (files.ca_key, files.broker_pem):
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert b"PRIVATE KEY" not in ca_before

    unchanged = files.broker_pem.read_bytes()
    ensure_tls(tmp_path, ["localhost", "127.0.0.1"])
    assert files.broker_pem.read_bytes() == unchanged  # nothing to renew

    ensure_tls(tmp_path, ["localhost", "127.0.0.1", "10.1.2.3", "casino.example"])
    assert files.ca_cert.read_bytes() == ca_before  # the clients' CA file stays valid
    leaf = x509.load_pem_x509_certificates(files.broker_pem.read_bytes())[0]
    assert broker_names(leaf) == {"localhost", "127.0.0.1", "10.1.2.3", "casino.example"}
    ca = x509.load_pem_x509_certificate(ca_before)
    leaf.verify_directly_issued_by(ca)


def test_an_operators_gateway_has_its_own_topics_and_no_other_operators() -> None:
    """PB_OPERATORS=acme,bravo: gateway-acme writes acme's bets and reads acme's answers
    only; the services and readers get every operator's topics."""
    operators = ("acme", "bravo")
    acme = role_for("gateway-acme", "gateway", operators)
    service = {DEAD_LETTERS, INCIDENTS, SEALS}  # the gateway is a service too
    assert set(acme.writes) == {bet_commands_topic("acme"), *service}
    assert set(acme.reads) == {bet_events_topic("acme"), TABLE_EVENTS}
    house = role_for("gateway", "gateway", operators)
    assert set(house.writes) == {BET_COMMANDS, *service}  # the house's
    every = {bet_commands_topic(op) for op in operators} | {
        bet_events_topic(op) for op in operators
    }
    settlement = role_for("settlement", "settlement", operators)
    assert {bet_commands_topic(op) for op in operators} <= set(settlement.reads)
    assert {bet_events_topic(op) for op in operators} <= set(settlement.writes)
    assert BET_COMMANDS not in settlement.reads  # the house is not served here
    assert {bet_commands_topic(op) for op in operators} <= set(
        role_for("dealing", "dealing", operators).writes
    )
    assert every <= set(role_for("dashboard", "dashboard", operators).reads)
    granted = project_acls("", "", operators=operators)
    by_principal: dict[str, set[tuple[str, AclOperation]]] = {}
    for binding in granted:
        if binding.resource_type is ResourceType.TOPIC:
            by_principal.setdefault(binding.principal, set()).add((binding.name, binding.operation))
    assert by_principal["User:gateway-bravo"] == {
        (bet_commands_topic("bravo"), AclOperation.WRITE),
        (bet_events_topic("bravo"), AclOperation.READ),
        (TABLE_EVENTS, AclOperation.READ),
        *((topic, AclOperation.WRITE) for topic in service),
    }
    with pytest.raises(ValueError, match="gateway-<operator>"):
        role_for("croupier", "gateway", operators)


def integrating_topics() -> dict[str, tuple[str, set[str]]]:
    """docs/integrating.md's Topics table: topic (operator ``acme``) -> (produce | read, who)."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "integrating.md").read_text()
    section = text.split("\n## Topics\n", 1)[1].split("\n## ", 1)[0]
    table = {}
    for row in section.splitlines():
        if row.startswith("| `punto-banco."):
            topic, who = (cell.strip() for cell in row.strip("|").split("|")[:2])
            verb, names = who.split(":", 1)
            principals = set(re.findall(r"`([a-z-]+)`", names))
            principals |= {"gateway-acme"} if "your gateway" in names else set()
            table[topic.strip("`").replace("<operator>", "acme")] = (verb, principals)
    return table


def test_the_integrators_page_names_what_each_principal_may_do_and_no_more() -> None:
    """Issue 20, item 12: docs/integrating.md told a gateway it may read book-events and
    shoe-events, which its ACLs deny. Now each row names exactly who may produce or read the
    topic: the gateway its own operator's topics and table-events, the casino's staff the
    table commands and their answers, everything else the house's readers alone."""
    operators = ("acme",)
    documented = integrating_topics()
    assert set(documented) == set(_each_operator(TOPIC_MESSAGES, operators))
    outside = {"gateway-acme": "gateway", "operator": "operator", "supervisor": "supervisor"}
    for topic, (verb, who) in documented.items():
        if verb == "the house's":
            assert who == {"auditor", "dashboard"}, topic
            verb = "read"
        for name, role in outside.items():
            allowed = role_for(name, role, operators)
            granted = allowed.writes if verb == "produce" else allowed.reads
            assert (topic in granted) == (name in who), (topic, name)
        for reader in ("auditor", "dashboard"):
            assert topic in role_for(reader, reader, operators).reads
