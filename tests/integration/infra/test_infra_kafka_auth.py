"""The broker as `infra up` starts it by default (SASL/SCRAM, TLS, StandardAuthorizer) allows
each principal what the matrix says and nothing else: the gateway cannot write table-events,
the dashboard and the auditor write nothing; clients without valid credentials, or TLS without
the broker's CA, fail.

One broker of its own for the module (temporary folder, free ports; about 35 s with its two
starts and stops): it is first started WITHOUT authentication (``PB_KAFKA_AUTH=none``, a data
folder as older versions left it), then with the default configuration, which moves that
folder aside. The matrix is checked on a
per-run topic and group prefix granted with :func:`grant_project_acls`, as tests and the
bench do; `infra up` itself granted the unprefixed project topics.
"""

from __future__ import annotations

import asyncio
import functools
import os
import secrets
import socket
import ssl
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.client import AIOKafkaClient
from aiokafka.conn import create_conn
from aiokafka.errors import (
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    KafkaError,
    TopicAuthorizationFailedError,
)

from contracts import (
    BET_COMMANDS,
    SHOE_EVENTS,
    TABLE_EVENTS,
    TOPIC_MESSAGES,
    bet_commands_topic,
    bet_events_topic,
)
from services.dev.infra.common import InfraError, load_state
from services.dev.infra.kafka import KafkaBroker
from services.dev.infra.kafka_acls import (
    consumer_group,
    ensure_project_topics,
    grant_project_acls,
    project_acls,
    revoke_project_acls,
)
from services.dev.infra.kafka_admin import (
    AclBinding,
    AclOperation,
    AdminSession,
    CreateAcls,
    PatternType,
    ResourceType,
    acl_filter,
)
from services.dev.infra.kafka_auth import scram_login
from services.dev.infra.processes import run_async
from services.dev.infra.programs import checked_java
from services.shared.platform.settings import KafkaAuth
from tests.integration.infra.kafka_matrix import READS, WRITES
from tests.integration.platform.kafka_tools import refuse_undescribed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PUNTO_BANCO = [sys.executable, "-m", "services.tools.cli.main"]
TOPICS = sorted(TOPIC_MESSAGES)
PRINCIPALS = sorted(WRITES)
READERS = [name for name in PRINCIPALS if READS[name]]  # not the studio bridge: no group


@dataclass(frozen=True)
class Secured:
    broker: KafkaBroker
    bootstrap: str
    prefix: str  # the run's topic and consumer-group prefix

    def login(self, principal: str) -> KafkaAuth:
        return self.broker.login(principal)

    def topic(self, logical: str) -> str:
        return self.prefix + logical


async def _seed(bootstrap: str, admin: KafkaAuth, topics: list[str]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **admin.client_options())
    await producer.start()
    try:
        for topic in topics:
            await producer.send_and_wait(topic, b"seed", key=b"table-1", partition=0)
    finally:
        await producer.stop()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    try:
        checked_java()
    except InfraError as error:
        pytest.skip(f"no local Java for a broker of our own: {error.problem}")
    home = tmp_path_factory.mktemp("auth") / "kafka"
    before = KafkaBroker(home=home, preferred_port=None, heap="512m", auth="none")
    try:
        plaintext = before.start()

        async def write_legacy() -> None:
            legacy = AIOKafkaProducer(bootstrap_servers=plaintext)
            await legacy.start()
            try:
                await legacy.send_and_wait("legacy", b"from before authentication")
            finally:
                await legacy.stop()

        run_async(write_legacy())
    finally:
        before.stop()

    broker = KafkaBroker(home=home, preferred_port=None, heap="512m")  # the default: scram
    assert broker.auth == "scram"
    try:
        bootstrap = broker.start()
        prefix = f"auth{secrets.token_hex(3)}."
        admin = broker.admin_login()

        async def prepare() -> None:
            await ensure_project_topics(bootstrap, admin, prefix, partitions=1)
            await grant_project_acls(bootstrap, admin, prefix, prefix)
            await _seed(bootstrap, admin, [prefix + topic for topic in TOPICS])

        run_async(prepare())
        yield Secured(broker, bootstrap, prefix)
    finally:
        broker.stop()


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PUNTO_BANCO, "infra", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )


