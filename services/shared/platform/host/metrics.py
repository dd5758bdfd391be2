"""Prometheus metrics of a service: counters fed by what the relay published (acknowledged) and
what the consumer handled, gauges read at scrape time (relay backlog, store size, consumer lag),
``pb_partition_stopped`` and ``pb_incidents_total`` to alert on. Counters restart with the
process (Prometheus' ``rate`` handles that).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import Counter as Tally
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from contracts import (
    CoupResolved,
    MessageQuarantined,
)
from services.shared.platform.consumer.deliveries import Delivery
from services.shared.platform.consumer.processor import BatchProcessor
from services.shared.platform.relay.relay import OutboxRelay
from services.shared.platform.settings import Settings
from services.shared.platform.store.application import ServiceApplication

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
MAX_PENDING_COUPS = 10_000
"""CoupResolved times kept while waiting for their settlement (oldest dropped first)."""
SCRAPE_TIMEOUT = 3.0


class Observed(Protocol):
    """What the metrics read of the running service at scrape time."""

    @property
    def settings(self) -> Settings: ...

    @property
    def app(self) -> ServiceApplication: ...

    @property
    def relay(self) -> OutboxRelay | None: ...

    @property
    def consumer(self) -> BatchProcessor | None: ...


class ServiceMetrics(Collector):
    """The metrics of one running service; hooks fed by the relay and the consumer. It is also
    the collector, in its own registry, of what the runtime counts anyway (:meth:`collect`)."""

    def __init__(self, service: str) -> None:
        self.service = service
        self.registry = CollectorRegistry()
        r = self.registry
        count = functools.partial(Counter, registry=r)
        gauge = functools.partial(Gauge, registry=r)
        self.coups_resolved = count("pb_coups_resolved", "Coups resolved, by outcome.", ["outcome"])
        self.bets_accepted = count("pb_bets_accepted", "Bets accepted, by bet type.", ["bet_type"])
        self.bets_rejected = count("pb_bets_rejected", "Bets rejected, by reason code.", ["reason"])
        self.bets_settled = count("pb_bets_settled", "Bets settled, by result.", ["result"])
        self.published = count(
            "pb_messages_published", "Messages published by the relay, by type.", ["type"]
        )
        self.incidents = count(
            "pb_incidents",
            "Facts the service refused to believe (IncidentRaised), by code.",
            ["code"],
        )
        self.quarantined = count(
            "pb_messages_quarantined",
            "Messages the relay could not publish (quarantined), by type.",
            ["type"],
        )
        self.device_lines = count(
            "pb_device_lines",
            "Lines of a studio device, by what the bridge made of them (recorded, duplicate, "
            "heartbeat, malformed, wrong-device, backwards, ahead).",
            ["outcome"],
        )
        self.settlement_latency = Histogram(
            "pb_settlement_latency_seconds",
            "From CoupResolved (occurred_at) to the coup's BetSettled published (acked).",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.relay_backlog = gauge(
            "pb_relay_backlog_events", "Stored events not yet published by the relay."
        )
        self.store_events = gauge("pb_event_store_events", "Notifications in the event store.")
        self.consumer_lag = gauge(
            "pb_consumer_lag_messages",
            "Messages in the subscribed partitions not yet handled.",
            ["topic", "partition"],
        )
        self.partition_stopped = gauge(
            "pb_partition_stopped",
            "1 while a partition is stopped on a message its handler cannot take.",
            ["service", "topic", "partition"],
        )
        self._host: Observed | None = None
        r.register(self)
        self._resolved_at: OrderedDict[tuple[str, str], float] = OrderedDict()

    # ---- hooks ---------------------------------------------------------------------------

    def observe_delivered(self, deliveries: Sequence[Delivery]) -> None:
        """Consumer hook: remember when each consumed coup was resolved (for the latency)."""
        for delivery in deliveries:
            message = delivery.message
            if isinstance(message, CoupResolved):
                key = (message.table_id, message.coup_id)
                self._resolved_at[key] = message.occurred_at.timestamp()
                self._resolved_at.move_to_end(key)
                while len(self._resolved_at) > MAX_PENDING_COUPS:
                    self._resolved_at.popitem(last=False)

    def observe_stopped(self, topic: str, partition: int, stopped: bool) -> None:
        """Consumer hook: a partition stopped (True) or went on again (False)."""
        self.partition_stopped.labels(self.service, topic, str(partition)).set(1 if stopped else 0)

    def observe_quarantined(self, records: Iterable[MessageQuarantined]) -> None:
        """Relay hook: messages replaced by quarantine records (the broker refuses them)."""
        for label, count in Tally(record.message_type for record in records).items():
            self.quarantined.labels(label).inc(count)

    def observe_published(self, messages: Iterable[Any]) -> None:
        """Relay hook: count what the broker acknowledged (messages, or views of a fact's
        lines: read by field name)."""
        now = time.time()
        types: Tally[str] = Tally()
        outcomes: Tally[str] = Tally()
        accepted: Tally[str] = Tally()
        rejected: Tally[str] = Tally()
        settled: Tally[str] = Tally()
        incidents: Tally[str] = Tally()
        coups: set[tuple[str, str]] = set()  # settled in this batch
        for message in messages:
            kind = message.type
            types[kind] += 1
            if kind == "BetSettled":
                settled[message.result] += 1
                coups.add((message.table_id, message.coup_id))
            elif kind == "BetAccepted":
                accepted[message.bet_type] += 1
            elif kind == "BetRejected":
                rejected[message.reason_code] += 1
            elif kind == "CoupResolved":
                outcomes[message.outcome] += 1
            elif kind == "CoupSettled":
                coups.add((message.table_id, message.coup_id))
            elif kind == "IncidentRaised":
                incidents[message.code] += 1
        for table_id, coup_id in coups:
            self._settled(table_id, coup_id, now)
        for tally, counter in (
            (types, self.published),
            (outcomes, self.coups_resolved),
            (accepted, self.bets_accepted),
            (rejected, self.bets_rejected),
            (settled, self.bets_settled),
            (incidents, self.incidents),
        ):
            for label, count in tally.items():
                counter.labels(label).inc(count)

    def _settled(self, table_id: str, coup_id: str, now: float) -> None:
        resolved = self._resolved_at.pop((table_id, coup_id), None)
        if resolved is not None:
            self.settlement_latency.observe(max(0.0, now - resolved))

    # ---- scrape --------------------------------------------------------------------------

    async def render(self, host: Observed) -> bytes:
        """Refresh the gauges read at scrape time; the exposition text."""
        self._host = host
        try:
            async with asyncio.timeout(SCRAPE_TIMEOUT):
                newest = await asyncio.to_thread(host.app.recorder.max_notification_id) or 0
                self.store_events.set(newest)
                if host.relay is not None:
                    self.relay_backlog.set(max(0, newest - host.relay.position))
                if host.consumer is not None:
                    for (topic, partition), lag in (await host.consumer.lag()).items():
                        self.consumer_lag.labels(topic, str(partition)).set(lag)
        except Exception as error:  # a scrape still answers with what it has
            log.warning("%s: metrics refresh incomplete: %r", self.service, error)
        return generate_latest(self.registry)

    def collect(self) -> Iterator[Metric]:
        """Counters the runtime keeps anyway (consumer stats), read at collect time."""
        host = self._host
        consumer = host.consumer if host is not None else None
        stats = consumer.stats if consumer is not None else None
        for name, doc, value in (
            ("pb_dead_letters", "Messages sent to the dead-letter topic.", "dead_letters"),
            ("pb_messages_handled", "Consumed messages handled.", "handled"),
            ("pb_duplicates_skipped", "Redelivered messages skipped.", "duplicates"),
            ("pb_partition_stops", "Failed tries of a stopped partition's record.", "stops"),
        ):
            family = CounterMetricFamily(name, doc)
            family.add_metric([], getattr(stats, value, 0) if stats is not None else 0)
            yield family
        up = GaugeMetricFamily("pb_service_up", "1 while the service runs.", labels=["service"])
        up.add_metric([self.service], 1)
        yield up
        if host is not None and host.settings.persistence == "sqlite":
            size = 0
            path = host.settings.sqlite_path
            for file in (path, path.with_name(path.name + "-wal")):
                with contextlib.suppress(OSError):
                    size += file.stat().st_size
            family_bytes = GaugeMetricFamily(
                "pb_event_store_bytes", "Size of the SQLite event store (file + WAL)."
            )
            family_bytes.add_metric([], size)
            yield family_bytes
