"""The consumer runtime: Kafka messages in, exactly one effect per message in the store.

Why plain aiokafka and not a FastStream subscriber: the exactly-once effect
depends on (1) handling a whole fetched batch of one partition in ONE store
transaction together with its tracking record, (2) reading each record's
partition, offset and headers to compute that tracking position, (3) keeping
the original bytes for dead letters, and (4) committing Kafka offsets only
after the store commit. aiokafka's ``getmany`` + manual ``commit`` give exactly
that in a few lines; FastStream's subscriber API would hide the batch and
offset control we need. FastStream still describes the topics: see
``services.platform.asyncapi`` (``punto-banco asyncapi``) and contracts' JSON Schemas.

For every fetched batch, per partition, in order:

1. Each record gets a tracking position (``position_of``): messages published
   by a project relay carry ``pb-source`` / ``pb-notification-id`` /
   ``pb-message-index`` headers and are tracked as
   ``"<source>:<topic>:<partition>"`` at ``notification_id * 2**20 + index``;
   other messages (external commands) as
   ``"<cluster id>:<prefixed topic>:<partition>"`` at ``offset + 1`` (the
   cluster id is fetched once at start: a store reused with a new Kafka or a
   new topic prefix does not take the new log's offsets for handled ones; see
   ``tracking.py``). Each ``Delivery`` carries the record's timestamp and its
   type (``LOG_APPEND_TIME``: stamped by the broker). Both increase strictly
   within a partition, as eventsourcing's default SINGLE-ROW tracking requires
   (it refuses a notification id that is not greater than the recorded one for
   the same name; that is why the name holds the partition - and the topic, in
   case one source publishes to two topics the same service reads).
2. Records at or below the recorded position are duplicates (redelivery after a
   crash, or a relay republishing) and are skipped without calling the handler.
3. Records that do not decode (``ContractError``: not JSON, unknown type, wrong
   schema) are published to the dead-letter topic (original bytes base64, the
   error, topic/partition/offset, headers, service) BEFORE the store commit.
4. The valid ones go to the subscription's handler in the service's worker
   thread, as one batch with one ``Tracking`` (the batch's last position); the
   handler records its new events and that tracking record in one transaction.
   A redelivered or republished message therefore has no second effect.
5. If the handler raises, nothing of the batch was recorded; the runtime
   retries message by message and dead-letters the one that fails (error
   ``handler failed: ...``), so one poison message never stops the service.
   Store errors that may pass (OperationalError, InterfaceError) are retried
   with a back-off instead.
6. Kafka offsets are committed after the store commits (a crash in between
   only means redelivery, which step 2 absorbs).

The headers are trusted: only the project's relays should set ``pb-source``
(an external producer faking it with a huge notification id would make the
service skip that source's later messages). Wiping one service's store while
keeping another's and the topics breaks the same assumption (the upstream
notification ids start again at 1): wipe stores and topics together.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import KafkaError
from eventsourcing.persistence import (
    IntegrityError,
    InterfaceError,
    OperationalError,
    Tracking,
)

from contracts import DEAD_LETTERS, ContractError, Message, decode, encode
from services.platform.application import ServiceApplication, UnitOfWork
from services.platform.dead_letters import as_text, dead_letter_for
from services.platform.kafka import SOURCE_HEADER, idempotent_producer
from services.platform.kafka import cluster_id as kafka_cluster_id
from services.platform.logs import message_context
from services.platform.settings import Settings
from services.platform.tracking import MESSAGES_PER_NOTIFICATION, header, position_of
from services.platform.worker import AppWorker

__all__ = [
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "MESSAGES_PER_NOTIFICATION",
    "BatchHandler",
    "ConsumerRuntime",
    "Delivery",
    "Subscription",
    "dead_letter_for",
    "per_message",
    "position_of",
    "with_unit_of_work",
]

log = logging.getLogger(__name__)

CREATE_TIME = 0
"""Kafka record timestamp type: set by the producer (``message.timestamp.type=CreateTime``)."""
LOG_APPEND_TIME = 1
"""Kafka record timestamp type: set by the broker when it appended the record."""

_TRANSIENT = (OperationalError, InterfaceError)
_MAX_INTEGRITY_RETRIES = 3


@dataclass(frozen=True, slots=True)
class Delivery:
    """One decoded message and where it came from."""

    message: Message
    topic: str  # logical topic (without prefix)
    partition: int
    offset: int
    key: str | None
    source: str | None  # pb-source header, None for external producers
    tracking: Tracking  # this message's own tracking position
    timestamp: int | None = None  # the record's timestamp, ms since the epoch
    timestamp_type: int | None = None  # CREATE_TIME (the producer's) or LOG_APPEND_TIME

    @property
    def appended_at(self) -> datetime | None:
        """When the broker appended the record (LogAppendTime topics only), else None.

        A CreateTime timestamp is set by the producer, so it is not offered here.
        """
        if self.timestamp_type != LOG_APPEND_TIME or self.timestamp is None or self.timestamp < 0:
            return None
        return datetime.fromtimestamp(self.timestamp / 1000, UTC)


BatchHandler = Callable[[Sequence[Delivery], Tracking], None]
"""Handle deliveries (one partition, in order) and record their effects together with
``tracking`` in ONE transaction. Runs in the service's worker thread."""


