"""The outbox relay: publishes a service's stored events to Kafka, in order, at least once.

The service's event store IS its outbox. The relay reads the Application's
notification log from the position it recorded last, turns each stored domain
event into zero or more contract messages (the service's mapper), publishes
them with the idempotent producer keyed by table id, waits for every send of
the batch to be acknowledged, and only then records the new position as an
eventsourcing tracking record (``relay:<service>``) in the same store.

After a crash or a failed batch it starts again from the recorded position, so
the head of the last batch may be published again: downstream consumers see
duplicates (same ``pb-notification-id`` header, same ``event_id``) and drop
them by their tracking records. Nothing is ever lost.

Every message carries the headers ``pb-source`` (the service),
``pb-notification-id`` (the stored event's notification id),
``pb-message-index`` (0, 1, ... when one stored event becomes several
messages, e.g. a coup's settlement becoming one BetSettled per bet) and
``pb-type`` (the message type, so a reader can skip what it does not need
without parsing it). The first three increase strictly within every partition;
consumers use them as their tracking position (see ``consumer.position_of``).

Signatures. With a ``signer`` (the service's key, ``signing.py``), every record for a topic
in ``SIGNED_TOPICS`` also carries ``pb-sig``: a detached JWS (EdDSA) of its value, bound to
its logical topic, key and position (``pb-notification-id:pb-message-index``). Those are the
owned topics some service consumes and the marks on ``BET_COMMANDS``; a reader believes no
record there without it. The signature is made while the chunk is encoded, in the worker
thread (Ed25519 signing releases the GIL): about 35 us per record.

Order within a partition. Each topic-partition of a batch has one sender that
hands the producer one record batch (up to the producer's 256 KiB) and awaits
its acknowledgement before building and sending the next; partitions are sent
in parallel. When a batch fails, that partition sends nothing more (nor do the
others start new batches) and the relay batch fails without recording a
position. So in every partition what was appended is a prefix, in log order,
of the relay batch's records there (a quarantined record's place is taken by its
record on the dead-letters topic, see below); republishing the batch from the recorded
position then appends the rest after duplicates that consumers skip: no
consumer ever sees a record whose predecessor in the log was not appended.
Recording the position only once the whole relay batch is acknowledged is
therefore enough.

Why not several batches in flight per partition: aiokafka 0.14's sender
(``producer/sender.py``, ``message_accumulator.py``) already keeps at most one
produce request per broker in flight and mutes a partition until its request
is answered, so a partition's batches go to the broker one at a time anyway;
queueing more only saves the short wait between an acknowledgement and the next
send (measured here: 10,000 BetSettled of one partition take about 210 ms either way).
And the idempotent producer does NOT stop the later batches of a failed one:
retriable errors are retried forever in order (an idempotent batch never
expires), but a refused batch (MESSAGE_TOO_LARGE, INVALID_RECORD...) fails
alone after aiokafka has already given its sequence numbers away. If the
partition had no state for this producer id yet, the broker then ACCEPTS the
next batch (a later record appended, the earlier one missing: seen on Kafka
4.3); otherwise every later batch of the partition fails for good with
OUT_OF_ORDER_SEQUENCE_NUMBER. Hence one batch at a time per partition, and a
new producer (a new producer id, fresh sequences) after every refusal: the
relay waits for the other partitions' batches in flight, stops the producer
and starts another (``producer_factory``; a producer passed in is never
replaced, which only suits tests).

Quarantine. A message the broker can never accept is not retried forever:

- before sending, a record whose single-record batch would exceed
  ``max_record_bytes`` (1 MiB: the producer's ``max_request_size`` and, with
  12 bytes to spare, the broker's default ``max.message.bytes``) is replaced
  at once;
- when the broker refuses a batch as too large or invalid (a topic configured
  with a lower ``max.message.bytes``, a record it finds invalid), the records
  of that batch are sent again one per batch; one refused alone is replaced.
  After a batch is refused as too large, the topic's batches are kept to half
  its size (halved again on every such refusal, until the relay restarts).

A replaced message stays in the event store; in its place a
:class:`contracts.MessageQuarantined` (type, id, size, SHA-256, reason,
notification id and index) goes to the dead-letters topic, with the original
key and the original's ``pb-*`` position headers, and the relay goes on with
the messages behind it. The alarm: an ERROR log at once, and once the batch is
recorded the ``quarantined`` counter and the ``on_quarantined`` hook (the
quarantine records, for the metrics). Nothing else is taken as a refusal: an
unreachable broker only delays (the idempotent producer retries the batches in
flight, in order, until it answers), and any other failure (a timeout, an
authorisation or unknown server error, a timestamp out of the topic's range)
fails the relay batch, which is published again from the recorded position
after a back-off, with a new producer.

Markers first. The records of a relay batch for ``BET_COMMANDS`` (dealing's
``OpenBook`` / ``CloseBook``, which mark in a table's partition where betting
on a coup opens and closes) are sent and acknowledged before the batch's other
records, so a bettor who reads a ``BettingOpened`` finds the book open. A large
batch streams its records as they are encoded; once it has let other records
go, a later notification with markers starts the next relay batch instead.

The relay wakes as soon as the Application saves (``add_save_listener``) and
otherwise polls every ``relay_poll_interval`` seconds (events written by
another process, e.g. after a restart, are found by the poll). The listener
also hands over the domain events just recorded, keyed by notification id, so
the relay maps them without decoding the stored JSON again (a coup's settlement
of 10,000 lines); what it did not see saved (a restart, another process) it
reads from the store. Either way the notification log decides what is
published and in which order.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID, uuid5

import aiokafka.errors as kafka_errors
from aiokafka import AIOKafkaProducer
from aiokafka.errors import (
    BrokerResponseError,
    CorruptRecordException,
    KafkaError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
)
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from eventsourcing.persistence import Recording

from contracts import (
    BET_COMMANDS,
    BOOK_EVENTS,
    DEAD_LETTERS,
    SHOE_COMMANDS,
    SHOE_EVENTS,
    TABLE_EVENTS,
    Message,
    MessageQuarantined,
    TableMessage,
    encode,
    partition_key,
    topic_for,
)
from services.shared.platform.application import ServiceApplication
from services.shared.platform.kafka import (
    INDEX_HEADER,
    NOTIFICATION_HEADER,
    SIGNATURE_HEADER,
    SOURCE_HEADER,
    TYPE_HEADER,
    idempotent_producer,
)
from services.shared.platform.settings import Settings
from services.shared.platform.signing import Signer

log = logging.getLogger(__name__)

MAX_FRESH_EVENTS = 10_000
"""Domain events just saved, kept for mapping without decoding; beyond this, the store."""

CHUNK_MESSAGES = 1_000
"""Messages encoded per step of a batch (the chunk before is sent meanwhile)."""

MAX_MESSAGES_PER_BATCH = 50_000
"""A batch stops after the notification that brings it to this many messages."""

MAX_RECORD_BYTES = 1024 * 1024
"""The largest one-record batch the relay sends: aiokafka's ``max_request_size`` (1 MiB), just
under the broker's default ``max.message.bytes`` (1 MiB + 12 bytes)."""

