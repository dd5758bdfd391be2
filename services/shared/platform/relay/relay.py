"""The outbox relay: a service's stored events published to Kafka, in order, at least once.

:class:`OutboxRelay` reads the notification log after the position it recorded
(``relay:<service>``), encodes the records (``records.py``), sends them with an idempotent
producer, one closed record batch per partition in flight (:class:`RelayProducer`: aiokafka's
batch API, as FastStream's publisher sends one message per call and hides the acknowledgement),
and records the new position once every record is acknowledged (on the same trip to a thread
as its next read). After a failure it goes on from the acknowledged position; after a restart,
from the recorded one (consumers drop the duplicates). Markers (dealing's OpenBook /
CloseBook) are sent and acknowledged before the rest of a batch. After a refused batch the
producer is replaced (an idempotent producer's later batches would be reordered or fail). It
wakes when the Application saves, and polls otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from eventsourcing.persistence import IntegrityError, Recording

from contracts import DEAD_LETTERS, Message, MessageQuarantined
from services.shared.platform.kafka import cluster_id as read_cluster_id
from services.shared.platform.kafka import idempotent_producer, key_partition
from services.shared.platform.relay.lines import LineView
from services.shared.platform.relay.records import (
    REFUSALS,
    SIGNED_TOPICS,
    SIZE_REFUSALS,
    EventMapper,
    OutgoingRecord,
    Quarantine,
    RecordEncoder,
    quarantine_record,
)
from services.shared.platform.security.signing import Signer
from services.shared.platform.settings import Settings
from services.shared.platform.store.application import ServiceApplication

log = logging.getLogger(__name__)


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

    def __init__(self, name: str, factory: Callable[[], AIOKafkaProducer]) -> None:
        self.name = name  # the relay's tracking name, for logs
        self._producer: AIOKafkaProducer | None = None
        self._factory = factory
        self.generation = 0  # bumped whenever the producer is replaced
        self.renew_due = False
        self._gate = _Gate()
        self.counts: dict[str, int] = {}  # topic -> its partition count, per relay batch
        # topic -> the largest batch (bytes) to send it, once it refused one as too large
        self._caps: dict[str, int] = {}

    async def start(self) -> None:
        if self._producer is None:
            self._producer = await self._new_producer()

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
        self._producer = None

    async def _new_producer(self) -> AIOKafkaProducer:
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
        count = self.counts.get(topic)
        if count is None:
            async with self._gate.sending():
                count = self.counts[topic] = len(await self._live().partitions_for(topic))
        return count

    def _live(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise RuntimeError("the relay has no producer (not started, or starting one failed)")
        return self._producer

    async def deliver(self, part: PartitionRecords, start: int) -> tuple[str | None, int]:
        """Send one record batch of ``part`` from ``start`` and await its acknowledgement."""
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


@dataclass(slots=True)
class Published:
    """What one relay batch delivered (acknowledged), for the counters and hooks."""

    acknowledged: list[OutgoingRecord] = field(default_factory=list)
    quarantined: list[OutgoingRecord] = field(default_factory=list)  # quarantine records


class Pipeline:
    """The partition senders of (part of) a relay batch; ``finish`` awaits them all."""

    def __init__(
        self, producer: RelayProducer, quarantine: Quarantine, published: Published
    ) -> None:
        self.producer = producer
        self.quarantine = quarantine
        self.published = published
        self.partitions: dict[tuple[str, int], PartitionRecords] = {}
        self.closing = False
        self.error: BaseException | None = None

    async def add(self, records: Sequence[OutgoingRecord]) -> None:
        touched: dict[tuple[str, int], PartitionRecords] = {}
        chosen: dict[tuple[str, bytes], int] = {}  # (topic, key) -> the producer's partition
        for record in records:
            if record.replaces is not None:
                self.published.quarantined.append(record)
            partition = record.partition  # the encoder's choice (signed, or a cell's)
            if partition is None:  # else Kafka's default partitioner's (murmur2 of the key),
                where = (record.topic, record.key)  # once per key: a fact's lines share one
                partition = chosen.get(where)
                if partition is None:
                    count = await self.producer.partition_count(record.topic)
                    partition = chosen[where] = key_partition(record.key, count)
            tp = (record.topic, partition)
            part = self.partitions.get(tp)
            if part is None:
                part = self.partitions[tp] = PartitionRecords(*tp)
            part.records.append(record)
            touched[tp] = part
        for part in touched.values():
            if part.task is None or part.task.done():
                part.task = asyncio.create_task(self._send(part))
            part.more.set()

    async def finish(self) -> None:
        """Wait until every record is acknowledged (or quarantined); raises the first failure."""
        self.closing = True
        for part in self.partitions.values():
            part.more.set()
        while pending := [
            p.task for p in self.partitions.values() if p.task is not None and not p.task.done()
        ]:
            await asyncio.wait(pending)
        if self.error is not None:
            raise self.error

    def cancel(self) -> None:
        for part in self.partitions.values():
            if part.task is not None and not part.task.done():
                part.task.cancel()

    async def _send(self, part: PartitionRecords) -> None:
        records = part.records
        try:
            while self.error is None:
                start = part.next
                if start == len(records):
                    if self.closing:
                        return
                    part.more.clear()
                    await part.more.wait()
                    continue
                refusal, end = await self.producer.deliver(part, start)
                if refusal is None:
                    self.published.acknowledged.extend(records[start:end])
                    part.next = end
                elif end - start > 1:
                    part.singles_until = end  # find the record(s) refused: one per batch
                else:
                    await self._quarantine(records[start], refusal)
                    part.next = end
        except Exception as error:  # this partition stops; so does the relay batch
            if self.error is None:
                self.error = error
            for other in self.partitions.values():
                other.more.set()

    async def _quarantine(self, record: OutgoingRecord, refusal: str) -> None:
        if record.replaces is not None:  # the quarantine record itself: nothing left to try
            original = record.replaces
            log.error(
                "relay %s could not publish the MessageQuarantined of %s %s either (%s): it "
                "stays only in the event store, notification %d message %d",
                self.producer.name,
                original.message.type,
                original.message.event_id,
                refusal,
                original.notification_id,
                original.index,
            )
            return
        await self.add([self.quarantine(record, refusal)])


MAX_FRESH_EVENTS = 10_000
"""Domain events just saved, kept for mapping without decoding; beyond this, the store."""


class OutboxRelay:
    """Publish ``app``'s notification log to Kafka through ``mapper``."""

    def __init__(
        self,
        app: ServiceApplication,
        settings: Settings,
        mapper: EventMapper,
        *,
        tracking_name: str | None = None,
        producer_factory: Callable[[], AIOKafkaProducer] | None = None,
        signer: Signer | None = None,
        signed_topics: frozenset[str] = SIGNED_TOPICS,
    ) -> None:
        """``producer_factory``: makes the producers the relay starts, stops and replaces
        (default: the idempotent producer of ``settings``, whose cluster's id the signatures
        bind, read at the first start; a factory's, in tests, bind the cluster ``""``)."""
        self._read_cluster = producer_factory is None
        self.app = app
        self.settings = settings
        self.tracking_name = tracking_name or f"relay:{settings.service}"
        if producer_factory is None:
            producer_factory = functools.partial(idempotent_producer, settings, "relay")
        self.producer = RelayProducer(self.tracking_name, producer_factory)
        quarantine = functools.partial(
            quarantine_record,
            service=settings.service,
            dead_letter_topic=settings.topic(DEAD_LETTERS),
            relay=self.tracking_name,
        )
        self.encoder = RecordEncoder(
            settings,
            mapper,
            quarantine,
            signer=signer,
            signed_topics=signed_topics,
            partitions=self.producer.partition_count,
        )
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        # notification id -> the domain event just saved in this process (see the docstring)
        self._fresh: dict[int, object] = {}
        self._fresh_lock = threading.Lock()
        self.position = 0  # the last notification acknowledged
        self._recorded = 0  # the last position recorded in the store (relay:<service>)
        self.published = 0
        self.idle = False  # waiting for events to publish (the process may collect garbage)
        self.on_idle: Callable[[], object] | None = None  # called as it starts waiting
        self.quarantined = 0
        # Operations hooks (metrics.py): the messages of every acknowledged batch, and the
        # MessageQuarantined records that replaced messages the broker cannot take.
        self.on_published: Callable[[Sequence[Message | LineView]], None] | None = None
        self.on_quarantined: Callable[[Sequence[MessageQuarantined]], None] | None = None

    # -- lifecycle ----------------------------------------------------------------
    @property
    def started(self) -> bool:
        """Started (and so able to publish), whether or not stopped since."""
        return self._loop is not None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._read_cluster and self.encoder.signer is not None:
            self.encoder.cluster = await read_cluster_id(self.settings)
            self._read_cluster = False
        await self.producer.start()
        self.position = await asyncio.to_thread(self.app.tracked_position, self.tracking_name)
        self._recorded = self.position
        self.app.add_save_listener(self._on_saved)
        log.info("relay %s starts after notification %d", self.tracking_name, self.position)

    async def stop(self) -> None:
        self.app.remove_save_listener(self._on_saved)
        if self.position > self._recorded:  # acknowledged, not yet recorded: no republishing
            try:
                await asyncio.to_thread(self._record)
            except Exception:
                log.warning("relay %s: recording its position on stop failed", self.tracking_name)
        await self.producer.stop()

    def _on_saved(self, recordings: Sequence[Recording[UUID]]) -> None:
        with self._fresh_lock:
            if len(self._fresh) < MAX_FRESH_EVENTS:  # a stalled relay falls back to the store
                for recording in recordings:
                    self._fresh[recording.notification.id] = recording.domain_event
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake.set)

    async def run(self, stopping: asyncio.Event) -> None:
        """Publish until ``stopping`` is set (then publish what is pending and return)."""
        delay = 0.5
        while True:
            self._wake.clear()
            try:
                count = await self.publish_pending()
                delay = 0.5
            except Exception:
                if stopping.is_set():
                    log.exception("relay %s failed while stopping", self.tracking_name)
                    return
                # Nothing was recorded past the last acknowledged batch: start again there.
                log.exception("relay %s failed; retrying in %.1fs", self.tracking_name, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            if stopping.is_set():
                return
            if count == 0:
                waiter = asyncio.create_task(self._wake.wait())
                stopper = asyncio.create_task(stopping.wait())
                self.idle = True
                try:
                    if self.on_idle is not None:
                        self.on_idle()
                    await asyncio.wait(
                        {waiter, stopper},
                        timeout=self.settings.relay_poll_interval,
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                finally:
                    self.idle = False
                waiter.cancel()
                stopper.cancel()

    # -- publishing ---------------------------------------------------------------
    async def publish_pending(self) -> int:
        """Publish every stored event after the acknowledged position; returns records
        acknowledged."""
        if self._loop is None:
            raise RuntimeError("relay not started")
        total = 0
        leftover: list[tuple[int, Any]] = []
        while True:
            await self.producer.ensure()
            if leftover:
                events = leftover
            else:  # the last batch's position recorded on the same trip to a thread
                events = await asyncio.to_thread(self._record_and_read)
                if not events:
                    return total
            done = [self.position]
            try:
                published = await self._publish_batch(events, done)
            except KafkaError:
                self.producer.renew_due = True  # its state may be what failed: start with a new one
                raise
            last_id = done[0]
            leftover = [item for item in events if item[0] > last_id]
            self.position = last_id  # acknowledged; recorded with the next read
            if leftover:
                await asyncio.to_thread(self._record)
            self._report(published)
            total += len(published.acknowledged)
            log.debug(
                "relay %s published %d up to %d",
                self.tracking_name,
                len(published.acknowledged),
                last_id,
            )

    def _report(self, published: Published) -> None:
        self.published += len(published.acknowledged)
        if self.on_published is not None:  # operations hook (metrics)
            self.on_published([r.message for r in published.acknowledged])
        if published.quarantined:
            self.quarantined += len(published.quarantined)
            if self.on_quarantined is not None:
                self.on_quarantined(
                    [
                        m
                        for r in published.quarantined
                        if isinstance(m := r.message, MessageQuarantined)
                    ]
                )

    async def _publish_batch(self, events: Sequence[tuple[int, Any]], done: list[int]) -> Published:
        """Send the records of ``events`` (markers first); ``done[0]``: the last notification
        of the relay batch (the rest of ``events`` is for the next one)."""
        self.producer.counts.clear()  # partition counts are read again once per relay batch
        published = Published()
        others = Pipeline(self.producer, self.encoder.quarantine, published)
        try:
            async with contextlib.aclosing(self.encoder.chunks(events, done)) as chunks:
                async for chunk in chunks:
                    if chunk.markers:
                        markers = Pipeline(self.producer, self.encoder.quarantine, published)
                        try:
                            await markers.add(chunk.markers)
                            await markers.finish()
                        finally:
                            markers.cancel()
                    if chunk.others:
                        await others.add(chunk.others)
                    if others.error is not None:
                        break
                    await asyncio.sleep(0)  # the senders go on while the next chunk is made
            await others.finish()
        finally:
            others.cancel()
        return published

    def _record_and_read(self) -> list[tuple[int, Any]]:
        """:meth:`_record`, then :meth:`_read_events`: one trip to a thread, not two (a trip
        costs about 100 us of CPU: BENCHMARKS.md, "A coup's fixed cost")."""
        self._record()
        return self._read_events(self.position)

    def _record(self) -> None:
        """Record :attr:`position` in the store unless it is recorded already."""
        position = self.position
        if position > self._recorded:
            try:
                self.app.record_position(self.tracking_name, position)
            except IntegrityError:  # recorded already (a commit that reported a failure)
                if self.app.tracked_position(self.tracking_name) < position:
                    raise
            self._recorded = position

    def _read_events(self, after: int) -> list[tuple[int, Any]]:
        """The next notifications' domain events (just saved: as saved; else decoded)."""
        notifications = self.app.process_recorder.select_notifications(
            start=after + 1, limit=self.settings.relay_batch_size
        )
        if not notifications:
            return []
        last_id = notifications[-1].id
        with self._fresh_lock:
            fresh = {n.id: self._fresh.pop(n.id, None) for n in notifications}
            stale = [key for key in self._fresh if key <= last_id]  # seen in the store first
            for key in stale:
                del self._fresh[key]
        return [(n.id, fresh[n.id] or self.app.mapper.to_domain_event(n)) for n in notifications]