def _exports(stdout: str) -> dict[str, str]:
    lines = [line.removeprefix("export ") for line in stdout.splitlines() if line]
    return dict(line.split("=", 1) for line in lines)


async def _produce(
    bootstrap: str, login: KafkaAuth, topic: str, *, idempotent: bool = False
) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=idempotent,
        request_timeout_ms=10_000,
        **login.client_options(),
    )
    await producer.start()
    try:
        await asyncio.wait_for(producer.send_and_wait(topic, b"x", key=b"table-1"), 20)
    finally:
        await producer.stop()


async def _read_first(bootstrap: str, login: KafkaAuth, topic: str) -> bytes:
    """The first record of partition 0 (a consumer without a group: assign and fetch)."""
    await refuse_undescribed(bootstrap, login.client_options(), topic)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        request_timeout_ms=10_000,
        **login.client_options(),
    )
    await consumer.start()
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        await consumer.seek_to_beginning(partition)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while loop.time() < deadline:
            batch = await consumer.getmany(partition, timeout_ms=200)
            for records in batch.values():
                return records[0].value or b""
        raise AssertionError(f"nothing read from {topic}")
    finally:
        await consumer.stop()


async def _commit_in_group(bootstrap: str, login: KafkaAuth, topic: str, group: str) -> None:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        request_timeout_ms=10_000,
        **login.client_options(),
    )
    await consumer.start()
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        await asyncio.wait_for(consumer.commit({partition: 1}), 20)
    finally:
        await consumer.stop()


def test_a_data_folder_formatted_without_authentication_is_moved_aside(secured: Secured) -> None:
    home = secured.broker.home
    aside = list(home.glob("data.before-auth-*"))
    assert len(aside) == 1
    assert any(aside[0].glob("legacy-0"))  # the old topic is kept there ...
    assert not any(secured.broker.data_dir.glob("legacy-*"))  # ... not in the new cluster


def test_secrets_are_readable_by_their_owner_only(secured: Secured) -> None:
    broker = secured.broker
    secrets_dir = broker.credentials.folder
    assert stat.S_IMODE(secrets_dir.stat().st_mode) == 0o700
    files = list(secrets_dir.iterdir())
    names = {path.name for path in files}
    assert {f"{name}.password" for name in ["admin", *PRINCIPALS]} <= names
    assert {"ca.key", "broker.pem"} <= names
    assert "format.args" not in names  # the format-time passwords are gone
    for path in [*files, broker.config_file, broker.state_file]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    config = broker.config_file.read_text()
    assert str(broker.credentials.read("admin")) in config
    assert str(broker.credentials.read("gateway")) not in config
    assert b"PRIVATE KEY" not in broker.tls_files.ca_cert.read_bytes()


@pytest.mark.parametrize("principal", PRINCIPALS)
async def test_a_principal_writes_exactly_the_topics_the_matrix_gives_it(
    secured: Secured, principal: str
) -> None:
    login = secured.login(principal)
    allowed, denied = [], []
    for topic in TOPICS:
        try:
            # The services' producers are idempotent: WRITE must be enough for that.
            await _produce(
                secured.bootstrap, login, secured.topic(topic), idempotent=bool(WRITES[principal])
            )
            allowed.append(topic)
        except TopicAuthorizationFailedError:
            denied.append(topic)
    assert set(allowed) == WRITES[principal]
    assert set(denied) == set(TOPICS) - WRITES[principal]


@pytest.mark.parametrize("principal", PRINCIPALS)
async def test_a_principal_reads_exactly_the_topics_the_matrix_gives_it(
    secured: Secured, principal: str
) -> None:
    login = secured.login(principal)
    allowed, denied = [], []
    for topic in TOPICS:
        try:
            assert await _read_first(secured.bootstrap, login, secured.topic(topic)) == b"seed"
            allowed.append(topic)
        except TopicAuthorizationFailedError:
            denied.append(topic)
    assert set(allowed) == READS[principal]
    assert set(denied) == set(TOPICS) - READS[principal]


