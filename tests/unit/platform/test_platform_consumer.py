"""The consumer runtime's exactly-once effect and dead letters, with fake Kafka clients."""

import asyncio
import base64
from collections.abc import Sequence

from aiokafka import ConsumerRecord, TopicPartition

from contracts import DEAD_LETTERS, TABLE_EVENTS, DeadLetter, TableClosed, decode, encode
from services.platform.application import UnitOfWork
from services.platform.consumer import (
    MESSAGES_PER_NOTIFICATION,
    ConsumerRuntime,
    Delivery,
    Subscription,
    position_of,
    with_unit_of_work,
)
from services.platform.settings import Settings
from services.platform.worker import AppWorker
from tests.unit.platform.fakes import Counter, CounterApp, FakeConsumer, FakeProducer, popo_env

TOPIC = "p." + TABLE_EVENTS
CLUSTER = "cluster-A"
EXTERNAL = f"{CLUSTER}:{TOPIC}:0"
"""Tracking name of external (offset-tracked) records of TOPIC partition 0."""


def record(
    offset: int,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes]] = (),
    partition: int = 0,
    topic: str = TOPIC,
    timestamp: int = 0,
    timestamp_type: int = 0,
) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        topic=topic,
        partition=partition,
        offset=offset,
        timestamp=timestamp,
        timestamp_type=timestamp_type,
        key=b"t1",
        value=value,
        checksum=None,
        serialized_key_size=2,
        serialized_value_size=len(value or b""),
        headers=tuple(headers),
    )


def closed(reason: str) -> bytes:
    return encode(TableClosed(table_id="t1", reason=reason))


def relayed(notification: int, index: int = 0) -> list[tuple[str, bytes]]:
    return [
        ("pb-source", b"dealing"),
        ("pb-notification-id", str(notification).encode()),
        ("pb-message-index", str(index).encode()),
    ]


class Harness:
    def __init__(
        self, app: CounterApp | None = None, prefix: str = "p.", cluster: str = CLUSTER
    ) -> None:
        self.app = app or CounterApp(env=popo_env())
        self.settings = Settings.from_env("counter", {"PB_TOPIC_PREFIX": prefix})
        self.worker = AppWorker("counter")
        self.producer = FakeProducer()
        self.calls = 0

        def handle(uow: UnitOfWork, delivery: Delivery) -> None:
            self.calls += 1
            message = delivery.message
            assert isinstance(message, TableClosed)
            if message.reason == "boom":
                raise ValueError("no such amount")
            counter = uow.get(Counter.create_id("t1"), Counter)
            if counter is None:
                counter = Counter(table_id="t1")
                uow.add(counter)
            counter.add(table_id="t1", amount=int(message.reason))

        self.runtime = ConsumerRuntime(
            self.app,
            self.settings,
            [Subscription(TABLE_EVENTS, with_unit_of_work(self.app, handle))],
            self.worker,
            producer=self.producer,
            cluster_id=cluster,
        )
        self.kafka = FakeConsumer()
        self.runtime._consumer = self.kafka

    async def feed(self, *records: ConsumerRecord[bytes, bytes]) -> None:
        fetched: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] = {}
        for r in records:
            fetched.setdefault(TopicPartition(r.topic, r.partition), []).append(r)
        await self.runtime.process(fetched, asyncio.Event())

    @property
    def total(self) -> int:
        counter: Counter = self.app.repository.get(Counter.create_id("t1"))
        return counter.total

    def dead_letters(self) -> list[DeadLetter]:
        out = []
        for sent in self.producer.sent:
            assert sent.topic == "p." + DEAD_LETTERS
            letter = decode(DEAD_LETTERS, sent.value)
            assert isinstance(letter, DeadLetter)
            out.append(letter)
        return out


def test_positions_of_relayed_and_external_messages() -> None:
    assert position_of(TABLE_EVENTS, 2, 41, relayed(9, 3)).application_name == (
        "dealing:punto-banco.table-events:2"
    )
    assert position_of(TABLE_EVENTS, 2, 41, relayed(9, 3)).notification_id == (
        9 * MESSAGES_PER_NOTIFICATION + 3
    )
    external = position_of(TABLE_EVENTS, 1, 41, [])
    assert (external.application_name, external.notification_id) == (
        "punto-banco.table-events:1",
        42,
    )
    odd = position_of(TABLE_EVENTS, 1, 41, [("pb-source", b"x"), ("pb-notification-id", b"abc")])
    assert odd.notification_id == 42


def test_offset_positions_name_the_cluster_and_the_real_topic() -> None:
    external = position_of(TABLE_EVENTS, 1, 0, [], topic="p2." + TABLE_EVENTS, cluster_id="k1")
    assert (external.application_name, external.notification_id) == (
        f"k1:p2.{TABLE_EVENTS}:1",
        1,
    )
    # Relayed positions count the upstream store's notifications: no cluster, no prefix.
    relayed_name = position_of(
        TABLE_EVENTS, 1, 0, relayed(3), topic="p2." + TABLE_EVENTS, cluster_id="k1"
    ).application_name
    assert relayed_name == f"dealing:{TABLE_EVENTS}:1"


