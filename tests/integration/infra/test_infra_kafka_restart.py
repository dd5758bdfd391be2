"""Committed messages survive a stop and restart of the broker process.

Uses a broker of its own (temporary folder, free port) so the session's broker
is not disturbed.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from services.dev.infra import kafka as kafka_module
from services.dev.infra import ports
from services.dev.infra.common import InfraError
from services.dev.infra.kafka import KafkaBroker
from services.dev.infra.ports import LOOPBACK
from services.dev.infra.programs import checked_java

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[KafkaBroker]:
    try:
        checked_java()
    except InfraError as error:
        pytest.skip(f"no local Java for a broker of our own: {error.problem}")
    # Restarts and ports, not logins: the PLAINTEXT broker (PB_KAFKA_AUTH=none) is enough.
    broker = KafkaBroker(home=tmp_path / "kafka", preferred_port=None, auth="none")
    try:
        yield broker
    finally:
        broker.stop()


async def test_committed_messages_survive_a_broker_restart(own_broker: KafkaBroker) -> None:
    bootstrap = await asyncio.to_thread(own_broker.start)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="restart-test")
    await producer.start()
    try:
        async with producer.transaction():
            for number in range(3):
                await producer.send("durable", f"kept-{number}".encode(), key=b"table-1")
    finally:
        await producer.stop()

    assert await asyncio.to_thread(own_broker.stop)
    assert own_broker.pid() is None
    restarted = await asyncio.to_thread(own_broker.start)
    assert restarted == bootstrap  # same port again: the clients' settings stay valid

    consumer = AIOKafkaConsumer(
        "durable",
        bootstrap_servers=restarted,
        group_id="after-restart",
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    await consumer.start()
    received: list[bytes] = []
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while len(received) < 3 and loop.time() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            received += [message.value for messages in batch.values() for message in messages]
    finally:
        await consumer.stop()
    assert received == [b"kept-0", b"kept-1", b"kept-2"]


def test_a_port_taken_during_start_up_is_retried_on_free_ports(
    own_broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `infra up` in two clones may pick the same free port at once: the loser retries."""
    real_choose_port = ports.choose_port
    calls = 0

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind((LOOPBACK, 0))
        squatter.listen()
        taken = squatter.getsockname()[1]

        def racing_choose_port(**options: Any) -> int:
            nonlocal calls
            calls += 1
            return taken if calls == 1 else real_choose_port(**options)

        monkeypatch.setattr(kafka_module, "choose_port", racing_choose_port)
        bootstrap = own_broker.start()
    assert calls >= 4  # broker + controller port, twice
    assert not bootstrap.endswith(f":{taken}")
    assert own_broker.status().running
