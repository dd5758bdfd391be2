"""Quarantine against real Kafka: messages the broker cannot take are replaced by a
MessageQuarantined on the dead-letters topic, and the partition goes on, in order."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from contracts import DEAD_LETTERS, TABLE_EVENTS, MessageQuarantined
from services.shared.platform.kafka import client_options, ensure_topics
from services.shared.platform.relay.records import InvalidRecordError
from services.shared.platform.relay.relay import OutboxRelay
from services.shared.platform.settings import Settings
from services.shared.platform.store import open_application
from tests import kafka_logins
from tests.integration.platform.kafka_tools import Received, as_admin, read_topic, settings_for
from tests.unit.platform.fakes import CounterApp
from tests.unit.platform.relay_fakes import Plan, closed

pytestmark = [pytest.mark.kafka]


def positions(records: list[Received]) -> list[tuple[int, int]]:
    ordered = sorted(records, key=lambda r: (r.partition, r.offset))
    return [
        (int(r.headers["pb-notification-id"]), int(r.headers["pb-message-index"])) for r in ordered
    ]


def quarantined(records: list[Received]) -> list[MessageQuarantined]:
    found = []
    for record in records:
        message = record.message(DEAD_LETTERS)
        assert isinstance(message, MessageQuarantined)
        found.append(message)
    return found


async def create_topic(settings: Settings, logical: str, configs: dict[str, str]) -> None:
    admin = AIOKafkaAdminClient(**client_options(as_admin(settings)))
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(settings.topic(logical), settings.topic_partitions, 1, topic_configs=configs)]
        )
    finally:
        await admin.close()


async def test_an_oversized_message_is_quarantined_and_its_partition_goes_on_in_order(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = settings_for("counter", kafka_bootstrap, data_dir=tmp_path)
    await ensure_topics(settings)
    app = open_application(lambda env: CounterApp(env=env), settings)
    plan = Plan(app)
    plan.add(closed("t1", "before"))
    plan.add(
        closed("t1", "x" * 1_500_000, unchecked=True),  # more than Kafka's 1 MiB
        closed("t1", "y" * 600_000, unchecked=True),  # less than 1 MiB: published
        closed("t1", "beside"),
    )
    plan.add(closed("t1", "after"))
    relay = OutboxRelay(app, settings, plan.mapper)
    hooked: list[MessageQuarantined] = []
    relay.on_quarantined = hooked.extend
    await relay.start()
    try:
        assert await relay.publish_pending() == 5  # 4 messages and the quarantine record
    finally:
        await relay.stop()
    events = await read_topic(settings, TABLE_EVENTS, lambda r: len(r) >= 4)
    assert positions(events) == [(2, 0), (3, 1), (3, 2), (4, 0)]
    assert len({r.partition for r in events}) == 1
    assert 600_000 < len(events[1].value) < 1024 * 1024
    dead = await read_topic(settings, DEAD_LETTERS, lambda r: len(r) >= 1)
    (record,) = dead
    assert record.key == b"t1"
    assert record.headers["pb-source"] == b"counter"
    assert (record.headers["pb-notification-id"], record.headers["pb-message-index"]) == (
        b"3",
        b"0",
    )
    (message,) = quarantined(dead)
    assert message.message_type == "TableClosed"
    assert message.size > 1_500_000
    assert message.original_topic == settings.topic(TABLE_EVENTS)
    assert hooked == [message]
    assert relay.quarantined == 1
    assert app.tracked_position("relay:counter") == 4
    app.close()


async def test_a_topic_refusing_a_record_as_too_large_leads_to_quarantine(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The topic takes 2,000 bytes at most (``max.message.bytes``): the relay's first batch is
    refused whole, sent again record by record; the one record refused alone is quarantined,
    the others are published in order (none quarantined), and batches shrink until they pass."""
    settings = settings_for("counter", kafka_bootstrap, data_dir=tmp_path)
    await create_topic(settings, TABLE_EVENTS, {"max.message.bytes": "2000"})
    await ensure_topics(settings)
    app = open_application(lambda env: CounterApp(env=env), settings)
    plan = Plan(app)
    plan.add(
        *[closed("t1", f"small {i}") for i in range(8)],
        closed("t1", "z" * 5_000, unchecked=True),
        *[closed("t1", f"small {i}") for i in range(8, 12)],
    )
    plan.add(*[closed("t1", f"next {i}") for i in range(6)])
    relay = OutboxRelay(app, settings, plan.mapper)
    await relay.start()
    try:
        assert await relay.publish_pending() == 19
        for notification in (4, 5):  # batches halve after each refusal: at most 1,000 bytes
            plan.add(*[closed("t1", f"later {notification}.{i}") for i in range(10)])
            assert await relay.publish_pending() == 10
        settled = relay.producer.generation
        plan.add(*[closed("t1", f"last {i}") for i in range(10)])
        assert await relay.publish_pending() == 10
        assert relay.producer.generation == settled  # no new producer: nothing refused any more
    finally:
        await relay.stop()
    events = await read_topic(settings, TABLE_EVENTS, lambda r: len(r) >= 48)
    expected = [(2, i) for i in range(13) if i != 8] + [(3, i) for i in range(6)]
    expected += [(n, i) for n in (4, 5, 6) for i in range(10)]
    assert positions(events) == expected
    (message,) = quarantined(await read_topic(settings, DEAD_LETTERS, lambda r: len(r) >= 1))
    assert (message.notification_id, message.message_index) == (2, 8)
    assert "MessageSizeTooLargeError" in message.reason
    assert relay.quarantined == 1
    app.close()


async def test_kafka_invalid_record_refusal_is_told_apart_from_a_server_error(
    kafka_bootstrap: str, unique_topic: Callable[[str], str]
) -> None:
    """A record without a key on a compacted topic: Kafka answers INVALID_RECORD (87), which
    aiokafka alone reports as an UnknownError; with the relay's registration it is a refusal."""
    topic = unique_topic("compacted")
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap, **kafka_logins.options())
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact"})]
        )
    finally:
        await admin.close()
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, **kafka_logins.options(), enable_idempotence=True
    )
    await producer.start()
    try:
        with pytest.raises(InvalidRecordError):
            await producer.send_and_wait(topic, b"no key")
    finally:
        await producer.stop()
