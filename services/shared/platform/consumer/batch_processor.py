"""The batch processor: the records of one fetch in, exactly one effect per message in the store.

FastStream's batch subscriber (``consumer.py``) owns the fetch loop and hands
:meth:`BatchProcessor.consume` the raw records of one ``getmany`` (every partition's records,
each partition's in log order) with the Kafka consumer. For each partition, in subscription
order (settlement lists the shoe's cards before dealing's claims):

- its records are applied in ONE store transaction with their tracking record
  (``handling.py``, ``intake.py``), under the partition's tracking name (``partition_names.py``:
  cluster id, topic name and Kafka topic id; read again after each assignment);
- its Kafka offset is committed only after the store commits: a crash in between only means a
  redelivery, which the tracking records absorb;
- a handler failing on an internal message STOPS the partition at that record (``stops.py``:
  paused, loudly; its offset stays there, so a restart tries it again); it is resumed when its
  next try is due, after every batch and by the :meth:`~BatchProcessor.watch_stops` task.

:meth:`~BatchProcessor.consume` never raises: FastStream's loop would log the error and go on
from its in-memory position, past the batch. A batch that fails (e.g. the dead-letter topic
cannot be written) is read again from the last committed offsets after a back-off; the store's
tracking records make re-reading safe.

Refused records have no position: a redelivery dead-letters them again. Wipe a service's
store and the topics together (the upstream notification ids start again at 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from services.shared.platform.consumer.dead_letters import DeadLetterSender
from services.shared.platform.consumer.deliveries import Delivery, Subscription
from services.shared.platform.consumer.handling import (
    ConsumerStats,
    PartitionHandling,
    PartitionStopped,
)
from services.shared.platform.consumer.intake import RecordIntake, record_position
from services.shared.platform.consumer.partition_names import PartitionNames, TopicIdFetcher
from services.shared.platform.consumer.stops import PartitionStops
from services.shared.platform.consumer.topic_ids import TopicIdReader
from services.shared.platform.kafka import idempotent_producer
from services.shared.platform.security.keys import load_keyring
from services.shared.platform.security.signing import Keyring, Where
from services.shared.platform.settings import Settings
from services.shared.platform.store.application import ServiceApplication
from services.shared.platform.store.worker import AppWorker

log = logging.getLogger(__name__)

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
        # Tracking names (partition_names.py): the Kafka cluster's id and the topics' ids,
        # read by start() unless given.
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
        self.handling = PartitionHandling(
            app, worker, self.intake, self._dead_letter, self._delivered, self.stats
        )
        self._retry_delay = 0.5

    @property
    def keyring(self) -> Keyring:
        return self.intake.keyring

    @keyring.setter
    def keyring(self, keyring: Keyring) -> None:
        self.intake.keyring = keyring

    @property
    def cluster_id(self) -> str | None:
        """The Kafka cluster's id (part of offset-based tracking names)."""
        return self.names.cluster_id

    async def start(self) -> None:
        """Read the cluster's and the topics' ids (unless given); start the dead letters'
        producer (unless given)."""
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
            # tracking records make re-reading from the committed offsets safe.
            delay = self._retry_delay
            log.exception("consumer batch failed; re-reading it in %.1fs", delay)
            self._retry_delay = min(delay * 2, 10.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), delay)
            try:
                await self._rewind(list(fetched))
            except Exception:
                log.exception("rewinding the failed batch failed; the next run reads it again")
        self.resume_due()

    async def _rewind(self, partitions: Sequence[TopicPartition]) -> None:
        """Seek back to the last committed offsets (the beginning when none)."""
        consumer = self.consumer
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

    async def process(self, fetched: Fetched, stopping: asyncio.Event) -> None:
        """Handle one fetch and commit its offsets (raises what the dead letters raise)."""
        offsets: dict[TopicPartition, int] = {}
        order = {self.settings.topic(topic): rank for rank, topic in enumerate(self.subscriptions)}
        for tp, records in sorted(fetched.items(), key=lambda item: order.get(item[0].topic, 0)):
            if not records or self.stops.waiting(tp):
                continue  # a stopped partition's records wait for its next try
            logical = self.settings.logical_topic(tp.topic)
            subscription = self.subscriptions[logical]
            name = await self.names.name(
                tp, logical, records[0].offset, functools.partial(self._end_offset, tp, records)
            )
            positioned = [(record, record_position(logical, record)) for record in records]
            where = Where(self.cluster_id or "", tp.topic, tp.partition)
            try:
                done = await self.handling.apply(
                    subscription,
                    logical,
                    where,
                    self.partition_count(tp.topic),
                    name,
                    positioned,
                    stopping,
                )
            except PartitionStopped as stop:
                offsets[tp] = stop.delivery.offset  # all before it is handled
                self._stop(tp, stop)
                continue
            if not done:
                break  # stopping while retrying: leave the rest for the next run
            offsets[tp] = records[-1].offset + 1
            self.names.handled_to(tp, records[-1].offset + 1)
            self.dead_letters.done(tp)
            self.stops.taken(tp)
        self.stats.batches += 1
        self.handled_offsets.update(offsets)  # operations hook (consumer lag)
        if offsets and self.consumer is not None:
            try:
                await self.consumer.commit(offsets)
            except KafkaError as error:  # e.g. a rebalance: the store's tracking covers it
                log.warning("offset commit failed (%s); messages may be redelivered", error)

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

    # ---- stopped partitions (stops.py) ---------------------------------------------------

    def _stop(self, tp: TopicPartition, stop: PartitionStopped) -> None:
        """Pause ``tp`` at the failing record; it is fetched again when its retry is due."""
        self.stats.stops += 1
        self.names.handled_to(tp, stop.delivery.offset)
        self.stops.pause(self.consumer, tp, stop.delivery, stop.error)

    def resume_due(self) -> None:
        """Resume the stopped partitions whose next try is due."""
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
