"""deploy/compose.yaml's broker for real: deploy/kafka/compose-broker.sh formats and starts the
project's Kafka (its jars, as `infra up` runs them, behind stand-ins for the image's
``kafka-storage.sh`` and ``kafka-server-start.sh``) on ports of this test's own (issue 20,
item 3).

It must authenticate as the broker of `infra up` does: each principal of the ACL matrix logs
in with the password compose gives it (PB_KAFKA_PASSWORD_<NAME>), nobody without one or with a
wrong one, and what no ACL allows is denied until the admin grants the matrix.
"""

from __future__ import annotations

import os
import secrets
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.client import AIOKafkaClient
from aiokafka.errors import KafkaError, TopicAuthorizationFailedError

from contracts import BET_COMMANDS, TABLE_EVENTS
from services.dev.infra.common import InfraError
from services.dev.infra.kafka_acls import (
    ensure_project_topics,
    grant_project_acls,
    project_principals,
)
from services.dev.infra.kafka_auth import ADMIN, scram_login
from services.dev.infra.kafka_principals import logs_in
from services.dev.infra.kafka_setup_script import password_variable
from services.dev.infra.ports import free_port
from services.dev.infra.processes import run_async
from services.dev.infra.programs import checked_java, ensure_jars
from services.shared.platform.settings import KafkaAuth

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[3] / "deploy" / "kafka" / "compose-broker.sh"
PRINCIPALS = (ADMIN, *project_principals())


@dataclass(frozen=True)
class ComposeBroker:
    bootstrap: str
    passwords: dict[str, str]
    config: Path

    def login(self, name: str, password: str | None = None) -> KafkaAuth:
        return scram_login(name, password or self.passwords[name])


def _stand_ins(folder: Path, java: str, libs: Path) -> Path:
    """The image's two tools the script calls, as the jars' classes (as `infra up` runs them)."""
    folder.mkdir()
    for name, main in (
        ("kafka-storage.sh", "kafka.tools.StorageTool"),
        ("kafka-server-start.sh", "kafka.Kafka"),
    ):
        tool = folder / name
        tool.write_text(
            "#!/bin/sh\n"
            f'exec "{java}" -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 '
            f'-cp "{libs}/*" {main} "$@"\n'
        )
        tool.chmod(0o755)
    return folder


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeBroker]:
    try:
        java, libs = checked_java(), ensure_jars()
    except InfraError as error:
        pytest.skip(f"no local Java or Kafka jars for a broker of our own: {error.problem}")
    home = tmp_path_factory.mktemp("compose-broker")
    ports = {name: free_port() for name in ("INTERNAL", "EXTERNAL", "CONTROLLER")}
    passwords = {name: secrets.token_hex(16) for name in PRINCIPALS}
    config = home / "config" / "server.properties"
    env = {
        "PATH": os.environ["PATH"],
        "KAFKA_BIN": str(_stand_ins(home / "bin", java, libs)),
        "KAFKA_DATA_DIR": str(home / "data"),
        "KAFKA_CONFIG_FILE": str(config),
        "KAFKA_ADVERTISED_HOST": "127.0.0.1",
        **{f"KAFKA_{name}_PORT": str(port) for name, port in ports.items()},
        **{password_variable(name): password for name, password in passwords.items()},
    }
    with (home / "broker.log").open("w") as log:
        process = subprocess.Popen(
            ["sh", str(SCRIPT)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=home,
            start_new_session=True,
        )
    started = ComposeBroker(f"127.0.0.1:{ports['EXTERNAL']}", passwords, config)
    try:
        if not run_async(logs_in(started.bootstrap, started.login(ADMIN), wait=120)):
            tail = (home / "broker.log").read_text()[-3000:]
            raise AssertionError(f"the compose broker did not let the admin in:\n{tail}")
        yield started
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # the script exec'd the broker: its group
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def test_every_principal_logs_in_with_its_password_and_nobody_else(broker: ComposeBroker) -> None:
    for name in PRINCIPALS:
        assert run_async(logs_in(broker.bootstrap, broker.login(name), wait=15)), name
    assert not run_async(logs_in(broker.bootstrap, broker.login("gateway", "wrong"), wait=1))
    assert not run_async(logs_in(broker.bootstrap, scram_login("intruder", "x"), wait=1))

    async def anonymous() -> None:
        client = AIOKafkaClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=3000)
        try:
            await client.bootstrap()
        finally:
            await client.close()

    with pytest.raises((KafkaError, OSError)):  # PLAINTEXT: no listener speaks it
        run_async(anonymous())
    # The broker's config holds the admin's password: owner only.
    for path in (broker.config, broker.config.with_name("admin.properties")):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_nothing_is_allowed_until_the_admin_grants_the_matrix(broker: ComposeBroker) -> None:
    admin, gateway = broker.login(ADMIN), broker.login("gateway")

    async def produce(topic: str) -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap,
            request_timeout_ms=10_000,
            **gateway.client_options(),
        )
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"x", key=b"t1")
        finally:
            await producer.stop()

    run_async(ensure_project_topics(broker.bootstrap, admin, "", partitions=1))
    with pytest.raises(TopicAuthorizationFailedError):  # deny by default
        run_async(produce(BET_COMMANDS))
    run_async(grant_project_acls(broker.bootstrap, admin))
    deadline = time.monotonic() + 15
    while True:  # the authorizer learns the ACLs from the metadata log a moment later
        try:
            run_async(produce(BET_COMMANDS))
            break
        except TopicAuthorizationFailedError:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    with pytest.raises(TopicAuthorizationFailedError):  # and only what the matrix says
        run_async(produce(TABLE_EVENTS))