@dataclass(frozen=True, slots=True)
class Subscription:
    topic: str  # logical topic, e.g. contracts.SHOE_COMMANDS
    handler: BatchHandler


def per_message(handle: Callable[[Message, Tracking], None]) -> BatchHandler:
    """Adapt ``handle(message, tracking)`` (one transaction per message) to a batch handler."""

    def handler(deliveries: Sequence[Delivery], tracking: Tracking) -> None:
        for delivery in deliveries:
            with message_context(delivery.message):  # log records carry the message's ids
                handle(delivery.message, delivery.tracking)

    return handler


def with_unit_of_work(
    app: ServiceApplication, handle: Callable[[UnitOfWork, Delivery], None]
) -> BatchHandler:
    """Adapt ``handle(uow, delivery)`` to a batch handler: ONE unit of work per batch.

    ``handle`` reads aggregates with ``uow.get`` and adds new or changed ones with
    ``uow.add``; the unit records all their events and the batch's tracking record
    in one transaction.
    """

    def handler(deliveries: Sequence[Delivery], tracking: Tracking) -> None:
        with app.unit_of_work(tracking) as uow:
            for delivery in deliveries:
                with message_context(delivery.message):  # log records carry the message's ids
                    handle(uow, delivery)

    return handler


@dataclass
class _Invalid:
    record: ConsumerRecord[Any, Any]
    error: str


@dataclass
class _Prepared:
    fresh: list[Delivery] = field(default_factory=list)
    invalid: list[_Invalid] = field(default_factory=list)
    raw: dict[int, ConsumerRecord[Any, Any]] = field(default_factory=dict)  # by offset
    duplicates: int = 0
    last: Tracking | None = None


@dataclass
class ConsumerStats:
    handled: int = 0
    duplicates: int = 0
    dead_letters: int = 0
    batches: int = 0


class _Assignment(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, ready: asyncio.Event) -> None:
        self.ready = ready

    async def on_partitions_revoked(self, revoked: Any) -> None:
        return None

    async def on_partitions_assigned(self, assigned: Any) -> None:
        if assigned:
            self.ready.set()