@pytest.mark.parametrize("principal", READERS)
async def test_a_principal_uses_its_own_consumer_groups_and_no_other(
    secured: Secured, principal: str
) -> None:
    login, topic = secured.login(principal), secured.topic(sorted(READS[principal])[0])
    own = consumer_group(principal, secured.prefix)
    await _commit_in_group(secured.bootstrap, login, topic, own)
    await _commit_in_group(secured.bootstrap, login, topic, own + ".replay")
    other = "dashboard" if principal != "dashboard" else "auditor"
    for group in (consumer_group(other, secured.prefix), "punto-banco-anything", own + "-x"):
        with pytest.raises(GroupAuthorizationFailedError):
            await _commit_in_group(secured.bootstrap, login, topic, group)


async def test_a_service_joins_its_group_and_consumes_as_the_platform_does(
    secured: Secured,
) -> None:
    consumer = AIOKafkaConsumer(
        secured.topic(BET_COMMANDS),
        bootstrap_servers=secured.bootstrap,
        group_id=consumer_group("settlement", secured.prefix) + ".joined",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **secured.login("settlement").client_options(),
    )
    await consumer.start()
    try:
        record = await asyncio.wait_for(consumer.getone(), 30)
        await consumer.commit()
    finally:
        await consumer.stop()
    assert record.value == b"seed"


async def test_a_client_without_credentials_is_refused(secured: Secured) -> None:
    state_ports = [secured.bootstrap, secured.broker.tls_bootstrap() or ""]
    for bootstrap in state_ports:  # PLAINTEXT on the SASL listeners: no answer
        client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        try:
            with pytest.raises(KafkaConnectionError):
                await client.bootstrap()
        finally:
            await client.close()
    # The controller listener wants the admin's SASL/PLAIN login too: a local process
    # cannot ask it for ACLs (it serves CreateAcls itself).
    controller_port = load_state(secured.broker.state_file)["controller_port"]
    mallory = AclBinding(
        ResourceType.TOPIC, "*", PatternType.LITERAL, "User:mallory", AclOperation.ALL
    )
    with pytest.raises(KafkaError):
        connection = await create_conn("127.0.0.1", controller_port, request_timeout_ms=5000)
        try:
            await connection.send(CreateAcls([mallory.row()]))
        finally:
            connection.close()


async def test_a_wrong_password_is_refused(secured: Secured) -> None:
    for name in ("gateway", "admin", "nobody"):
        wrong = scram_login(name, "not-" + (secured.broker.credentials.read(name) or "x"))
        client = AIOKafkaClient(
            bootstrap_servers=secured.bootstrap, request_timeout_ms=5000, **wrong.client_options()
        )
        try:
            with pytest.raises(KafkaError):
                await client.bootstrap()
        finally:
            await client.close()


