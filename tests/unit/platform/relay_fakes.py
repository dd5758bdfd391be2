"""For the relay's unit tests: a fake Kafka broker and producer (partitions, acks that take a
moment, refusals by size per topic or of invalid records, failures on demand), and a Plan of
stored events whose messages each test writes.

It behaves like aiokafka's idempotent producer where the relay's correctness depends on it:
a refused batch is not appended, and the producer that got the refusal has given its sequence
numbers away, so its later batches to that partition fail (OutOfOrderSequenceNumber) until the
relay replaces the producer.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiokafka.errors import MessageSizeTooLargeError, OutOfOrderSequenceNumber
from aiokafka.partitioner import DefaultPartitioner

from contracts import CloseBook, Message, TableClosed
from services.shared.platform.relay import envelope
from services.shared.platform.relay.records import InvalidRecordError
from services.shared.platform.relay.relay import OutboxRelay
from services.shared.platform.settings import Settings
from tests.unit.platform.fakes import Counter, CounterApp

TopicPartition = tuple[str, int]

PREFIX = "p."


def relay_for(
    plan: Plan, broker: FakeBroker, batch: int = 100, cell: int | None = None, **options: Any
) -> OutboxRelay:
    """The relay of ``plan`` on ``broker`` (of partition ``cell``'s cell, when given);
    ``options``: OutboxRelay's (signer...)."""
    settings = Settings.from_env("counter", {"PB_TOPIC_PREFIX": PREFIX}, relay_batch_size=batch)
    if cell is not None:
        settings = settings.for_partition(cell)
    return OutboxRelay(plan.app, settings, plan.mapper, producer_factory=broker.producer, **options)


def table_on(partition: int, partitions: int = 2, skip: int = 0) -> str:
    """A table id whose key the default partitioner puts on ``partition``."""
    found = [
        f"t{n}"
        for n in range(100)
        if DefaultPartitioner()(f"t{n}".encode(), list(range(partitions)), None) == partition
    ]
    return found[skip]


def consumer_view(log: list[Appended]) -> list[tuple[int, int]]:
    """What a consumer tracking by position keeps: each record above the last one kept."""
    kept: list[tuple[int, int]] = []
    for record in log:
        if not kept or record.position > kept[-1]:
            kept.append(record.position)
    return kept


@dataclass
class Appended:
    topic: str
    partition: int
    key: bytes | None
    value: bytes
    headers: dict[str, bytes]

    @property
    def position(self) -> tuple[int, int]:
        return int(self.headers["pb-notification-id"]), int(self.headers["pb-message-index"])


@dataclass
class Batch:
    """A record batch: ``size()`` counts bytes roughly as Kafka does (61-byte header)."""

    capacity: int = 4
    records: list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]] = field(default_factory=list)
    closed: bool = False

    def append(
        self,
        *,
        timestamp: float | None,
        key: bytes | None,
        value: bytes,
        headers: list[tuple[str, bytes]],
    ) -> object | None:
        if self.closed or len(self.records) >= self.capacity:
            return None
        self.records.append((key, value, list(headers)))
        return object()

    def record_count(self) -> int:
        return len(self.records)

    def size(self) -> int:
        return 61 + sum(
            20 + len(key or b"") + len(value) + sum(len(k) + len(v) + 2 for k, v in headers)
            for key, value, headers in self.records
        )

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeBroker:
    """Topic-partition logs plus what the tests script: limits, refusals, failures, timing."""

    partitions: int = 2
    batch_capacity: int = 4
    ack_delay: float = 0.002
    max_message_bytes: dict[str, int] = field(default_factory=dict)  # topic -> batch limit
    invalid: Callable[[bytes], bool] = lambda value: False  # values refused as INVALID_RECORD
    failures: list[Exception] = field(default_factory=list)  # fail the next batches with these
    fail_at: dict[tuple[TopicPartition, int], Exception] = field(default_factory=dict)
    """(partition, n) -> the failure of the n-th batch sent to that partition (1, 2, ...)."""
    sent: dict[TopicPartition, int] = field(default_factory=lambda: defaultdict(int))
    logs: dict[TopicPartition, list[Appended]] = field(default_factory=lambda: defaultdict(list))
    journal: list[tuple[str, TopicPartition, int]] = field(default_factory=list)
    in_flight: dict[TopicPartition, int] = field(default_factory=lambda: defaultdict(int))
    most_in_flight_per_partition: int = 0
    most_in_flight: int = 0
    refusals: int = 0
    producers: list[FakeKafkaProducer] = field(default_factory=list)

    def producer(self) -> FakeKafkaProducer:
        """A producer factory for the relay (records every producer made)."""
        made = FakeKafkaProducer(self)
        self.producers.append(made)
        return made

    def appended(self, topic: str) -> list[Appended]:
        return [r for (t, _), log in sorted(self.logs.items()) if t == topic for r in log]

    def _refusal(self, topic: str, batch: Batch) -> Exception | None:
        limit = self.max_message_bytes.get(topic)
        refusal: Exception | None = None
        if limit is not None and batch.size() > limit:
            refusal = MessageSizeTooLargeError()
        elif any(self.invalid(value) for _, value, _ in batch.records):
            refusal = InvalidRecordError()
        return refusal

    def _accept(self, batch: Batch, tp: TopicPartition) -> Exception | None:
        self.sent[tp] += 1
        self.in_flight[tp] += 1
        self.most_in_flight_per_partition = max(
            self.most_in_flight_per_partition, self.in_flight[tp]
        )
        self.most_in_flight = max(self.most_in_flight, sum(self.in_flight.values()))
        self.journal.append(("send", tp, batch.record_count()))
        if self.failures:
            return self.failures.pop(0)
        return self.fail_at.pop((tp, self.sent[tp]), None)

    async def _deliver(
        self,
        producer: FakeKafkaProducer,
        batch: Batch,
        tp: TopicPartition,
        failure: Exception | None,
    ) -> None:
        try:
            await asyncio.sleep(self.ack_delay)
            if failure is not None:
                raise failure
            if tp in producer.broken:
                raise OutOfOrderSequenceNumber()
            refusal = self._refusal(tp[0], batch)
            if refusal is not None:
                self.refusals += 1
                producer.broken.add(tp)  # its sequence numbers went ahead of the broker's
                raise refusal
            for key, value, headers in batch.records:
                self.logs[tp].append(Appended(tp[0], tp[1], key, value, dict(headers)))
            self.journal.append(("ack", tp, batch.record_count()))
        finally:
            self.in_flight[tp] -= 1