MARKERS = BET_COMMANDS
"""The logical topic whose records of a batch go (and are acknowledged) before the others."""

SIGNED_TOPICS: frozenset[str] = frozenset(
    {TABLE_EVENTS, SHOE_EVENTS, SHOE_COMMANDS, BOOK_EVENTS, BET_COMMANDS}
)
"""Logical topics whose records the relay signs: every owned topic a service reads, and the
marks on bet-commands. ``BET_EVENTS`` (owned, read by no service: 10,000 BetSettled in one
coup) is not signed by default; ``OutboxRelay(signed_topics=...)`` can add it."""

_SIGNATURE_OVERHEAD = len(SIGNATURE_HEADER) + 10
"""Bytes of the ``pb-sig`` header besides its value, at most (the varints of a record header)."""

_PARTITIONER = DefaultPartitioner()
"""The producer's own default: murmur2 of the key, so a table keeps its partition."""

EventMapper = Callable[[Any], Sequence[Message]]
"""Stored domain event -> the contract messages to publish (empty: an internal event)."""


class InvalidRecordError(BrokerResponseError):  # type: ignore[misc]
    """INVALID_RECORD (87): the broker refused a record as invalid (e.g. no key on a compacted
    topic). aiokafka 0.14 has no class for this code and reports an UnknownError, which also
    stands for transient server errors; registering it lets the relay tell the two apart."""

    errno = 87
    message = "INVALID_RECORD"
    description = "The broker refused a record of the batch as invalid."


