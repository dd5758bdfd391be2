"""The outbox relay: publishes a service's stored events to Kafka, in order, at least once.

The service's event store IS its outbox. The relay reads the Application's
notification log from the position it recorded last, turns each stored domain
event into zero or more contract messages (the service's mapper), publishes
them with the idempotent producer keyed by table id, waits for every send of
the batch to be acknowledged, and only then records the new position as an
eventsourcing tracking record (``relay:<service>``) in the same store.

After a crash it resumes from the recorded position, so the tail of the last
batch may be published again: downstream consumers see duplicates (with the
same ``pb-notification-id`` header and the same ``event_id``) and drop them by
their tracking records. Nothing is ever lost.

Every message carries the headers ``pb-source`` (the service),
``pb-notification-id`` (the stored event's notification id) and
``pb-message-index`` (0, 1, ... when one stored event becomes several
messages, e.g. a coup's settlement becoming one BetSettled per bet) and
``pb-type`` (the message type, so a reader can skip what it does not need
without parsing it). The first three together
they increase strictly within every partition, which consumers use as their
tracking position (see ``consumer.position_of``).

The relay wakes as soon as the Application saves (``add_save_listener``) and
otherwise polls every ``relay_poll_interval`` seconds (events written by
another process, e.g. after a restart, are found by the poll). The listener
also hands over the domain events just recorded, keyed by notification id, so
the relay maps them without decoding the stored JSON again (a coup's settlement
of 10,000 lines); what it did not see saved (a restart, another process) it
reads from the store. Either way the notification log decides what is
published and in which order.

Limitation: should a send fail for good (broker unavailable beyond the
producer's retries), later sends of the same batch may already have gone out;
the relay then republishes from its recorded position. A consumer that had
already seen a later message of that partition would skip the earlier one.
With the idempotent producer this needs a send to fail for good after its
retries (``request_timeout_ms``) while a later one in the same partition
succeeded; the relay logs the failure and starts again from its position.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner
from eventsourcing.persistence import Recording

from contracts import Message, encode, partition_key, topic_for
from services.platform.application import ServiceApplication
from services.platform.kafka import (
    INDEX_HEADER,
    NOTIFICATION_HEADER,
    SOURCE_HEADER,
    TYPE_HEADER,
    idempotent_producer,
)
from services.platform.settings import Settings

log = logging.getLogger(__name__)

MAX_FRESH_EVENTS = 10_000
"""Domain events just saved, kept for mapping without decoding; beyond this, the store."""

CHUNK_MESSAGES = 1_000
"""Messages encoded per step of a batch (the chunk before is sent meanwhile)."""

MAX_MESSAGES_PER_BATCH = 50_000
"""A batch stops after the notification that brings it to this many messages."""

_PARTITIONER = DefaultPartitioner()
"""The producer's own default: murmur2 of the key, so a table keeps its partition."""

EventMapper = Callable[[Any], Sequence[Message]]
"""Stored domain event -> the contract messages to publish (empty: an internal event)."""


@dataclass(slots=True)  # not frozen: built 10,000 at a time, a frozen init costs 3x
class OutgoingRecord:
    notification_id: int
    index: int
    topic: str
    key: bytes
    value: bytes
    kind: bytes  # the message type, UTF-8 (the pb-type header)
    message: Message | None = None  # for the metrics hook (on_published)


