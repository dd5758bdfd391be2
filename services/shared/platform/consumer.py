"""The consumer runtime: Kafka messages in, exactly one effect per message in the store.

Why plain aiokafka and not a FastStream subscriber: the exactly-once effect
depends on (1) handling a whole fetched batch of one partition in ONE store
transaction together with its tracking record, (2) reading each record's
partition, offset and headers to compute that tracking position, (3) keeping
the original bytes for dead letters, and (4) committing Kafka offsets only
after the store commit. aiokafka's ``getmany`` + manual ``commit`` give exactly
that in a few lines; FastStream's subscriber API would hide the batch and
offset control we need. FastStream still describes the topics: see
``services.shared.platform.asyncapi`` (``punto-banco asyncapi``) and contracts' JSON Schemas.

For every fetched batch, per partition, in order:

1. Each record gets a tracking position (``tracking.py``). On a topic with an owner
   (``contracts.TOPIC_OWNERS``) it comes from the owner's relay headers, checked
   strictly; a record whose headers are missing, repeated, malformed, out of range or
   from another source is REFUSED (a dead letter, never a position). On the other
   topics the ``pb-*`` headers are ignored and records are tracked by offset, under a
   name holding the cluster id, the real topic name and the topic's Kafka topic id
   (``partition_names.py``, ``topic_ids.py``: read at start and again after each
   assignment, or when a partition's offsets go back): a store reused with a new Kafka,
   a new topic prefix or a topic deleted and created again does not take the new log's
   offsets for handled ones. A store written before topic ids keeps its positions.
   Then the writer's signature (``pb-sig``, ``signing.py``), before anything is tracked or
   handled: on an owned topic every record must be signed by a key of the topic's owner
   (the keyring), for its own topic, key and relay position; elsewhere a message that only a
   service may send (``contracts.MESSAGE_SOURCES``: dealing's ``OpenBook`` / ``CloseBook``
   on bet-commands, which gateways also write) must be signed by that service, for the
   position its relay headers give. A record that fails is a dead letter
   (``signature: ...``), never a position; commands from outside need no signature.
2. Records at or below the recorded position are duplicates (redelivery after a
   crash, or a relay republishing) and are skipped without calling the handler.
3. Records that are refused or do not decode (``ContractError``) are published to the
   dead-letter topic (``dead_letters.py``: bounded, whatever the record holds) BEFORE
   the store commit.
4. The valid ones go to the subscription's handler in the service's worker
   thread, as one batch with one ``Tracking`` (the batch's last position); the
   handler records its new events and that tracking record in one transaction.
   A redelivered or republished message therefore has no second effect.
5. If the handler raises, nothing of the batch was recorded; the runtime retries
   message by message. A message nothing vouches for (an outside type such as a PlaceBet
   or a table command, or anything no service's signature came with:
   ``Delivery.external``) that fails is dead-lettered (error ``handler failed: ...``) and
   the partition goes on: a forged record must not stop a partition. An internal message
   (signed by its sender: on its owner's topic, or a mark) that fails STOPS its partition
   (``stops.py``): no dead letter, nothing recorded past it, the partition paused while the
   others go on, an ERROR log, the gauge ``pb_partition_stopped`` and ``/ready`` answering
   503; the same record is tried
   again with a back-off (at most 30 s apart) until it is taken, then the partition
   resumes. Store errors that may pass (OperationalError, InterfaceError) are retried
   with a back-off instead.
6. Kafka offsets are committed after the store commits (a crash in between
   only means redelivery, which step 2 absorbs); a stopped partition's offset stays at
   its failing record, so a restart tries it again.

Refused records have no position, so a redelivery (after a crash, or a new consumer
group) dead-letters them again. Wiping one service's store while keeping another's and
the topics breaks the relayed positions (the upstream notification ids start again at
1): wipe stores and topics together.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
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

from contracts import EXTERNAL, MESSAGE_SOURCES, TOPIC_OWNERS, ContractError, Message, decode
from services.shared.platform.application import ServiceApplication
from services.shared.platform.dead_letters import DeadLetterSender, as_text, dead_letter_for
from services.shared.platform.deliveries import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    BatchHandler,
    Delivery,
    Subscription,
    per_message,
    with_unit_of_work,
)
from services.shared.platform.kafka import SIGNATURE_HEADER, idempotent_producer
from services.shared.platform.keys import load_keyring
from services.shared.platform.partition_names import PartitionNames, TopicIdFetcher
from services.shared.platform.settings import Settings
from services.shared.platform.signing import Keyring, verify
from services.shared.platform.stops import PartitionStops
from services.shared.platform.topic_ids import TopicIdReader
from services.shared.platform.tracking import (
    MESSAGES_PER_NOTIFICATION,
    Headers,
    UntrustedHeaders,
    position_of,
    relayed_position,
)
from services.shared.platform.worker import AppWorker

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

_TRANSIENT = (OperationalError, InterfaceError)
_MAX_INTEGRITY_RETRIES = 3

METADATA_MAX_AGE_MS = 15_000
"""How often the consumer refreshes topic metadata: a topic deleted and created again is
assigned again within about this long."""

Position = int | UntrustedHeaders
"""A record's tracking position, or why its headers are refused."""