kafka_errors.kafka_errors.setdefault(InvalidRecordError.errno, InvalidRecordError)

SIZE_REFUSALS: tuple[type[Exception], ...] = (MessageSizeTooLargeError, RecordListTooLargeError)
"""The broker refused a batch as larger than the topic allows."""

REFUSALS: tuple[type[Exception], ...] = (
    *SIZE_REFUSALS,
    InvalidRecordError,
    CorruptRecordException,  # what brokers older than INVALID_RECORD answer for an invalid record
)
"""The broker will never append this batch: its records are tried alone, then quarantined.

Every other failure is taken as transient (retried from the recorded position): an unknown
server error, a timestamp out of the topic's range (the relay's clock), authorisation..."""


@dataclass(slots=True)  # not frozen: built 10,000 at a time, a frozen init costs 3x
class OutgoingRecord:
    notification_id: int
    index: int
    topic: str
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]
    size: int  # an upper bound of a record batch holding only this record
    message: Message  # for the operations hooks and the quarantine record
    replaces: OutgoingRecord | None = None  # set on a quarantine record: the one it replaces


@dataclass(slots=True)
class _Chunk:
    markers: list[OutgoingRecord] = field(default_factory=list)
    others: list[OutgoingRecord] = field(default_factory=list)


@dataclass(slots=True)
class _Published:
    """What one relay batch delivered (acknowledged), for the counters and hooks."""

    acknowledged: list[OutgoingRecord] = field(default_factory=list)
    quarantined: list[OutgoingRecord] = field(default_factory=list)  # quarantine records


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
        producer_factory: Callable[[], AIOKafkaProducer] | None = None,
        signer: Signer | None = None,
        signed_topics: frozenset[str] = SIGNED_TOPICS,
    ) -> None:
        if producer is not None and producer_factory is not None:
            raise ValueError("pass a producer or a producer factory, not both")
        self.app = app
        self.settings = settings
        self.mapper = mapper
        self.signer = signer  # None: nothing is signed (tests of the relay alone)
        self.signed_topics = signed_topics  # logical topics
        self.tracking_name = tracking_name or f"relay:{settings.service}"
        self._producer = producer
        # The relay starts, stops and replaces the producers it makes (see the docstring).
        self._factory = producer_factory
        if producer is None and producer_factory is None:
            self._factory = lambda: idempotent_producer(settings, "relay")
        self._generation = 0  # bumped whenever the producer is replaced
        self._renew_due = False
        self._gate = _Gate()
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        # notification id -> the domain event just saved in this process (see the docstring)
        self._fresh: dict[int, object] = {}
        self._fresh_lock = threading.Lock()
        self._marker_topic = settings.topic(MARKERS)
        self._dead_letter_topic = settings.topic(DEAD_LETTERS)
        self._partitions: dict[str, list[int]] = {}  # per relay batch
        self._chosen: dict[tuple[str, bytes], int] = {}  # murmur2 in pure Python: once per key
        # topic -> the largest batch (bytes) to send it, once it refused one as too large
        self._caps: dict[str, int] = {}
        self.max_record_bytes = MAX_RECORD_BYTES  # larger records are quarantined unsent
        self.position = 0
        self.published = 0
        self.quarantined = 0
        # Operations hooks (metrics.py): the messages of every acknowledged batch, and the
        # MessageQuarantined records that replaced messages the broker cannot take.
        self.on_published: Callable[[Sequence[Message]], None] | None = None
        self.on_quarantined: Callable[[Sequence[MessageQuarantined]], None] | None = None

    # -- lifecycle ----------------------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._producer is None:
            self._producer = await self._new_producer()
        self.position = await asyncio.to_thread(self.app.tracked_position, self.tracking_name)
        self.app.add_save_listener(self._on_saved)
        log.info("relay %s starts after notification %d", self.tracking_name, self.position)

    async def stop(self) -> None:
        self.app.remove_save_listener(self._on_saved)
        if self._producer is not None and self._factory is not None:
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
        """Publish every stored event after the recorded position; returns records acknowledged.

        Each batch of notifications is mapped and encoded in chunks of ``CHUNK_MESSAGES``
        in the worker thread while the event loop sends the chunks before: the first
        bets of a 10,000-bet settlement are on their way before the last are encoded.
        The position is recorded once every record of the batch is acknowledged (or
        quarantined and its quarantine record acknowledged).
        """
        if self._loop is None:
            raise RuntimeError("relay not started")
        total = 0
        leftover: list[tuple[int, Any]] = []
        while True:
            await self._ensure_producer()
            if leftover:
                events = leftover
            else:
                events, last_id = await asyncio.to_thread(self._read_events, self.position)
                if last_id is None:
                    return total
            done = [self.position]
            try:
                published = await self._publish_batch(events, done)
            except KafkaError:
                self._renew_due = True  # its state may be what failed: start with a new one
                raise
            last_id = done[0]
            leftover = [item for item in events if item[0] > last_id]
            await asyncio.to_thread(self.app.record_position, self.tracking_name, last_id)
            self.position = last_id
            self._report(published)
            total += len(published.acknowledged)
            log.debug(
                "relay %s published %d up to %d",
                self.tracking_name,
                len(published.acknowledged),
                last_id,
            )

    def _report(self, published: _Published) -> None:
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

    async def _publish_batch(
        self, events: Sequence[tuple[int, Any]], done: list[int]
    ) -> _Published:
        """Send the records of ``events`` (markers first); ``done[0]``: the last notification
        of the relay batch (the rest of ``events`` is for the next one)."""
        self._partitions.clear()  # partition counts are read again once per relay batch
        self._chosen.clear()
        published = _Published()
        chunks = self._chunks(events, done)
        others = _Pipeline(self, published)
        try:
            while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
                if chunk.markers:
                    markers = _Pipeline(self, published)
                    try:
                        await markers.add(chunk.markers)
                        await markers.finish()
                    finally:
                        markers.cancel()
                if chunk.others:
                    await others.add(chunk.others)
                if others.error is not None:
                    break
            await others.finish()
        finally:
            others.cancel()
        return published

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

    def _chunks(self, events: Sequence[tuple[int, Any]], done: list[int]) -> Iterator[_Chunk]:
        """The records of ``events`` in chunks; ``done[0]``: the last notification mapped.

        Stops after the notification that brings the batch to ``MAX_MESSAGES_PER_BATCH``
        (the rest next time: keeps one batch's memory and send time bounded), and before
        a notification with markers once a chunk with other records was handed out
        (markers first: that notification opens the next batch). A notification's
        markers are encoded before its other records.
        """
        # message class -> topic, pb-type, logical topic if its records are signed
        kinds: dict[type[Any], tuple[str, bytes, str | None]] = {}
        marker_topic = self._marker_topic
        source = (SOURCE_HEADER, self.settings.service.encode())
        overhead = self._record_overhead
        largest = self.max_record_bytes
        sign = self.signer.sign if self.signer is not None else None
        chunk = _Chunk()
        count = 0
        released = False  # a chunk with other records has been handed out
        for notification_id, event in events:
            if count >= MAX_MESSAGES_PER_BATCH:
                break
            messages = self.mapper(event)
            where = [kinds.get(type(m)) or self._kind(m, kinds) for m in messages]
            order: Sequence[int] = range(len(messages))
            if any(topic == marker_topic for topic, _, _ in where):
                if released:
                    break
                order = sorted(order, key=lambda i: where[i][0] != marker_topic)  # stable
            position = (NOTIFICATION_HEADER, str(notification_id).encode())
            for index in order:
                message = messages[index]
                topic, kind, signed = where[index]
                key = partition_key(message)
                value = encode(message)
                headers = [source, position, (INDEX_HEADER, b"%d" % index), (TYPE_HEADER, kind)]
                size = len(key) + len(value) + overhead
                if signed is not None and sign is not None:
                    signature = sign(signed, key, value, notification_id, index)
                    headers.append((SIGNATURE_HEADER, signature))
                    size += len(signature) + _SIGNATURE_OVERHEAD
                record = OutgoingRecord(
                    notification_id, index, topic, key, value, headers, size, message
                )
                if record.size > largest:
                    record = self._checked(record)
                if topic == marker_topic and record.replaces is None:
                    chunk.markers.append(record)
                else:
                    chunk.others.append(record)
                count += 1
                if len(chunk.markers) + len(chunk.others) >= CHUNK_MESSAGES:
                    released = released or bool(chunk.others)
                    yield chunk
                    chunk = _Chunk()
            done[0] = notification_id
        if chunk.markers or chunk.others:
            yield chunk

    def _kind(
        self, message: Message, kinds: dict[type[Any], tuple[str, bytes, str | None]]
    ) -> tuple[str, bytes, str | None]:
        logical = topic_for(message)
        kind = kinds[type(message)] = (
            self.settings.topic(logical),
            message.type.encode(),
            logical if logical in self.signed_topics else None,
        )
        return kind

    @property
    def _record_overhead(self) -> int:
        """Bytes of a one-record batch besides its key and value, at most (its headers'
        values taken at their largest: 20 digits, a 64-character type)."""
        headers = [
            (SOURCE_HEADER, self.settings.service.encode()),
            (NOTIFICATION_HEADER, b"9" * 20),
            (INDEX_HEADER, b"9" * 20),
            (TYPE_HEADER, b"T" * 64),
        ]
        return int(DefaultRecordBatchBuilder.estimate_size_in_bytes(b"", b"", headers)) + 8

    def _checked(self, record: OutgoingRecord) -> OutgoingRecord:
        """``record`` with its exact size, or its quarantine record when it is too large."""
        record.size = DefaultRecordBatchBuilder.estimate_size_in_bytes(
            record.key, record.value, record.headers
        )
        if record.size <= self.max_record_bytes:
            return record
        return self._quarantine_record(
            record,
            f"{record.size} bytes as a Kafka record, more than the {self.max_record_bytes} "
            "bytes the relay sends",
        )

    def _read_batch(self, after: int) -> tuple[list[OutgoingRecord], int | None]:
        """Every record of the next batch at once (markers first), and its last notification id."""
        events, last_id = self._read_events(after)
        if last_id is None:
            return [], None
        done = [after]
        records = [r for chunk in self._chunks(events, done) for r in chunk.markers + chunk.others]
        return records, done[0]

    # -- quarantine ---------------------------------------------------------------
    def _quarantine_record(self, record: OutgoingRecord, reason: str) -> OutgoingRecord:
        """The MessageQuarantined record (dead-letters topic, same key and position headers)
        that replaces ``record``; logs the alarm."""
        original = record.message
        log.error(
            "relay %s QUARANTINED %s %s (notification %d, message %d, %d bytes) meant for %s: "
            "%s; a MessageQuarantined goes to %s instead and the relay goes on",
            self.tracking_name,
            original.type,
            original.event_id,
            record.notification_id,
            record.index,
            len(record.value),
            record.topic,
            reason,
            self._dead_letter_topic,
        )
        message = MessageQuarantined(
            event_id=uuid5(original.event_id, MessageQuarantined.__name__),  # same every time
            occurred_at=original.occurred_at,
            causation_id=original.event_id,
            correlation_id=original.correlation_id,
            table_id=original.table_id if isinstance(original, TableMessage) else None,
            service=self.settings.service,
            original_topic=record.topic,
            message_type=original.type,
            message_id=original.event_id,
            notification_id=record.notification_id,
            message_index=record.index,
            size=len(record.value),
            sha256=hashlib.sha256(record.value).hexdigest(),
            reason=_bounded(reason),
        )
        value = encode(message)
        headers = [*record.headers[:3], (TYPE_HEADER, message.type.encode())]
        return OutgoingRecord(
            notification_id=record.notification_id,
            index=record.index,
            topic=self._dead_letter_topic,
            key=record.key,
            value=value,
            headers=headers,
            size=DefaultRecordBatchBuilder.estimate_size_in_bytes(record.key, value, headers),
            message=message,
            replaces=record,
        )

    # -- the producer -------------------------------------------------------------
    async def _new_producer(self) -> AIOKafkaProducer:
        if self._factory is None:
            raise RuntimeError("relay has no producer")
        producer = self._factory()
        await producer.start()
        return producer

    async def _ensure_producer(self) -> None:
        if self._producer is None or self._renew_due:
            self._renew_due = False
            await self._renew_producer(self._generation)

    async def _renew_producer(self, generation: int) -> None:
        """Replace the producer (unless replaced since ``generation``): once the other
        partitions' batches in flight are acknowledged, stop it and start a new one."""
        async with self._gate.exclusive():
            if generation != self._generation:
                return
            self._generation += 1
            if self._factory is None:  # a producer passed in (tests): kept as it is
                return
            old, self._producer = self._producer, None
            if old is not None:
                try:
                    await old.stop()  # flushes: the batches still in flight get their answer
                except Exception:
                    log.warning("relay %s: stopping the old producer failed", self.tracking_name)
            self._producer = await self._new_producer()
            log.info("relay %s uses a new producer", self.tracking_name)

    async def _partition_of(self, record: OutgoingRecord) -> int:
        choice = self._chosen.get((record.topic, record.key))
        if choice is None:
            known = self._partitions.get(record.topic)
            if known is None:
                async with self._gate.sending():
                    producer = self._live_producer()
                    known = sorted(await producer.partitions_for(record.topic))
                self._partitions[record.topic] = known
            choice = self._chosen[(record.topic, record.key)] = _PARTITIONER(
                record.key, known, known
            )
        return choice

    def _live_producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise RuntimeError("the relay has no producer (not started, or starting one failed)")
        return self._producer

    async def _deliver(self, part: _Partition, start: int) -> tuple[str | None, int]:
        """Send one record batch of ``part`` from ``start`` and await its acknowledgement.

        Returns (None, end) when ``records[start:end]`` were appended, (why, end) when the
        broker refused them for good (the producer is replaced then); raises on any other
        failure.
        """
        async with self._gate.sending():
            producer = self._live_producer()
            generation = self._generation
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
            log.warning("relay %s: %s: %s", self.tracking_name, part.topic, why)
            await self._renew_producer(generation)
            return why, end
        return None, end

    def _build(self, producer: AIOKafkaProducer, part: _Partition, start: int) -> tuple[Any, int]:
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


