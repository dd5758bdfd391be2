"""In-memory stand-ins for Kafka clients and a tiny event-sourced app, for platform unit tests."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate, event

from services.shared.platform.store import ServiceApplication

NS = UUID("00000000-0000-0000-0000-000000000001")


def popo_env() -> dict[str, str]:
    return {"PERSISTENCE_MODULE": "eventsourcing.popo"}


class Counter(Aggregate):
    """A table's counter: each Add command adds to it."""

    class Added(Aggregate.Event):
        table_id: str
        amount: int

    @staticmethod
    def create_id(table_id: str) -> UUID:
        return uuid5(NS, table_id)

    def __init__(self, table_id: str) -> None:
        self.table_id = table_id
        self.total = 0

    @event(Added)
    def add(self, table_id: str, amount: int) -> None:
        self.total += amount


class CounterApp(ServiceApplication):
    name = "counter"


@dataclass
class SentRecord:
    topic: str
    value: bytes
    key: bytes | None
    headers: list[tuple[str, bytes]]


@dataclass
class FakeProducer:
    """Collects sends; ``fail_after`` makes the n-th send's future fail."""

    sent: list[SentRecord] = field(default_factory=list)
    fail_after: int | None = None

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(
        self,
        topic: str,
        value: bytes,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.fail_after is not None and len(self.sent) >= self.fail_after:
            future.set_exception(ConnectionError("broker gone"))
            return future
        self.sent.append(SentRecord(topic, value, key, list(headers or [])))
        future.set_result(None)
        return future

    # The batch API the relay uses (create_batch / send_batch), one partition per topic.
    async def partitions_for(self, topic: str) -> set[int]:
        return {0}

    def create_batch(self) -> FakeBatch:
        return FakeBatch()

    async def send_batch(self, batch: FakeBatch, topic: str, *, partition: int) -> Any:
        futures = [
            await self.send(topic, value, key, headers) for key, value, headers in batch.records
        ]
        failed = [f for f in futures if f.exception() is not None]
        return failed[0] if failed else futures[-1]


@dataclass
class FakeBatch:
    """A record batch that holds ``capacity`` messages (so tests see batches fill up)."""

    capacity: int = 3
    records: list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]] = field(default_factory=list)

    def append(
        self,
        *,
        timestamp: float | None,
        key: bytes | None,
        value: bytes,
        headers: list[tuple[str, bytes]],
    ) -> object | None:
        if len(self.records) >= self.capacity:
            return None
        self.records.append((key, value, list(headers)))
        return object()

    def record_count(self) -> int:
        return len(self.records)

    def size(self) -> int:
        return 61 + sum(len(value) + 30 for _, value, _ in self.records)

    def close(self) -> None:
        return None


@dataclass
class FakeConsumer:
    """The aiokafka consumer calls the consumer runtime makes (no fetching: tests feed it)."""

    committed: dict[Any, int] = field(default_factory=dict)
    assigned: set[Any] = field(default_factory=set)  # every partition fed is assigned
    paused: set[Any] = field(default_factory=set)
    sought: list[tuple[Any, int]] = field(default_factory=list)
    highwaters: dict[Any, int] = field(default_factory=dict)
    partitions: int = 1  # of every topic: each table's records belong in partition 0

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(self.partitions))

    async def commit(self, offsets: dict[Any, int]) -> None:
        self.committed.update(offsets)

    def assignment(self) -> set[Any]:
        return set(self.assigned)

    def pause(self, *partitions: Any) -> None:
        self.paused.update(partitions)

    def resume(self, *partitions: Any) -> None:
        self.paused.difference_update(partitions)

    def seek(self, partition: Any, offset: int) -> None:
        self.sought.append((partition, offset))

    def highwater(self, partition: Any) -> int | None:
        return self.highwaters.get(partition)

    async def end_offsets(self, partitions: list[Any]) -> dict[Any, int]:
        return {tp: self.highwaters.get(tp, 0) for tp in partitions}


def counter_messages(event: Any) -> list[Any]:
    """Relay mapper of the Counter app: one TableClosed per Added (reason = amount)."""
    from contracts import TableClosed
    from services.shared.platform.relay import envelope

    if isinstance(event, Counter.Added):
        return [TableClosed(**envelope(event), table_id=event.table_id, reason=str(event.amount))]
    return []