async def test_tls_needs_the_brokers_ca_and_its_name(secured: Secured) -> None:
    tls_bootstrap = secured.broker.tls_bootstrap()
    assert tls_bootstrap is not None
    tls_login = secured.broker.login("gateway", tls=True)
    assert tls_login.protocol == "SASL_SSL"
    await _produce(tls_bootstrap, tls_login, secured.topic(BET_COMMANDS), idempotent=True)

    system_cas = scram_login("gateway", tls_login.password)
    options = {**system_cas.client_options(), "security_protocol": "SASL_SSL"}
    options["ssl_context"] = ssl.create_default_context()  # the system's CAs, not ours
    client = AIOKafkaClient(bootstrap_servers=tls_bootstrap, request_timeout_ms=5000, **options)
    try:
        with pytest.raises(KafkaConnectionError):
            await client.bootstrap()
    finally:
        await client.close()

    # The same CA, but a name the certificate does not hold: refused by hostname checking.
    host, port = tls_bootstrap.rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(secured.broker.tls_files.ca_cert))
    with (
        socket.create_connection((host, int(port)), timeout=5) as raw,
        pytest.raises(ssl.SSLCertVerificationError, match=r"[Hh]ostname mismatch"),
    ):
        context.wrap_socket(raw, server_hostname="not-the-broker.example")
    with (
        socket.create_connection((host, int(port)), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        assert tls.version() in ("TLSv1.3", "TLSv1.2")


async def test_infra_up_made_the_project_topics_and_granted_the_matrix(secured: Secured) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin_login = secured.broker.admin_login()
    async with AdminSession(secured.bootstrap, admin_login) as session:
        granted = set(await session.describe_acls(acl_filter()))
    assert set(project_acls("", "")) <= granted
    assert set(project_acls(secured.prefix, secured.prefix)) <= granted
    admin = AIOKafkaAdminClient(bootstrap_servers=secured.bootstrap, **admin_login.client_options())
    await admin.start()
    try:
        assert {str(topic) for topic in TOPICS} <= set(await admin.list_topics())
        resources = [
            ConfigResource(ConfigResourceType.TOPIC, t) for t in (BET_COMMANDS, SHOE_EVENTS)
        ]
        for response in await admin.describe_configs(resources):
            for resource in response.to_object()["resources"]:
                configs = {e["config_names"]: e["config_value"] for e in resource["config_entries"]}
                assert configs["message.timestamp.type"] == "LogAppendTime"
    finally:
        await admin.close()


def test_infra_cli_prints_the_shared_settings_and_a_principals_credentials(
    secured: Secured,
) -> None:
    data_dir = str(secured.broker.home.parent)
    up = _cli("up", "--only", "kafka", "--data-dir", data_dir)  # authentication by default
    assert up.returncode == 0, up.stderr
    settings = _exports(up.stdout)
    assert settings == {
        "KAFKA_BOOTSTRAP_SERVERS": secured.bootstrap,
        "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "KAFKA_TLS_BOOTSTRAP_SERVERS": secured.broker.tls_bootstrap(),
        "KAFKA_SSL_CAFILE": str(secured.broker.tls_files.ca_cert),
    }
    status = _cli("status", "--only", "kafka", "--data-dir", data_dir)
    assert status.returncode == 0 and _exports(status.stdout) == settings
    assert "SASL/SCRAM" in status.stderr

    gateway = _cli("credentials", "gateway", "--data-dir", data_dir)
    assert gateway.returncode == 0, gateway.stderr
    assert gateway.stdout.startswith("export KAFKA_SASL_USERNAME=gateway\n")
    assert _exports(gateway.stdout) == {
        "KAFKA_SASL_USERNAME": "gateway",
        "KAFKA_SASL_PASSWORD": secured.broker.credentials.read("gateway"),
    }

    unknown = _cli("credentials", "croupier", "--data-dir", data_dir)
    assert unknown.returncode == 1 and "Traceback" not in unknown.stderr
    assert "croupier" in unknown.stderr and "--add" in unknown.stderr and unknown.stdout == ""

    without = _cli("up", "--only", "kafka", "--data-dir", data_dir, env={"PB_KAFKA_AUTH": "none"})
    assert without.returncode == 1 and "Traceback" not in without.stderr
    assert "'scram'" in without.stderr and "infra down" in without.stderr


async def test_credentials_add_makes_an_operators_gateway_with_the_gateway_role(
    secured: Secured,
) -> None:
    data_dir = str(secured.broker.home.parent)
    served = {"PB_OPERATORS": "house,acme"}  # gateway-acme is a role's name where acme is served
    add = functools.partial(
        _cli, "credentials", "gateway-acme", "--add", "--data-dir", data_dir, env=served
    )
    added = await asyncio.to_thread(add)
    assert added.returncode == 0, added.stderr
    exported = _exports(added.stdout)
    login = scram_login(exported["KAFKA_SASL_USERNAME"], exported["KAFKA_SASL_PASSWORD"])
    assert login.username == "gateway-acme"
    path = secured.broker.credentials.path("gateway-acme")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # acme's gateway writes acme's bets (the topic created as the admin: PB_OPERATORS=acme
    # makes `infra up` create it), and neither the house's bets nor table events.
    await ensure_project_topics(
        secured.bootstrap, secured.broker.admin_login(), "", 1, operators=("acme",)
    )
    await _produce(secured.bootstrap, login, bet_commands_topic("acme"), idempotent=True)
    with pytest.raises(TopicAuthorizationFailedError):
        await _produce(secured.bootstrap, login, BET_COMMANDS)
    with pytest.raises(TopicAuthorizationFailedError):
        await _produce(secured.bootstrap, login, TABLE_EVENTS)
    with pytest.raises(TopicAuthorizationFailedError):
        await _read_first(secured.bootstrap, login, BET_COMMANDS)
    again = await asyncio.to_thread(add)
    assert again.stdout == added.stdout  # idempotent: the same password
    assert secured.broker.principals.roles()["gateway-acme"] == "gateway"

    nameless = await asyncio.to_thread(
        _cli, "credentials", "croupier", "--add", "--data-dir", data_dir
    )
    assert nameless.returncode == 1 and "--role" in nameless.stderr
    unserved = await asyncio.to_thread(  # acme not served: the name alone is nobody's
        _cli, "credentials", "gateway-acme2", "--add", "--data-dir", data_dir
    )
    assert unserved.returncode == 1 and "--role" in unserved.stderr


async def test_an_operators_gateway_cannot_write_another_operators_bets_nor_read_its_answers(
    secured: Secured,
) -> None:
    """Two operators at one deployment (PB_OPERATORS=a,b): each gateway writes its own
    bet-commands topic and reads its own bet-events topic, never the other's; settlement
    reads both operators' bets and answers on both; the dashboard reads both."""
    prefix = f"ops{secrets.token_hex(3)}."
    admin = secured.broker.admin_login()
    operators = ("a", "b")
    principals = {"gateway-a": "gateway", "gateway-b": "gateway", "settlement": "settlement"}
    principals["dashboard"] = "dashboard"
    await ensure_project_topics(secured.bootstrap, admin, prefix, 1, operators)
    await grant_project_acls(secured.bootstrap, admin, prefix, prefix, principals, operators)
    own = {op: (prefix + bet_commands_topic(op), prefix + bet_events_topic(op)) for op in "ab"}
    await _seed(secured.bootstrap, admin, [topic for pair in own.values() for topic in pair])
    for name in ("gateway-a", "gateway-b"):
        await asyncio.to_thread(secured.broker.principals.add, secured.bootstrap, name, "gateway")
    try:
        for mine, theirs in (("a", "b"), ("b", "a")):
            login = secured.login(f"gateway-{mine}")
            commands, events = own[mine]
            await _produce(secured.bootstrap, login, commands, idempotent=True)
            assert await _read_first(secured.bootstrap, login, events) == b"seed"
            for topic in (own[theirs][0], prefix + BET_COMMANDS, events):
                with pytest.raises(TopicAuthorizationFailedError):
                    await _produce(secured.bootstrap, login, topic)
            for topic in (own[theirs][1], own[theirs][0], commands):
                with pytest.raises(TopicAuthorizationFailedError):
                    await _read_first(secured.bootstrap, login, topic)
        settlement, dashboard = secured.login("settlement"), secured.login("dashboard")
        for commands, events in own.values():
            assert await _read_first(secured.bootstrap, settlement, commands) == b"seed"
            await _produce(secured.bootstrap, settlement, events, idempotent=True)
            assert await _read_first(secured.bootstrap, dashboard, events) == b"seed"
    finally:
        await revoke_project_acls(secured.bootstrap, admin, prefix, prefix, principals, operators)


async def test_revoking_a_runs_acls_denies_its_topics_again(secured: Secured) -> None:
    prefix = f"gone{secrets.token_hex(3)}."
    admin = secured.broker.admin_login()
    await ensure_project_topics(secured.bootstrap, admin, prefix, partitions=1)
    await grant_project_acls(secured.bootstrap, admin, prefix, prefix)
    gateway = secured.login("gateway")
    await _produce(secured.bootstrap, gateway, prefix + BET_COMMANDS)
    deleted = await revoke_project_acls(secured.bootstrap, admin, prefix, prefix)
    assert deleted == len(project_acls(prefix, prefix))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while True:  # the broker applies the deletion a moment after the controller
        try:
            await _produce(secured.bootstrap, gateway, prefix + BET_COMMANDS)
        except TopicAuthorizationFailedError:
            break
        assert loop.time() < deadline, "still allowed after the ACLs were deleted"
        await asyncio.sleep(0.2)


def test_a_restart_keeps_the_users_and_their_acls(secured: Secured) -> None:
    broker = secured.broker
    assert broker.stop()
    assert broker.start() == secured.bootstrap
    assert len(list(broker.home.glob("data.before-auth-*"))) == 1  # not moved aside again
    gateway = secured.login("gateway")
    run_async(_produce(secured.bootstrap, gateway, secured.topic(BET_COMMANDS)))
    with pytest.raises(TopicAuthorizationFailedError):
        run_async(_produce(secured.bootstrap, gateway, secured.topic(TABLE_EVENTS)))
