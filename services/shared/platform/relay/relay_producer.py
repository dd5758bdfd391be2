"""The relay's producer: one record batch per partition in flight, a new producer after a refusal.

Why aiokafka's batch API and not FastStream's publisher: FastStream's publisher sends one
message per call (``send()`` per message is several times slower than ``send_batch``: the two
"raw Kafka produce+consume" ceilings in BENCHMARKS.md) and hides the record batch and its
acknowledgement, which the relay's ordering proof needs: :meth:`RelayProducer.deliver` builds
ONE closed record batch of a partition's next records (``create_batch`` / ``send_batch``) and
awaits its acknowledgement before the next batch of that partition is built
(``relay_pipeline.py``).

Why a new producer after every refusal: aiokafka's idempotent producer does NOT stop the later
batches of a failed one. Retriable errors are retried forever in order (an idempotent batch
never expires), but a refused batch (MESSAGE_TOO_LARGE, INVALID_RECORD...) fails alone after
aiokafka has already given its sequence numbers away. If the partition had no state for this
producer id yet, the broker then ACCEPTS the next batch (a later record appended, the earlier
one missing: seen on Kafka 4.3); otherwise every later batch of the partition fails for good
with OUT_OF_ORDER_SEQUENCE_NUMBER. So after a refusal the relay waits for the other
partitions' batches in flight (:class:`_Gate`), stops the producer and starts another (a new
producer id, fresh sequences) from ``producer_factory``; a producer passed in is never
replaced, which only suits tests.

Why not several batches in flight per partition: aiokafka 0.14's sender
(``producer/sender.py``, ``message_accumulator.py``) already keeps at most one produce request
per broker in flight and mutes a partition until its request is answered, so a partition's
batches go to the broker one at a time anyway; queueing more only saves the short wait between
an acknowledgement and the next send (measured: 10,000 BetSettled of one partition take about
210 ms either way).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner

from services.shared.platform.relay.relay_records import OutgoingRecord
from services.shared.platform.relay.relay_refusals import REFUSALS, SIZE_REFUSALS

log = logging.getLogger(__name__)

_PARTITIONER = DefaultPartitioner()
"""The producer's own default: murmur2 of the key, so a table keeps its partition."""