@dataclass(slots=True, eq=False)
class _Partition:
    """One topic-partition's records of a relay batch, sent in order by one task."""

    topic: str
    partition: int
    records: list[OutgoingRecord] = field(default_factory=list)
    next: int = 0  # records before it are acknowledged (or quarantined)
    singles_until: int = 0  # records before it go one per batch (after a refused batch)
    more: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class _Pipeline:
    """The partition senders of (part of) a relay batch; ``finish`` awaits them all."""

    def __init__(self, relay: OutboxRelay, published: _Published) -> None:
        self.relay = relay
        self.published = published
        self.partitions: dict[tuple[str, int], _Partition] = {}
        self.closing = False
        self.error: BaseException | None = None

    async def add(self, records: Sequence[OutgoingRecord]) -> None:
        touched: dict[tuple[str, int], _Partition] = {}
        for record in records:
            if record.replaces is not None:
                self.published.quarantined.append(record)
            tp = (record.topic, await self.relay._partition_of(record))
            part = self.partitions.get(tp)
            if part is None:
                part = self.partitions[tp] = _Partition(*tp)
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

    async def _send(self, part: _Partition) -> None:
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
                refusal, end = await self.relay._deliver(part, start)
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
                self.relay.tracking_name,
                original.message.type,
                original.message.event_id,
                refusal,
                original.notification_id,
                original.index,
            )
            return
        replacement = self.relay._quarantine_record(record, refusal)
        await self.add([replacement])


def _bounded(reason: str, limit: int = 2000) -> str:
    """``reason`` cut to the length a MessageQuarantined takes."""
    return reason if len(reason) <= limit else reason[: limit - 3] + "..."