async def test_a_store_reused_with_a_new_prefix_or_kafka_handles_its_commands() -> None:
    first = Harness(prefix="p.")
    await first.feed(record(0, closed("1")), record(1, closed("2")))
    assert first.total == 3
    # Same store, new topic prefix: offsets 0 and 1 of the new topic are new commands.
    renamed = Harness(first.app, prefix="q.")
    await renamed.feed(
        record(0, closed("10"), topic="q." + TABLE_EVENTS),
        record(1, closed("20"), topic="q." + TABLE_EVENTS),
    )
    assert renamed.total == 33 and renamed.runtime.stats.duplicates == 0
    # Same store and prefix, another Kafka cluster (its topics start at offset 0 again).
    moved = Harness(first.app, prefix="p.", cluster="cluster-B")
    await moved.feed(record(0, closed("100")))
    assert moved.total == 133 and moved.runtime.stats.duplicates == 0
    # And the first log's positions still hold: a redelivery there has no second effect.
    again = Harness(first.app, prefix="p.")
    await again.feed(record(1, closed("2")))
    assert again.total == 133 and again.runtime.stats.duplicates == 1


async def test_a_batch_is_handled_once_and_offsets_committed() -> None:
    h = Harness()
    await h.feed(record(0, closed("1")), record(1, closed("2")), record(2, closed("3")))
    assert h.total == 6
    assert h.kafka.committed == {TopicPartition(TOPIC, 0): 3}
    assert h.app.tracked_position(EXTERNAL) == 3


async def test_the_same_message_delivered_twice_has_one_effect() -> None:
    h = Harness()
    await h.feed(record(0, closed("5")))
    await h.feed(record(0, closed("5")), record(1, closed("1")))
    assert h.total == 6
    assert h.runtime.stats.duplicates == 1


async def test_a_republished_relay_message_has_one_effect() -> None:
    h = Harness()
    await h.feed(record(0, closed("5"), relayed(7)), record(1, closed("1"), relayed(7, 1)))
    # the relay crashed before recording its position and published both again
    await h.feed(record(2, closed("5"), relayed(7)), record(3, closed("1"), relayed(7, 1)))
    await h.feed(record(4, closed("2"), relayed(8)))
    assert h.total == 8
    assert h.runtime.stats.duplicates == 2


async def test_malformed_messages_become_dead_letters_and_the_rest_is_served() -> None:
    h = Harness()
    await h.feed(
        record(0, b"not json{"),
        record(1, closed("2")),
        record(2, b'{"type": "TableClosed", "table_id": "t1", "reason": 3}'),
        record(3, None),
        record(4, closed("4")),
    )
    assert h.total == 6
    letters = h.dead_letters()
    assert [(d.offset, d.original_topic, d.service) for d in letters] == [
        (0, TOPIC, "counter"),
        (2, TOPIC, "counter"),
        (3, TOPIC, "counter"),
    ]
    assert base64.b64decode(letters[0].payload_b64) == b"not json{"
    assert "not JSON" in letters[0].error
    assert "reason" in letters[1].error
    assert letters[0].table_id == "t1"
    assert h.kafka.committed == {TopicPartition(TOPIC, 0): 5}
    # redelivery of the whole batch: no second effect, no second dead letter
    await h.feed(record(0, b"not json{"), record(1, closed("2")))
    assert h.total == 6
    assert len(h.dead_letters()) == 3


async def test_a_failing_handler_dead_letters_only_that_message() -> None:
    h = Harness()
    await h.feed(record(0, closed("1")), record(1, closed("boom")), record(2, closed("2")))
    assert h.total == 3
    letters = h.dead_letters()
    assert [d.offset for d in letters] == [1]
    assert letters[0].error.startswith("handler failed: ValueError")
    assert h.app.tracked_position(EXTERNAL) == 3


async def test_partitions_are_tracked_separately() -> None:
    h = Harness()
    await h.feed(record(5, closed("1"), partition=0), record(2, closed("10"), partition=1))
    await h.feed(record(3, closed("100"), partition=1))
    assert h.total == 111


async def test_a_per_message_handler_failing_half_way_applies_nothing_twice() -> None:
    from eventsourcing.persistence import Tracking

    from services.platform.consumer import per_message

    h = Harness()
    applied: list[str] = []

    def handle(message: object, tracking: Tracking) -> None:
        assert isinstance(message, TableClosed)
        if message.reason == "boom":
            raise ValueError("bad")
        with h.app.unit_of_work(tracking):
            applied.append(message.reason)

    h.runtime.subscriptions[TABLE_EVENTS] = Subscription(TABLE_EVENTS, per_message(handle))
    await h.feed(
        record(0, closed("1")),
        record(1, closed("2")),
        record(2, closed("boom")),
        record(3, closed("4")),
    )
    assert applied == ["1", "2", "4"]
    assert [d.offset for d in h.dead_letters()] == [2]
    assert h.app.tracked_position(EXTERNAL) == 4


async def test_a_delivery_carries_the_record_timestamp_and_its_type() -> None:
    from datetime import UTC, datetime

    from services.platform.consumer import CREATE_TIME, LOG_APPEND_TIME

    h = Harness()
    seen: list[Delivery] = []

    def handle(deliveries: Sequence[Delivery], tracking: object) -> None:
        seen.extend(deliveries)

    h.runtime.subscriptions[TABLE_EVENTS] = Subscription(TABLE_EVENTS, handle)
    appended = datetime(2026, 11, 30, 4, 0, 1, 250000, tzinfo=UTC)
    millis = int(appended.timestamp() * 1000)
    await h.feed(
        record(0, closed("1"), timestamp=millis, timestamp_type=LOG_APPEND_TIME),
        record(1, closed("2"), timestamp=millis, timestamp_type=CREATE_TIME),
    )
    assert [(d.timestamp, d.timestamp_type) for d in seen] == [
        (millis, LOG_APPEND_TIME),
        (millis, CREATE_TIME),
    ]
    assert seen[0].appended_at == appended
    assert seen[1].appended_at is None  # a producer's timestamp is not the broker's