class ConsumerRuntime:
    """Consume the subscribed topics for one service and apply its handlers exactly once."""

    def __init__(
        self,
        app: ServiceApplication,
        settings: Settings,
        subscriptions: Sequence[Subscription],
        worker: AppWorker,
        *,
        producer: AIOKafkaProducer | None = None,
        cluster_id: str | None = None,
    ) -> None:
        if not subscriptions:
            raise ValueError("a consumer needs at least one subscription")
        self.app = app
        self.settings = settings
        self.worker = worker
        self.subscriptions = {s.topic: s for s in subscriptions}
        if len(self.subscriptions) != len(subscriptions):
            raise ValueError("one subscription per topic")
        self._producer = producer
        self._own_producer = producer is None
        # The Kafka cluster's id, part of offset-based tracking names (tracking.py);
        # fetched once by start() unless given.
        self.cluster_id = cluster_id
        self._consumer: AIOKafkaConsumer | None = None
        self.ready = asyncio.Event()
        self.stats = ConsumerStats()
        # Operations hooks (metrics.py): deliveries handled; offsets handled and committed.
        self.on_delivered: Callable[[Sequence[Delivery]], None] | None = None
        self.handled_offsets: dict[TopicPartition, int] = {}

    async def start(self) -> None:
        if self.cluster_id is None:
            self.cluster_id = await kafka_cluster_id(self.settings)
        if self._producer is None:
            self._producer = idempotent_producer(self.settings, "dead-letters")
        if self._own_producer:
            await self._producer.start()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.settings.kafka_bootstrap_servers,
            group_id=self.settings.consumer_group,
            client_id=f"pb-{self.settings.service}-consumer",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=8 * 1024 * 1024,
            fetch_max_wait_ms=100,
        )
        consumer.subscribe(
            topics=[self.settings.topic(t) for t in self.subscriptions],
            listener=_Assignment(self.ready),
        )
        await consumer.start()
        self._consumer = consumer

    async def stop(self) -> None:
        consumer, self._consumer = self._consumer, None
        producer, self._producer = self._producer, None
        try:
            if consumer is not None:
                await consumer.stop()
        finally:
            if producer is not None and self._own_producer:
                await producer.stop()

    async def run(self, stopping: asyncio.Event) -> None:
        consumer = self._consumer
        if consumer is None:
            raise RuntimeError("consumer not started")
        timeout_ms = int(self.settings.consumer_poll_timeout * 1000)
        delay = 0.5
        while not stopping.is_set():
            fetched = await consumer.getmany(
                timeout_ms=timeout_ms, max_records=self.settings.consumer_max_records
            )
            if not fetched:
                continue
            try:
                await self.process(fetched, stopping)
                delay = 0.5
            except Exception:
                # e.g. the dead-letter topic cannot be written: nothing is lost, the store's
                # tracking records make re-reading from the committed offsets safe.
                log.exception("consumer batch failed; re-reading it in %.1fs", delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
                await self._rewind(list(fetched))

    async def _rewind(self, partitions: Sequence[TopicPartition]) -> None:
        """Seek back to the last committed offsets (the beginning when none)."""
        consumer = self._consumer
        if consumer is None:
            return
        assigned = consumer.assignment()
        for tp in partitions:
            if tp not in assigned:
                continue  # taken over by another member, which starts from the commit
            committed = await consumer.committed(tp)
            if committed is None:
                await consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, committed)

    async def process(
        self,
        fetched: dict[TopicPartition, list[ConsumerRecord[Any, Any]]],
        stopping: asyncio.Event,
    ) -> None:
        """Handle one ``getmany`` result and commit its offsets."""
        offsets: dict[TopicPartition, int] = {}
        # Subscription order, whatever order the fetch has: settlement lists dealing's
        # events first, so a coup's BettingOpened is applied before the bets fetched with
        # it (which would otherwise wait at the desk for it).
        order = {self.settings.topic(topic): rank for rank, topic in enumerate(self.subscriptions)}
        for tp, records in sorted(fetched.items(), key=lambda item: order.get(item[0].topic, 0)):
            if not records:
                continue
            logical = self.settings.logical_topic(tp.topic)
            subscription = self.subscriptions[logical]
            position = functools.partial(self._position, logical)
            for group in _groups([(record, position(record)) for record in records]):
                done = await self._process_group(
                    subscription, logical, tp.partition, group, stopping
                )
                if not done:
                    break  # stopping while retrying: leave the rest for the next run
            else:
                offsets[tp] = records[-1].offset + 1
                continue
            break
        self.stats.batches += 1
        self.handled_offsets.update(offsets)  # operations hook (consumer lag)
        if offsets and self._consumer is not None:
            try:
                await self._consumer.commit(offsets)
            except KafkaError as error:  # e.g. a rebalance: the store's tracking covers it
                log.warning("offset commit failed (%s); messages may be redelivered", error)

    async def _process_group(
        self,
        subscription: Subscription,
        logical: str,
        partition: int,
        records: list[tuple[ConsumerRecord[Any, Any], Tracking]],
        stopping: asyncio.Event,
    ) -> bool:
        delay = 0.1
        integrity_failures = 0
        while True:
            try:
                prepared = await self.worker.call(self._prepare, logical, partition, records)
                self.stats.duplicates += prepared.duplicates
                if prepared.last is None:
                    return True
                if prepared.invalid:
                    await self._dead_letter([(i.record, i.error) for i in prepared.invalid])
                if not prepared.fresh:
                    await self.worker.call(
                        self._advance,
                        prepared.last.application_name,
                        prepared.last.notification_id,
                    )
                    return True
                handler_started = time.perf_counter()
                try:
                    await self.worker.call(subscription.handler, prepared.fresh, prepared.last)
                except _TRANSIENT:
                    raise
                except IntegrityError:
                    integrity_failures += 1
                    if integrity_failures < _MAX_INTEGRITY_RETRIES:
                        raise
                    await self._one_by_one(subscription, prepared)
                except Exception:
                    log.exception(
                        "handler for %s:%d failed on a batch of %d; retrying one by one",
                        logical,
                        partition,
                        len(prepared.fresh),
                    )
                    await self._one_by_one(subscription, prepared)
                self.stats.handled += len(prepared.fresh)
                if self.on_delivered is not None:  # operations hook (metrics)
                    self.on_delivered(prepared.fresh)
                log.debug(
                    "%s:%d handled %d messages in %.3fs",
                    logical,
                    partition,
                    len(prepared.fresh),
                    time.perf_counter() - handler_started,
                )
                return True
            except (*_TRANSIENT, IntegrityError) as error:
                if stopping.is_set():
                    return False
                log.warning(
                    "store error on %s:%d (%s); retrying in %.1fs", logical, partition, error, delay
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _one_by_one(self, subscription: Subscription, prepared: _Prepared) -> None:
        if not prepared.fresh or prepared.last is None:
            return
        name = prepared.last.application_name
        # A per-message handler may have committed the first messages before failing.
        recorded = await self.worker.call(self.app.tracked_position, name)
        for delivery in prepared.fresh:
            position = delivery.tracking.notification_id
            if position <= recorded:
                continue
            try:
                await self.worker.call(subscription.handler, [delivery], delivery.tracking)
            except _TRANSIENT:
                raise
            except Exception as error:
                log.exception("handler failed on %s; dead-lettering it", _where(delivery))
                await self._dead_letter(
                    [(prepared.raw[delivery.offset], f"handler failed: {error!r}")]
                )
                await self.worker.call(self._advance, name, position)
            recorded = position
        if prepared.last.notification_id > recorded:
            await self.worker.call(self._advance, name, prepared.last.notification_id)

    async def lag(self) -> dict[tuple[str, int], int]:
        """Operations: per (logical topic, partition) assigned, messages not yet handled."""
        consumer = self._consumer
        if consumer is None:
            return {}
        assigned = list(consumer.assignment())
        if not assigned:
            return {}
        ends = await consumer.end_offsets(assigned)
        lag: dict[tuple[str, int], int] = {}
        for tp in assigned:
            done = self.handled_offsets.get(tp)
            if done is None:
                done = await consumer.committed(tp) or 0
            logical = self.settings.logical_topic(tp.topic)
            lag[(logical, tp.partition)] = max(0, ends.get(tp, 0) - done)
        return lag

    def _advance(self, name: str, position: int) -> None:
        """Record ``position`` for ``name`` unless it is recorded already."""
        if self.app.tracked_position(name) < position:
            self.app.record_position(name, position)

    def _position(self, logical: str, record: ConsumerRecord[Any, Any]) -> Tracking:
        """The record's tracking position (tracking.py): offsets named by cluster and topic."""
        return position_of(
            logical,
            record.partition,
            record.offset,
            record.headers,
            topic=record.topic,
            cluster_id=self.cluster_id,
        )

    def _prepare(
        self,
        logical: str,
        partition: int,
        records: list[tuple[ConsumerRecord[Any, Any], Tracking]],
    ) -> _Prepared:
        """Drop duplicates, decode the rest (the invalid ones go to dead letters)."""
        prepared = _Prepared()
        recorded = self.app.tracked_position(records[0][1].application_name)
        for record, tracking in records:
            if tracking.notification_id <= recorded:
                prepared.duplicates += 1
                continue
            recorded = tracking.notification_id
            prepared.last = tracking
            if record.value is None:
                prepared.invalid.append(_Invalid(record, "empty message (no value)"))
                continue
            try:
                message = decode(logical, record.value)
            except ContractError as error:
                prepared.invalid.append(_Invalid(record, error.reason))
                continue
            prepared.raw[record.offset] = record
            prepared.fresh.append(
                Delivery(
                    message=message,
                    topic=logical,
                    partition=partition,
                    offset=record.offset,
                    key=as_text(record.key),
                    source=header(record.headers, SOURCE_HEADER),
                    tracking=tracking,
                    timestamp=record.timestamp,
                    timestamp_type=record.timestamp_type,
                )
            )
        return prepared

    async def _dead_letter(self, items: Sequence[tuple[ConsumerRecord[Any, Any], str]]) -> None:
        producer = self._producer
        if producer is None:
            raise RuntimeError("consumer not started")
        futures = []
        for record, error in items:
            letter = dead_letter_for(record, error, self.settings.service)
            log.warning(
                "dead letter: %s:%d@%d: %s",
                record.topic,
                record.partition,
                record.offset,
                error,
                extra={"table_id": as_text(record.key)},  # structured logs (logs.py)
            )
            futures.append(
                await producer.send(
                    self.settings.topic(DEAD_LETTERS),
                    value=encode(letter),
                    key=record.key if isinstance(record.key, bytes) else None,
                )
            )
        await asyncio.gather(*futures)
        self.stats.dead_letters += len(items)


def _where(delivery: Delivery) -> str:
    table = getattr(delivery.message, "table_id", "?")
    return (
        f"{type(delivery.message).__name__} table {table} "
        f"({delivery.topic}:{delivery.partition}@{delivery.offset})"
    )


def _groups(
    positioned: list[tuple[ConsumerRecord[Any, Any], Tracking]],
) -> list[list[tuple[ConsumerRecord[Any, Any], Tracking]]]:
    """Split a partition's records (with their positions) into runs that share a tracking name."""
    groups: list[list[tuple[ConsumerRecord[Any, Any], Tracking]]] = []
    current_name: str | None = None
    for item in positioned:
        name = item[1].application_name
        if name != current_name:
            groups.append([])
            current_name = name
        groups[-1].append(item)
    return groups