@dataclass
class _Invalid:
    record: ConsumerRecord[Any, Any]
    error: str


@dataclass
class _Prepared:
    name: str
    fresh: list[Delivery] = field(default_factory=list)
    invalid: list[_Invalid] = field(default_factory=list)
    raw: dict[int, ConsumerRecord[Any, Any]] = field(default_factory=dict)  # by offset
    duplicates: int = 0
    last: int | None = None  # the last fresh position (valid or not)


@dataclass
class ConsumerStats:
    handled: int = 0
    duplicates: int = 0
    dead_letters: int = 0
    batches: int = 0
    stops: int = 0  # handler failures on internal messages (each try counts)


class _Stop(Exception):
    """A handler failed on an internal message: its partition stops there."""

    def __init__(self, delivery: Delivery, error: Exception) -> None:
        super().__init__(f"handler failed: {error!r}")
        self.delivery = delivery
        self.error = error


class _Assignment(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, runtime: ConsumerRuntime) -> None:
        self.runtime = runtime

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self.runtime._forget(revoked)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.runtime._forget(assigned)  # topic ids are read again: a topic may be new
        if assigned:
            self.runtime.ready.set()


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
        topic_ids: TopicIdFetcher | None = None,
        keyring: Keyring | None = None,
    ) -> None:
        if not subscriptions:
            raise ValueError("a consumer needs at least one subscription")
        self.app = app
        self.settings = settings
        # Who may write what (signing.py): every service's public keys; settings' file if None.
        self.keyring = keyring if keyring is not None else load_keyring(settings)
        self.worker = worker
        self.subscriptions = {s.topic: s for s in subscriptions}
        if len(self.subscriptions) != len(subscriptions):
            raise ValueError("one subscription per topic")
        self._producer = producer
        self._own_producer = producer is None
        # Tracking names (partition_names.py): the Kafka cluster's id and the topics' ids,
        # read by start() unless given.
        self.names = PartitionNames(app, worker, cluster_id, topic_ids)
        self._reader: TopicIdReader | None = None
        self.dead_letters = DeadLetterSender(settings)
        self._consumer: AIOKafkaConsumer | None = None
        self.ready = asyncio.Event()
        self.stats = ConsumerStats()
        # Partitions stopped on an internal message (stops.py); read by /ready and metrics.
        self.stops = PartitionStops()
        # Operations hooks (metrics.py): deliveries handled; offsets handled and committed.
        self.on_delivered: Callable[[Sequence[Delivery]], None] | None = None
        self.handled_offsets: dict[TopicPartition, int] = {}

    @property
    def cluster_id(self) -> str | None:
        """The Kafka cluster's id (part of offset-based tracking names)."""
        return self.names.cluster_id

    async def start(self) -> None:
        names = self.names
        if names.fetch is None or names.cluster_id is None:
            self._reader = TopicIdReader(self.settings)
            await self._reader.start()
            topics = [self.settings.topic(t) for t in self.subscriptions]
            described = await self._reader.describe(topics)  # fails early on an old Kafka
            if names.cluster_id is None:
                if not described.cluster_id:
                    raise RuntimeError(
                        f"Kafka at {self.settings.kafka_bootstrap_servers} reports no cluster id"
                    )
                names.cluster_id = described.cluster_id
            if names.fetch is None:
                names.fetch = self._reader.topic_ids
                names.topic_ids.update(described.topic_ids)
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
            metadata_max_age_ms=METADATA_MAX_AGE_MS,
        )
        consumer.subscribe(
            topics=[self.settings.topic(t) for t in self.subscriptions],
            listener=_Assignment(self),
        )
        await consumer.start()
        self._consumer = consumer

    async def stop(self) -> None:
        consumer, self._consumer = self._consumer, None
        producer, self._producer = self._producer, None
        reader, self._reader = self._reader, None
        try:
            if consumer is not None:
                await consumer.stop()
        finally:
            try:
                if producer is not None and self._own_producer:
                    await producer.stop()
            finally:
                if reader is not None:
                    await reader.close()

    async def run(self, stopping: asyncio.Event) -> None:
        consumer = self._consumer
        if consumer is None:
            raise RuntimeError("consumer not started")
        timeout_ms = int(self.settings.consumer_poll_timeout * 1000)
        delay = 0.5
        while not stopping.is_set():
            self._resume_due()
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
            self.names.rewound(tp)
            if tp not in assigned or self.stops.waiting(tp):
                continue  # taken over by another member / sought to its stopped record
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
            if not records or self.stops.waiting(tp):
                continue  # a stopped partition's records wait for its next try
            logical = self.settings.logical_topic(tp.topic)
            subscription = self.subscriptions[logical]
            name = await self.names.name(
                tp, logical, records[0].offset, functools.partial(self._end_offset, tp, records)
            )
            positioned = [(record, self._position(logical, record)) for record in records]
            try:
                done = await self._process_group(
                    subscription, logical, tp.partition, name, positioned, stopping
                )
            except _Stop as stop:
                offsets[tp] = stop.delivery.offset  # all before it is handled
                self._stop(tp, stop)
                continue
            if not done:
                break  # stopping while retrying: leave the rest for the next run
            offsets[tp] = records[-1].offset + 1
            self.names.handled_to(tp, records[-1].offset + 1)
            self.dead_letters.done(tp)
            self._resumed(tp)
        self.stats.batches += 1
        self.handled_offsets.update(offsets)  # operations hook (consumer lag)
        if offsets and self._consumer is not None:
            try:
                await self._consumer.commit(offsets)
            except KafkaError as error:  # e.g. a rebalance: the store's tracking covers it
                log.warning("offset commit failed (%s); messages may be redelivered", error)

    # ---- positions -----------------------------------------------------------------------

    async def _end_offset(
        self, tp: TopicPartition, records: Sequence[ConsumerRecord[Any, Any]]
    ) -> int:
        consumer = self._consumer
        known = consumer.highwater(tp) if consumer is not None else None
        if known is None and consumer is not None:
            known = (await consumer.end_offsets([tp])).get(tp)
        return max(int(known or 0), int(records[-1].offset) + 1)

    def _position(self, logical: str, record: ConsumerRecord[Any, Any]) -> Position:
        """The record's tracking position (tracking.py), or why it is refused."""
        owner = TOPIC_OWNERS.get(logical)
        if owner is None:
            return int(record.offset) + 1
        try:
            return relayed_position(record.headers, owner)
        except UntrustedHeaders as refused:
            return refused

    def _forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Assignment changed: read the topics' ids again; stops of those partitions end."""
        partitions = list(partitions)
        self.names.forget(partitions)
        for tp in partitions:
            self.dead_letters.done(tp)
            if self.stops.clear(tp) is not None:
                log.warning("%s:%d is no longer stopped here (reassigned)", tp.topic, tp.partition)

    # ---- handling ------------------------------------------------------------------------

    async def _process_group(
        self,
        subscription: Subscription,
        logical: str,
        partition: int,
        name: str,
        records: list[tuple[ConsumerRecord[Any, Any], Position]],
        stopping: asyncio.Event,
    ) -> bool:
        delay = 0.1
        integrity_failures = 0
        while True:
            try:
                prepared = await self.worker.call(self._prepare, logical, partition, name, records)
                self.stats.duplicates += prepared.duplicates
                if prepared.invalid:
                    await self._dead_letter([(i.record, i.error) for i in prepared.invalid])
                if prepared.last is None:
                    return True
                if not prepared.fresh:
                    await self.worker.call(self._advance, name, prepared.last)
                    return True
                handler_started = time.perf_counter()
                try:
                    await self.worker.call(
                        subscription.handler, prepared.fresh, Tracking(name, prepared.last)
                    )
                except _TRANSIENT:
                    raise
                except IntegrityError:
                    integrity_failures += 1
                    if integrity_failures < _MAX_INTEGRITY_RETRIES:
                        raise
                    await self._one_by_one(subscription, prepared)
                except Exception as failure:
                    if len(prepared.fresh) > 1:
                        log.exception(
                            "handler for %s:%d failed on a batch of %d; retrying one by one",
                            logical,
                            partition,
                            len(prepared.fresh),
                        )
                    await self._one_by_one(subscription, prepared, failure)
                else:
                    self._delivered(prepared.fresh)
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

    async def _one_by_one(
        self, subscription: Subscription, prepared: _Prepared, failure: Exception | None = None
    ) -> None:
        """Handle the fresh deliveries one at a time; ``failure``: why the batch failed."""
        if not prepared.fresh or prepared.last is None:
            return
        name = prepared.name
        # A batch of one failed already: calling its handler again would only repeat that.
        alone = failure if len(prepared.fresh) == 1 else None
        # A per-message handler may have committed the first messages before failing.
        recorded = await self.worker.call(self.app.tracked_position, name)
        handled: list[Delivery] = []
        for delivery in prepared.fresh:
            position = delivery.tracking.notification_id
            if position <= recorded:
                continue
            error = alone
            if error is None:
                try:
                    await self.worker.call(subscription.handler, [delivery], delivery.tracking)
                except _TRANSIENT:
                    self._delivered(handled)
                    raise
                except Exception as failed:
                    error = failed
            if error is None:
                handled.append(delivery)
            elif not delivery.external:
                self._delivered(handled)
                raise _Stop(delivery, error) from error
            else:
                log.error(
                    "handler failed on %s; dead-lettering it",
                    delivery.where(),
                    exc_info=error,
                )
                await self._dead_letter(
                    [(prepared.raw[delivery.offset], f"handler failed: {error!r}")]
                )
                await self.worker.call(self._advance, name, position)
            recorded = position
        self._delivered(handled)
        if prepared.last > recorded:
            await self.worker.call(self._advance, name, prepared.last)

    def _delivered(self, deliveries: Sequence[Delivery]) -> None:
        self.stats.handled += len(deliveries)
        if deliveries and self.on_delivered is not None:  # operations hook (metrics)
            self.on_delivered(deliveries)

    # ---- stopped partitions (stops.py) ---------------------------------------------------

    def _stop(self, tp: TopicPartition, stop: _Stop) -> None:
        """Pause ``tp`` at the failing record; it is fetched again when its retry is due."""
        delivery = stop.delivery
        self.stats.stops += 1
        first = tp not in self.stops
        stopped = self.stops.stop(
            tp,
            delivery.topic,
            delivery.offset,
            type(delivery.message).__name__,
            delivery.table_id,
            f"handler failed: {stop.error!r}"[:500],
        )
        self.names.handled_to(tp, delivery.offset)
        consumer = self._consumer
        if consumer is not None and tp in consumer.assignment():
            consumer.pause(tp)
            consumer.seek(tp, delivery.offset)
        log.error(
            "STOPPED %s:%d at offset %d: the handler failed on %s (table %s), a message "
            "published by a service, which is never skipped: nothing past it is recorded, "
            "the other partitions go on; try %d failed, next in %.0f s: %r",
            delivery.topic,
            delivery.partition,
            delivery.offset,
            type(delivery.message).__name__,
            delivery.table_id or "?",
            stopped.attempts,
            stopped.delay,
            stop.error,
            exc_info=stop.error if first else None,
            extra={"table_id": delivery.table_id},  # structured logs (logs.py)
        )

    def _resume_due(self) -> None:
        """Resume the stopped partitions whose next try is due."""
        consumer = self._consumer
        if consumer is None:
            return
        assigned = consumer.assignment()
        for tp in self.stops.due():
            stopped = self.stops.get(tp)
            if stopped is None:
                continue
            if tp not in assigned:
                self.stops.clear(tp)
                continue
            stopped.retrying = True
            consumer.resume(tp)

    def _resumed(self, tp: TopicPartition) -> None:
        stopped = self.stops.clear(tp)
        if stopped is not None:
            log.warning(
                "%s:%d resumed: the record at offset %d (%s) was handled after %d failed tries",
                stopped.topic,
                stopped.partition,
                stopped.offset,
                stopped.message_type,
                stopped.attempts,
            )

    # ---- operations ----------------------------------------------------------------------

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

    # ---- store and dead letters ----------------------------------------------------------

    def _advance(self, name: str, position: int) -> None:
        """Record ``position`` for ``name`` unless it is recorded already."""
        if self.app.tracked_position(name) < position:
            self.app.record_position(name, position)

    def _prepare(
        self,
        logical: str,
        partition: int,
        name: str,
        records: list[tuple[ConsumerRecord[Any, Any], Position]],
    ) -> _Prepared:
        """Drop duplicates, decode the rest (the refused and invalid ones go to dead letters)."""
        prepared = _Prepared(name)
        recorded = self.app.tracked_position(name)
        owner = TOPIC_OWNERS.get(logical)
        for record, position in records:
            if isinstance(position, UntrustedHeaders):
                prepared.invalid.append(_Invalid(record, f"untrusted headers: {position.reason}"))
                continue
            if owner is not None:
                refused = self._signature(owner, logical, record, position)
                if refused is not None:
                    prepared.invalid.append(_Invalid(record, f"signature: {refused}"))
                    continue
            if position <= recorded:
                prepared.duplicates += 1
                continue
            recorded = position
            prepared.last = position
            if record.value is None:
                prepared.invalid.append(_Invalid(record, "empty message (no value)"))
                continue
            try:
                message = decode(logical, record.value)
            except ContractError as error:
                prepared.invalid.append(_Invalid(record, error.reason))
                continue
            source = owner or self._sender(message)
            if owner is None and source is not None:  # a service's message on a shared topic
                refused = self._signature(source, logical, record, None)
                if refused is not None:
                    prepared.invalid.append(_Invalid(record, f"signature: {refused}"))
                    continue
            prepared.raw[record.offset] = record
            prepared.fresh.append(
                Delivery(
                    message=message,
                    topic=logical,
                    partition=partition,
                    offset=record.offset,
                    key=as_text(record.key),
                    source=source,
                    tracking=Tracking(name, position),
                    timestamp=record.timestamp,
                    timestamp_type=record.timestamp_type,
                )
            )
        return prepared

    @staticmethod
    def _sender(message: Message) -> str | None:
        """The one service that may send ``message``; None for a message from outside."""
        sender = MESSAGE_SOURCES.get(type(message).__name__)
        return None if sender is None or sender == EXTERNAL else sender

    def _signature(
        self,
        signer: str,
        logical: str,
        record: ConsumerRecord[Any, Any],
        position: int | None,
    ) -> str | None:
        """Why ``record`` is not ``signer``'s (signing.verify), or None when it is.

        ``position``: the record's relay position, read from its headers when None.
        """
        if position is None:
            try:
                position = relayed_position(record.headers, signer)
            except UntrustedHeaders as refused:
                return f"its relay position cannot be read: {refused.reason}"
        header = _only(record.headers, SIGNATURE_HEADER)
        if isinstance(header, _Repeated):
            return f"header {SIGNATURE_HEADER} appears more than once"
        notification_id, index = divmod(position, MESSAGES_PER_NOTIFICATION)
        return verify(
            self.keyring,
            signer,
            logical,
            record.key,
            record.value,
            notification_id,
            index,
            header,
        )

    async def _dead_letter(self, items: Sequence[tuple[ConsumerRecord[Any, Any], str]]) -> None:
        if self._producer is None:
            raise RuntimeError("consumer not started")
        self.stats.dead_letters += await self.dead_letters.send(self._producer, items)


class _Repeated:
    """A header found more than once."""


def _only(headers: Headers, name: str) -> bytes | _Repeated | None:
    """The value of the header ``name`` (None when absent or null), or _Repeated."""
    found: list[bytes | None] = [value for key, value in headers or () if key == name]
    if len(found) > 1:
        return _Repeated()
    return found[0] if found else None