@dataclass(slots=True, eq=False)
class PartitionRecords:
    """One topic-partition's records of a relay batch, sent in order by one task."""

    topic: str
    partition: int
    records: list[OutgoingRecord] = field(default_factory=list)
    next: int = 0  # records before it are acknowledged (or quarantined)
    singles_until: int = 0  # records before it go one per batch (after a refused batch)
    more: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class RelayProducer:
    """The relay's producer and the partition of each record (see the module docstring)."""

    def __init__(
        self,
        name: str,
        producer: AIOKafkaProducer | None,
        factory: Callable[[], AIOKafkaProducer] | None,
    ) -> None:
        self.name = name  # the relay's tracking name, for logs
        self._producer = producer
        self._factory = factory
        self.generation = 0  # bumped whenever the producer is replaced
        self.renew_due = False
        self._gate = _Gate()
        self._partitions: dict[str, list[int]] = {}  # per relay batch
        self._chosen: dict[tuple[str, bytes], int] = {}  # murmur2 in pure Python: once per key
        # topic -> the largest batch (bytes) to send it, once it refused one as too large
        self._caps: dict[str, int] = {}

    async def start(self) -> None:
        if self._producer is None:
            self._producer = await self._new_producer()

    async def stop(self) -> None:
        if self._producer is not None and self._factory is not None:
            await self._producer.stop()
        self._producer = None

    def new_batch(self) -> None:
        """A relay batch starts: partition counts are read again (once per relay batch)."""
        self._partitions.clear()
        self._chosen.clear()

    async def _new_producer(self) -> AIOKafkaProducer:
        if self._factory is None:
            raise RuntimeError("relay has no producer")
        producer = self._factory()
        await producer.start()
        return producer

    async def ensure(self) -> None:
        """A producer to send with: a new one when none, or when the last batch failed."""
        if self._producer is None or self.renew_due:
            self.renew_due = False
            await self.renew(self.generation)

    async def renew(self, generation: int) -> None:
        """Replace the producer (unless replaced since ``generation``): once the other
        partitions' batches in flight are acknowledged, stop it and start a new one."""
        async with self._gate.exclusive():
            if generation != self.generation:
                return
            self.generation += 1
            if self._factory is None:  # a producer passed in (tests): kept as it is
                return
            old, self._producer = self._producer, None
            if old is not None:
                try:
                    await old.stop()  # flushes: the batches still in flight get their answer
                except Exception:
                    log.warning("relay %s: stopping the old producer failed", self.name)
            self._producer = await self._new_producer()
            log.info("relay %s uses a new producer", self.name)

    async def partition_count(self, topic: str) -> int:
        """``topic``'s partition count (read once per relay batch)."""
        return len(await self._known(topic))

    async def _known(self, topic: str) -> list[int]:
        known = self._partitions.get(topic)
        if known is None:
            async with self._gate.sending():
                producer = self._live()
                known = sorted(await producer.partitions_for(topic))
            self._partitions[topic] = known
        return known

    async def partition_of(self, record: OutgoingRecord) -> int:
        """The record's partition: the encoder's choice, else murmur2 of its key."""
        if record.partition is not None:
            return record.partition
        choice = self._chosen.get((record.topic, record.key))
        if choice is None:
            known = await self._known(record.topic)
            choice = self._chosen[(record.topic, record.key)] = _PARTITIONER(
                record.key, known, known
            )
        return choice

    def _live(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise RuntimeError("the relay has no producer (not started, or starting one failed)")
        return self._producer

    async def deliver(self, part: PartitionRecords, start: int) -> tuple[str | None, int]:
        """Send one record batch of ``part`` from ``start`` and await its acknowledgement.

        Returns (None, end) when ``records[start:end]`` were appended, (why, end) when the
        broker refused them for good (the producer is replaced then); raises on any other
        failure.
        """
        async with self._gate.sending():
            producer = self._live()
            generation = self.generation
            batch, end = self._build(producer, part, start)
            if end == start:  # not even alone (aiokafka's builder always takes a first record)
                return f"a record of {part.records[start].size} bytes fits no batch", start + 1
            size = batch.size()
            future = await producer.send_batch(batch, part.topic, partition=part.partition)
        try:
            await future
        except REFUSALS as error:
            if end - start > 1 and isinstance(error, SIZE_REFUSALS):
                self._caps[part.topic] = min(self._caps.get(part.topic, size), size) // 2
            why = (
                f"Kafka refused a record batch of {end - start} record(s), {size} bytes, with "
                f"{type(error).__name__} ({getattr(error, 'message', '')})"
            )
            log.warning("relay %s: %s: %s", self.name, part.topic, why)
            await self.renew(generation)
            return why, end
        return None, end

    def _build(
        self, producer: AIOKafkaProducer, part: PartitionRecords, start: int
    ) -> tuple[Any, int]:
        """A closed record batch of ``part.records[start:end]``, and ``end`` (``start``: none)."""
        records = part.records
        batch = producer.create_batch()
        stop = start + 1 if start < part.singles_until else len(records)
        cap = self._caps.get(part.topic)
        end = start
        while end < stop:
            record = records[end]
            if cap is not None and end > start and batch.size() + record.size > cap:
                break
            if (
                batch.append(
                    key=record.key, value=record.value, timestamp=None, headers=record.headers
                )
                is None
            ):
                break
            end += 1
        batch.close()  # complete: no linger in the producer
        return batch, end


class _Gate:
    """Lets sends through, except while the producer is replaced (which waits for them)."""

    def __init__(self) -> None:
        self._changed = asyncio.Condition()
        self._sending = 0
        self._closed = False

    @asynccontextmanager
    async def sending(self) -> AsyncIterator[None]:
        async with self._changed:
            await self._changed.wait_for(lambda: not self._closed)
            self._sending += 1
        try:
            yield
        finally:
            async with self._changed:
                self._sending -= 1
                self._changed.notify_all()

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        async with self._changed:
            await self._changed.wait_for(lambda: not self._closed)
            self._closed = True
            await self._changed.wait_for(lambda: self._sending == 0)
        try:
            yield
        finally:
            async with self._changed:
                self._closed = False
                self._changed.notify_all()