class OutboxRelay:
    """Publish ``app``'s notification log to Kafka through ``mapper``."""

    def __init__(
        self,
        app: ServiceApplication,
        settings: Settings,
        mapper: EventMapper,
        *,
        tracking_name: str | None = None,
        producer: AIOKafkaProducer | None = None,
    ) -> None:
        self.app = app
        self.settings = settings
        self.mapper = mapper
        self.tracking_name = tracking_name or f"relay:{settings.service}"
        self._producer = producer
        self._own_producer = producer is None
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        # notification id -> the domain event just saved in this process (see the docstring)
        self._fresh: dict[int, object] = {}
        self._fresh_lock = threading.Lock()
        self.position = 0
        self.published = 0
        # Operations hook (metrics.py): called with the messages of every acknowledged batch.
        self.on_published: Callable[[Sequence[Message]], None] | None = None

    # -- lifecycle ----------------------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._producer is None:
            self._producer = idempotent_producer(self.settings, "relay")
        if self._own_producer:
            await self._producer.start()
        self.position = await asyncio.to_thread(self.app.tracked_position, self.tracking_name)
        self.app.add_save_listener(self._on_saved)
        log.info("relay %s starts after notification %d", self.tracking_name, self.position)

    async def stop(self) -> None:
        self.app.remove_save_listener(self._on_saved)
        if self._producer is not None and self._own_producer:
            await self._producer.stop()
        self._producer = None

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
                await asyncio.wait(
                    {waiter, stopper},
                    timeout=self.settings.relay_poll_interval,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                waiter.cancel()
                stopper.cancel()

    # -- publishing ---------------------------------------------------------------
    async def publish_pending(self) -> int:
        """Publish every stored event after the recorded position; returns messages sent.

        Each batch of notifications is mapped and encoded in chunks of ``CHUNK_MESSAGES``
        in the worker thread while the event loop sends the chunks before: the first
        bets of a 10,000-bet settlement are on their way before the last are encoded.
        The position is recorded once every send of the batch is acknowledged.
        """
        total = 0
        while True:
            events, last_id = await asyncio.to_thread(self._read_events, self.position)
            if last_id is None:
                return total
            done = [self.position]
            chunks = self._chunks(events, done)
            futures: list[asyncio.Future[Any]] = []
            batch: list[OutgoingRecord] = []
            while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
                futures.extend(await self._send(chunk))
                batch.extend(chunk)
            if futures:
                await asyncio.gather(*futures)
            last_id = done[0]
            await asyncio.to_thread(self.app.record_position, self.tracking_name, last_id)
            self.position = last_id
            if self.on_published is not None:  # operations hook (metrics)
                self.on_published([r.message for r in batch if r.message is not None])
            total += len(batch)
            self.published += len(batch)
            log.debug("relay %s published %d up to %d", self.tracking_name, len(batch), last_id)

    def _read_events(self, after: int) -> tuple[list[tuple[int, Any]], int | None]:
        """The next notifications' domain events (just saved: as saved; else decoded)."""
        notifications = self.app.process_recorder.select_notifications(
            start=after + 1, limit=self.settings.relay_batch_size
        )
        if not notifications:
            return [], None
        last_id = notifications[-1].id
        with self._fresh_lock:
            fresh = {n.id: self._fresh.pop(n.id, None) for n in notifications}
            stale = [key for key in self._fresh if key <= last_id]  # seen in the store first
            for key in stale:
                del self._fresh[key]
        return [
            (n.id, fresh[n.id] or self.app.mapper.to_domain_event(n)) for n in notifications
        ], last_id

    def _chunks(
        self, events: Sequence[tuple[int, Any]], done: list[int]
    ) -> Iterator[list[OutgoingRecord]]:
        """The records of ``events`` in chunks; ``done[0]``: the last notification mapped.

        Stops after the notification that brings the batch to ``MAX_MESSAGES_PER_BATCH``
        (the rest next time: keeps one batch's memory and send time bounded).
        """
        topics: dict[type[Any], str] = {}
        chunk: list[OutgoingRecord] = []
        count = 0
        for notification_id, event in events:
            if count >= MAX_MESSAGES_PER_BATCH:
                break
            for index, message in enumerate(self.mapper(event)):
                kind = type(message)
                topic = topics.get(kind)
                if topic is None:
                    topic = topics[kind] = self.settings.topic(topic_for(message))
                chunk.append(
                    OutgoingRecord(
                        notification_id=notification_id,
                        index=index,
                        topic=topic,
                        key=partition_key(message),
                        value=encode(message),
                        kind=message.type.encode(),
                        message=message,
                    )
                )
                count += 1
                if len(chunk) >= CHUNK_MESSAGES:
                    yield chunk
                    chunk = []
            done[0] = notification_id
        if chunk:
            yield chunk

    def _read_batch(self, after: int) -> tuple[list[OutgoingRecord], int | None]:
        """Every record of the next batch at once, and its last notification id."""
        events, last_id = self._read_events(after)
        if last_id is None:
            return [], None
        done = [after]
        records = [record for chunk in self._chunks(events, done) for record in chunk]
        return records, done[0]

    async def _send(self, records: Sequence[OutgoingRecord]) -> list[asyncio.Future[Any]]:
        """Hand ``records`` to the producer; the futures of their acknowledgements.

        Records are grouped by topic and partition (the default partitioner's choice for
        their key, as a plain keyed send would make) and sent as record batches, in
        order within each partition: one ``send()`` per message costs about three times
        as much (see BENCHMARKS.md, Kafka ceilings).
        """
        producer = self._producer
        if producer is None:
            raise RuntimeError("relay not started")
        source = self.settings.service.encode()
        by_partition: dict[tuple[str, int], list[OutgoingRecord]] = {}
        partitions: dict[str, list[int]] = {}
        chosen: dict[tuple[str, bytes], int] = {}  # murmur2 in pure Python: once per key
        for record in records:
            choice = chosen.get((record.topic, record.key))
            if choice is None:
                if record.topic not in partitions:
                    partitions[record.topic] = sorted(await producer.partitions_for(record.topic))
                known = partitions[record.topic]
                choice = chosen[(record.topic, record.key)] = _PARTITIONER(record.key, known, known)
            by_partition.setdefault((record.topic, choice), []).append(record)
        futures = []
        for (topic, partition), group in by_partition.items():
            batch = producer.create_batch()
            for record in group:
                headers = [
                    (SOURCE_HEADER, source),
                    (NOTIFICATION_HEADER, str(record.notification_id).encode()),
                    (INDEX_HEADER, str(record.index).encode()),
                    (TYPE_HEADER, record.kind),
                ]
                if (
                    batch.append(
                        key=record.key, value=record.value, timestamp=None, headers=headers
                    )
                    is None
                ):
                    futures.append(await producer.send_batch(batch, topic, partition=partition))
                    batch = producer.create_batch()
                    if (
                        batch.append(
                            key=record.key, value=record.value, timestamp=None, headers=headers
                        )
                        is None
                    ):
                        raise ValueError(f"a message of {len(record.value)} bytes fits no batch")
            if batch.record_count():
                futures.append(await producer.send_batch(batch, topic, partition=partition))
        return futures
