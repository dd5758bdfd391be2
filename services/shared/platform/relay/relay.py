"""The outbox relay: publishes a service's stored events to Kafka, in order, at least once.

The service's event store IS its outbox. The relay reads the Application's notification log
from the position it recorded last, turns each stored domain event into zero or more contract
messages and Kafka records (``relay_records.py``: the service's mapper, relay headers, key =
table id, signatures), sends them with the idempotent producer, one record batch per
partition in flight (``relay_pipeline.py``, ``relay_producer.py``), waits for every record of
the batch to be acknowledged, and only then records the new position as an eventsourcing
tracking record (``relay:<service>``) in the same store.

After a crash or a failed batch it starts again from the recorded position, so the head of the
last batch may be published again: downstream consumers see duplicates (same
``pb-notification-id`` header, same ``event_id``) and drop them by their tracking records.
Nothing is ever lost. A message the broker can never take is quarantined instead of retried
forever (``relay_refusals.py``).

The relay stays on aiokafka's record-batch API rather than FastStream's publisher (which sends
one message per call and hides the batch and its acknowledgement): ``relay_producer.py`` says
why. The service's FastStream publishers document what the relay writes (AsyncAPI).

Markers first. The records of a relay batch for ``BET_COMMANDS`` (dealing's ``OpenBook`` /
``CloseBook``, which mark in a table's partition where betting on a coup opens and closes) are
sent and acknowledged before the batch's other records, so a bettor who reads a
``BettingOpened`` finds the book open. A large batch streams its records as they are encoded;
once it has let other records go, a later notification with markers starts the next relay
batch instead.

The relay wakes as soon as the Application saves (``add_save_listener``) and otherwise polls
every ``relay_poll_interval`` seconds (events written by another process, e.g. after a restart,
are found by the poll). The listener also hands over the domain events just recorded, keyed by
notification id, so the relay maps them without decoding the stored JSON again (a coup's
settlement of 10,000 lines); what it did not see saved (a restart, another process) it reads
from the store. Either way the notification log decides what is published and in which order.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from eventsourcing.persistence import Recording

from contracts import DEAD_LETTERS, Message, MessageQuarantined
from services.shared.platform.kafka import cluster_id as read_cluster_id
from services.shared.platform.kafka import idempotent_producer
from services.shared.platform.relay.relay_pipeline import Pipeline, Published
from services.shared.platform.relay.relay_producer import RelayProducer
from services.shared.platform.relay.relay_records import (
    SIGNED_TOPICS,
    EventMapper,
    OutgoingRecord,
    RecordEncoder,
)
from services.shared.platform.relay.relay_refusals import InvalidRecordError, quarantine_record
from services.shared.platform.security.signing import Signer
from services.shared.platform.settings import Settings
from services.shared.platform.store.application import ServiceApplication

__all__ = ["SIGNED_TOPICS", "EventMapper", "InvalidRecordError", "OutboxRelay", "OutgoingRecord"]

log = logging.getLogger(__name__)

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
        producer: AIOKafkaProducer | None = None,
        producer_factory: Callable[[], AIOKafkaProducer] | None = None,
        signer: Signer | None = None,
        signed_topics: frozenset[str] = SIGNED_TOPICS,
        cluster_id: str | None = None,
    ) -> None:
        """``cluster_id``: the Kafka cluster's id, which the signatures bind; read from the
        cluster at start when None and the relay makes its own producers (else ``""``: a
        producer given, in tests)."""
        if producer is not None and producer_factory is not None:
            raise ValueError("pass a producer or a producer factory, not both")
        if cluster_id is None and (producer is not None or producer_factory is not None):
            cluster_id = ""
        self._cluster_id = cluster_id
        self.app = app
        self.settings = settings
        self.tracking_name = tracking_name or f"relay:{settings.service}"
        if producer is None and producer_factory is None:
            producer_factory = functools.partial(idempotent_producer, settings, "relay")
        # The relay starts, stops and replaces the producers it makes (relay_producer.py).
        self.producer = RelayProducer(self.tracking_name, producer, producer_factory)
        quarantine = functools.partial(
            quarantine_record,
            service=settings.service,
            dead_letter_topic=settings.topic(DEAD_LETTERS),
            relay=self.tracking_name,
        )
        self._quarantine = quarantine
        self.encoder = RecordEncoder(
            settings,
            mapper,
            quarantine,
            signer=signer,
            signed_topics=signed_topics,
            partitions=self._partition_count,
        )
        self._counts: dict[str, int] = {}  # topic -> partitions, read once per relay batch
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        # notification id -> the domain event just saved in this process (see the docstring)
        self._fresh: dict[int, object] = {}
        self._fresh_lock = threading.Lock()
        self.position = 0
        self.published = 0
        self.quarantined = 0
        # Operations hooks (metrics.py): the messages of every acknowledged batch, and the
        # MessageQuarantined records that replaced messages the broker cannot take.
        self.on_published: Callable[[Sequence[Message]], None] | None = None
        self.on_quarantined: Callable[[Sequence[MessageQuarantined]], None] | None = None

    @property
    def max_record_bytes(self) -> int:
        """Larger records are quarantined unsent (``relay_refusals.py``)."""
        return self.encoder.max_record_bytes

    @max_record_bytes.setter
    def max_record_bytes(self, value: int) -> None:
        self.encoder.max_record_bytes = value

    @property
    def _generation(self) -> int:
        """How many times the producer was replaced (tests read it)."""
        return self.producer.generation

    # -- lifecycle ----------------------------------------------------------------
    @property
    def started(self) -> bool:
        """Started (and so able to publish), whether or not stopped since."""
        return self._loop is not None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._cluster_id is None and self.encoder.signer is not None:
            self._cluster_id = await read_cluster_id(self.settings)
        self.encoder.cluster = self._cluster_id or ""
        await self.producer.start()
        self.position = await asyncio.to_thread(self.app.tracked_position, self.tracking_name)
        self.app.add_save_listener(self._on_saved)
        log.info("relay %s starts after notification %d", self.tracking_name, self.position)

    async def stop(self) -> None:
        self.app.remove_save_listener(self._on_saved)
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
            await self.producer.ensure()
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
                self.producer.renew_due = True  # its state may be what failed: start with a new one
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
        self.producer.new_batch()
        self._counts.clear()
        published = Published()
        chunks = self.encoder.chunks(events, done)
        others = Pipeline(self.producer, self._quarantine, published)
        try:
            while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
                if chunk.markers:
                    markers = Pipeline(self.producer, self._quarantine, published)
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

    def _partition_count(self, topic: str) -> int:
        """``topic``'s partition count, for the encoder in its thread (asks the producer on the
        event loop, once per relay batch)."""
        count = self._counts.get(topic)
        if count is None:
            loop = self._loop
            if loop is None:
                raise RuntimeError("relay not started")
            asked = asyncio.run_coroutine_threadsafe(self.producer.partition_count(topic), loop)
            count = self._counts[topic] = asked.result()
        return count

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

    def _read_batch(self, after: int) -> tuple[list[OutgoingRecord], int | None]:
        """Every record of the next batch at once (markers first), and its last notification id."""
        events, last_id = self._read_events(after)
        if last_id is None:
            return [], None
        done = [after]
        records = [
            r for chunk in self.encoder.chunks(events, done) for r in chunk.markers + chunk.others
        ]
        return records, done[0]