@dataclass(eq=False)
class FakeKafkaProducer:
    broker: FakeBroker
    broken: set[TopicPartition] = field(default_factory=set)
    started: bool = False
    stopped: bool = False

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.stopped = True

    async def partitions_for(self, topic: str) -> set[int]:
        return set(range(self.broker.partitions))

    def create_batch(self) -> Batch:
        return Batch(capacity=self.broker.batch_capacity)

    async def send_batch(self, batch: Batch, topic: str, *, partition: int) -> asyncio.Future[Any]:
        assert self.started and not self.stopped, "send on a producer not running"
        failure = self.broker._accept(batch, (topic, partition))
        return asyncio.ensure_future(self.broker._deliver(self, batch, (topic, partition), failure))


Maker = Callable[[Any, int], Message]
"""(stored event, message index) -> a message made from that event."""


def closed(table: str, reason: str = "", *, unchecked: bool = False) -> Maker:
    """A TableClosed of ``table``; ``unchecked``: built without validation (any size)."""

    def make(event: Any, index: int) -> Message:
        if unchecked:
            return TableClosed.model_construct(
                **envelope(event, index), type="TableClosed", table_id=table, reason=reason
            )
        return TableClosed(**envelope(event, index), table_id=table, reason=reason)

    return make


def close_book(table: str) -> Maker:
    """A CloseBook of ``table`` (a marker: bet-commands)."""

    def make(event: Any, index: int) -> Message:
        return CloseBook(**envelope(event, index), table_id=table, coup_id="c1")

    return make


class Plan:
    """Stored events of one Counter whose messages the test writes: ``add(*makers)`` stores
    one event (notification 2, 3, ...; 1 is the Counter's creation) mapped to those messages."""

    def __init__(self, app: CounterApp) -> None:
        self.app = app
        self.counter = Counter(table_id="plan")
        self.steps: list[tuple[Maker, ...]] = []
        app.save(self.counter)

    def add(self, *makers: Maker) -> None:
        self.counter.add(table_id="plan", amount=len(self.steps))
        self.steps.append(makers)
        self.app.save(self.counter)

    def mapper(self, event: Any) -> list[Message]:
        if isinstance(event, Counter.Added):
            return [make(event, index) for index, make in enumerate(self.steps[event.amount])]
        return []
