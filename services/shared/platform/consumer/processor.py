"""The batch processor: the records of one fetch in, exactly one effect per message in the store.

For each partition of a fetch, in subscription order: its records are sorted out
(``intake.py``), refused ones dead-lettered BEFORE the store commit, the fresh ones handed to
the subscription's handler as ONE batch with ONE tracking record (one transaction), and the
offsets committed after the store commit (a crash in between is only a redelivery): when the
consumer is idle, else about every :data:`COMMIT_INTERVAL`. A batch
that fails is tried one message at a time: a message from outside that fails is a dead
letter, a service's message STOPS its partition there (``stops.py``) until it passes. Store
errors that may pass are retried. :meth:`BatchProcessor.consume` never raises: a failed fetch
is read again from its first records after a back-off.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import KafkaError
from eventsourcing.persistence import IntegrityError, InterfaceError, OperationalError, Tracking

from services.shared.platform.consumer.dead_letters import DeadLetterSender
from services.shared.platform.consumer.deliveries import Delivery, Subscription
from services.shared.platform.consumer.intake import (
    Intake,
    PartitionNames,
    RecordIntake,
    TopicIdFetcher,
)
from services.shared.platform.consumer.stops import PartitionStops
from services.shared.platform.consumer.topic_ids import TopicIdReader
from services.shared.platform.kafka import idempotent_producer
from services.shared.platform.security.keys import load_keyring
from services.shared.platform.security.signing import Keyring, Where
from services.shared.platform.settings import Settings
from services.shared.platform.store.application import AppWorker, ServiceApplication

log = logging.getLogger(__name__)

TRANSIENT = (OperationalError, InterfaceError)
"""Store errors that may pass: retried with a back-off."""
MAX_INTEGRITY_RETRIES = 3
"""A batch failing on IntegrityError this many times is applied one message at a time."""
COMMIT_INTERVAL = 1.0
"""While records keep coming, the offsets are committed after the first fetch handled this many
seconds or more after the last commit; a fetch that brings nothing commits at once
(:meth:`BatchProcessor.commit_pending`), and so do a stopped partition, a revoke and a stopping
service. A commit costs about 1 ms of CPU, a third in the client and the rest in the broker
(BENCHMARKS.md, "Offsets committed when idle"): once per fetch, it was about a ninth of a coup
of 10 bets' CPU. The store's tracking, not the offsets, makes a redelivery harmless, so a crash
only reads again (and drops) about this much more (a record refused before its position is
known, a forged one on a service's topic, is dead-lettered again when read again)."""
COMMIT_TIMEOUT = 3.0
"""Seconds a commit may take before it is given up (logged; its offsets wait for the next):
aiokafka retries some errors for ever, a topic deleted meanwhile among them, and a commit may
run in a rebalance or a shutdown."""


@dataclass
class ConsumerStats:
    handled: int = 0
    duplicates: int = 0
    dead_letters: int = 0
    batches: int = 0
    stops: int = 0  # handler failures on internal messages (each try counts)


class PartitionStopped(Exception):
    """A handler failed on an internal message: its partition stops there."""

    def __init__(self, delivery: Delivery, error: Exception) -> None:
        super().__init__(f"handler failed: {error!r}")
        self.delivery = delivery
        self.error = error


Fetched = dict[TopicPartition, list[ConsumerRecord[Any, Any]]]
"""One fetch: each partition's records, in log order."""


class BatchProcessor:
    """Applies the fetched records of one service's subscriptions exactly once."""

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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not subscriptions:
            raise ValueError("a consumer needs at least one subscription")
        self.app = app
        self.settings = settings
        self.worker = worker
        self.subscriptions = {s.topic: s for s in subscriptions}
        if len(self.subscriptions) != len(subscriptions):
            raise ValueError("one subscription per topic")
        self._producer = producer  # of the dead letters; made by start() unless given
        self._own_producer = producer is None
        # Tracking names (consumer/intake.py): the Kafka cluster's id and the topics' ids,
        # read by start() unless given (together).
        self.names = PartitionNames(app, worker, cluster_id, topic_ids)
        self._reader: TopicIdReader | None = None
        self.dead_letters = DeadLetterSender(settings)
        self.consumer: AIOKafkaConsumer | None = None  # FastStream's, set on every batch
        self.ready = asyncio.Event()  # partitions assigned
        self.stats = ConsumerStats()
        # Partitions stopped on an internal message (stops.py); read by /ready and metrics.
        self.stops = PartitionStops()
        # Operations hooks (metrics.py): deliveries handled; offsets handled and committed.
        self.on_delivered: Callable[[Sequence[Delivery]], None] | None = None
        self.handled_offsets: dict[TopicPartition, int] = {}
        # Who may write what (signing.py): every service's public keys; settings' file if None.
        self.intake = RecordIntake(app, keyring if keyring is not None else load_keyring(settings))
        self._retry_delay = 0.5
        self._clock = clock
        self._uncommitted: dict[TopicPartition, int] = {}  # handled, offsets not yet committed
        self._committed_at = -COMMIT_INTERVAL
        self._committing = asyncio.Lock()

    async def start(self) -> None:
        """Read the cluster's and the topics' ids (unless given, as tests give both); start
        the dead letters' producer (unless given)."""
        names = self.names
        if names.fetch is None:
            self._reader = TopicIdReader(self.settings)
            await self._reader.start()
            topics = [self.settings.topic(t) for t in self.subscriptions]
            described = await self._reader.describe(topics)  # fails early on an old Kafka
            if not described.cluster_id:
                raise RuntimeError(
                    f"Kafka at {self.settings.kafka_bootstrap_servers} reports no cluster id"
                )
            names.cluster_id = described.cluster_id
            names.fetch = self._reader.topic_ids
            names.topic_ids.update(described.topic_ids)
        if self._producer is None:
            self._producer = idempotent_producer(self.settings, "dead-letters")
        if self._own_producer:
            await self._producer.start()

    async def stop(self) -> None:
        producer, self._producer = self._producer, None
        reader, self._reader = self._reader, None
        self.consumer = None
        try:
            if producer is not None and self._own_producer:
                await producer.stop()
        finally:
            if reader is not None:
                await reader.close()

    # ---- FastStream's handler --------------------------------------------------------------

    async def consume(
        self,
        records: Iterable[ConsumerRecord[Any, Any]],
        consumer: AIOKafkaConsumer | None,
        stopping: asyncio.Event,
    ) -> None:
        """Apply one fetch's records (see the module docstring); never raises."""
        if consumer is not None:
            self.consumer = consumer
        if stopping.is_set():
            return  # not committed: read again by the next run
        fetched: Fetched = {}
        for record in records:
            fetched.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
        try:
            await self.process(fetched, stopping)
            self._retry_delay = 0.5
        except Exception:
            # e.g. the dead-letter topic cannot be written: nothing is lost, the store's
            # tracking records make reading the fetch again safe.
            delay = self._retry_delay
            log.exception("consumer batch failed; re-reading it in %.1fs", delay)
            self._retry_delay = min(delay * 2, 10.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), delay)
            try:
                self._rewind(fetched)
            except Exception:
                log.exception("rewinding the failed batch failed; the next run reads it again")
        self.resume_due()

    def _rewind(self, fetched: Fetched) -> None:
        """Seek back to the first record of each partition of the failed ``fetched`` (what
        came before it was handled)."""
        consumer = self.consumer
        if consumer is None:
            return
        assigned = consumer.assignment()
        for tp, records in fetched.items():
            self.names.rewound(tp)
            if records and tp in assigned and not self.stops.waiting(tp):
                consumer.seek(tp, records[0].offset)  # not if taken over / sought to its stop

    async def process(self, fetched: Fetched, stopping: asyncio.Event) -> None:
        """Handle one fetch and commit its offsets when due (raises what the dead letters
        raise)."""
        offsets: dict[TopicPartition, int] = {}
        stopped = False
        order = {self.settings.topic(topic): rank for rank, topic in enumerate(self.subscriptions)}
        for tp, records in sorted(fetched.items(), key=lambda item: order.get(item[0].topic, 0)):
            if not records or self.stops.waiting(tp):
                continue  # a stopped partition's records wait for its next try
            try:
                done = await self.apply(tp, records, stopping)
            except PartitionStopped as stop:
                # All before it is handled; it is fetched again when its retry is due.
                offsets[tp] = stop.delivery.offset
                self.stats.stops += 1
                self.names.handled_to(tp, stop.delivery.offset)
                self.stops.pause(self.consumer, tp, stop.delivery, stop.error)
                stopped = True
                continue
            if not done:
                break  # stopping while retrying: leave the rest for the next run
            offsets[tp] = records[-1].offset + 1
            self.names.handled_to(tp, records[-1].offset + 1)
            self.dead_letters.done(tp)
            self.stops.taken(tp)
        self.stats.batches += 1
        self.handled_offsets.update(offsets)  # operations hook (consumer lag)
        self._uncommitted.update(offsets)
        if stopped or stopping.is_set() or self._clock() - self._committed_at >= COMMIT_INTERVAL:
            await self.commit_pending()

    async def commit_pending(self) -> None:
        """Commit the offsets handled since the last commit, of the partitions still assigned
        (the service's fetch calls it when a fetch brought nothing; see :data:`COMMIT_INTERVAL`)."""
        async with self._committing:  # one at a time: a later commit never lands first
            consumer, pending = self.consumer, self._uncommitted
            if consumer is None or not pending:
                return
            self._uncommitted = {}
            self._committed_at = self._clock()
            assigned = consumer.assignment()
            offsets = {
                tp: offset
                for tp, offset in pending.items()
                if tp in assigned
                and tp.partition in (consumer.partitions_for_topic(tp.topic) or ())
            }  # of a topic deleted meanwhile, aiokafka would retry for ever
            if not offsets:
                return
            try:
                await asyncio.wait_for(consumer.commit(offsets), COMMIT_TIMEOUT)
            except (KafkaError, TimeoutError) as error:  # e.g. a rebalance: tracking covers it
                log.warning("offset commit failed (%r); messages may be redelivered", error)
                for tp, offset in offsets.items():  # unless a later one is pending already
                    self._uncommitted.setdefault(tp, offset)

    async def apply(
        self,
        tp: TopicPartition,
        records: Sequence[ConsumerRecord[Any, Any]],
        stopping: asyncio.Event,
    ) -> bool:
        """Apply one partition's records exactly once (see the module docstring): True once
        they are applied, False when the service stopped meanwhile. Raises
        :class:`PartitionStopped` (an internal message failed) and what the dead letters'
        producer raises."""
        logical = self.settings.logical_topic(tp.topic)
        subscription = self.subscriptions[logical]
        name = await self.names.name(
            tp, logical, records[0].offset, functools.partial(self._end_offset, tp, records)
        )
        where = Where(self.names.cluster_id or "", tp.topic, tp.partition)
        partitions = self.partition_count(tp.topic)
        delay = 0.1
        integrity_failures = 0
        while True:
            try:
                handler_started = time.perf_counter()
                intake, ran, raised = await self.worker.call(
                    self._sort_and_handle, subscription, logical, where, partitions, name, records
                )
                self.stats.duplicates += intake.duplicates
                if intake.refused:
                    await self._dead_letter(intake.refused)
                if intake.last is None:
                    return True
                if not intake.fresh:
                    await self.worker.call(self._advance, name, intake.last)
                    return True
                try:
                    if raised is not None:
                        try:
                            raise raised
                        finally:
                            raised = None  # no cycle through this frame's traceback
                    if not ran:  # refusals first: dead-lettered before the position moves
                        await self.worker.call(
                            subscription.handler, intake.fresh, Tracking(name, intake.last)
                        )
                except TRANSIENT:
                    raise
                except IntegrityError:
                    integrity_failures += 1
                    if integrity_failures < MAX_INTEGRITY_RETRIES:
                        raise
                    await self._one_by_one(subscription, intake)
                except Exception as failure:
                    if len(intake.fresh) > 1:
                        log.exception(
                            "handler for %s:%d failed on a batch of %d; retrying one by one",
                            logical,
                            tp.partition,
                            len(intake.fresh),
                        )
                    await self._one_by_one(subscription, intake, failure)
                else:
                    self._delivered(intake.fresh)
                log.debug(
                    "%s:%d handled %d messages in %.3fs",
                    logical,
                    tp.partition,
                    len(intake.fresh),
                    time.perf_counter() - handler_started,
                )
                return True
            except (*TRANSIENT, IntegrityError) as error:
                if stopping.is_set():
                    return False
                log.warning(
                    "store error on %s:%d (%s); retrying in %.1fs",
                    logical,
                    tp.partition,
                    error,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _one_by_one(
        self, subscription: Subscription, intake: Intake, failure: Exception | None = None
    ) -> None:
        """Handle the fresh deliveries one at a time; ``failure``: why the batch failed."""
        if intake.last is None:
            return
        name = intake.name
        # A batch of one failed already: calling its handler again would only repeat that.
        alone = failure if len(intake.fresh) == 1 else None
        # A per-message handler may have committed the first messages before failing.
        recorded = await self.worker.call(self.app.tracked_position, name)
        handled: list[Delivery] = []
        for delivery in intake.fresh:
            position = delivery.tracking.notification_id
            if position <= recorded:
                continue
            error = alone
            if error is None:
                try:
                    await self.worker.call(subscription.handler, [delivery], delivery.tracking)
                except TRANSIENT:
                    self._delivered(handled)
                    raise
                except Exception as failed:
                    error = failed
            if error is None:
                handled.append(delivery)
            elif not delivery.external:
                self._delivered(handled)
                raise PartitionStopped(delivery, error) from error
            else:
                log.error(
                    "handler failed on %s; dead-lettering it",
                    delivery.where(),
                    exc_info=error,
                )
                await self._dead_letter(
                    [(intake.raw[delivery.offset], f"handler failed: {error!r}")]
                )
                await self.worker.call(self._advance, name, position)
            recorded = position
        self._delivered(handled)
        if intake.last > recorded:
            await self.worker.call(self._advance, name, intake.last)

    def _sort_and_handle(
        self,
        subscription: Subscription,
        logical: str,
        where: Where,
        partitions: int,
        name: str,
        records: Sequence[ConsumerRecord[Any, Any]],
    ) -> tuple[Intake, bool, Exception | None]:
        """The intake of ``records`` and, when it refused none, their handling, in one trip to
        the application's thread (a trip costs about 100 us of CPU: BENCHMARKS.md, "A coup's
        fixed cost"): the intake, whether the handler ran, and what it raised."""
        intake = self.intake.sort(logical, where, partitions, name, records)
        if intake.refused or not intake.fresh or intake.last is None:
            return intake, False, None
        try:
            subscription.handler(intake.fresh, Tracking(name, intake.last))
        except Exception as failure:
            return intake, True, failure
        return intake, True, None

    def _advance(self, name: str, position: int) -> None:
        """Record ``position`` for ``name`` unless it is recorded already."""
        if self.app.tracked_position(name) < position:
            self.app.record_position(name, position)

    def partition_count(self, topic: str) -> int:
        """``topic``'s partition count, as the Kafka consumer's metadata has it (where a table's
        records must be: ``intake.py``); ``PB_TOPIC_PARTITIONS`` when it has none (tests)."""
        consumer = self.consumer
        found = consumer.partitions_for_topic(topic) if consumer is not None else None
        return len(found) if found else self.settings.topic_partitions

    async def _end_offset(
        self, tp: TopicPartition, records: Sequence[ConsumerRecord[Any, Any]]
    ) -> int:
        consumer = self.consumer
        known = consumer.highwater(tp) if consumer is not None else None
        if known is None and consumer is not None:
            known = (await consumer.end_offsets([tp])).get(tp)
        return max(int(known or 0), int(records[-1].offset) + 1)

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Assignment changed: read the topics' ids again; stops of those partitions end."""
        partitions = list(partitions)
        self.names.forget(partitions)
        for tp in partitions:
            self.dead_letters.done(tp)
            self._uncommitted.pop(tp, None)  # another member may have gone further since
            if self.stops.clear(tp) is not None:
                log.warning("%s:%d is no longer stopped here (reassigned)", tp.topic, tp.partition)

    def _delivered(self, deliveries: Sequence[Delivery]) -> None:
        self.stats.handled += len(deliveries)
        if deliveries and self.on_delivered is not None:  # operations hook (metrics)
            self.on_delivered(deliveries)

    async def _dead_letter(self, items: Sequence[tuple[ConsumerRecord[Any, Any], str]]) -> None:
        if self._producer is None:
            raise RuntimeError("consumer not started")
        self.stats.dead_letters += await self.dead_letters.send(self._producer, items)

    def resume_due(self) -> None:
        """Resume the stopped partitions whose next try is due (``stops.py``)."""
        self.stops.resume_due(self.consumer)

    async def watch_stops(self, stopping: asyncio.Event, interval: float = 0.2) -> None:
        """Resume stopped partitions when due, also while no other partition brings records
        (FastStream calls :meth:`consume` only with records)."""
        while not stopping.is_set():
            self.resume_due()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), interval)

    # ---- operations ----------------------------------------------------------------------

    async def lag(self) -> dict[tuple[str, int], int]:
        """Operations: per (logical topic, partition) assigned, messages not yet handled."""
        consumer = self.consumer
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


class RebalanceListener(ConsumerRebalanceListener):  # type: ignore[misc]
    """Assignment changes: the offsets handled are committed before a revoke, topic ids are
    read again (a topic may be new), stops end."""

    def __init__(self, processor: BatchProcessor | None = None) -> None:
        self.processor = processor

    async def on_partitions_revoked(self, revoked: Any) -> None:
        if self.processor is not None:
            await self.processor.commit_pending()  # where the next owner starts
            self.processor.forget(revoked)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        if self.processor is not None:
            self.processor.forget(assigned)
            if assigned:
                self.processor.ready.set()
