"""Partitions stopped because a handler failed on a service's message (never skipped: a lost
CoupResolved would leave a book wrong for good). The partition is paused at that record, tried
again after a growing back-off until it passes, and loud meanwhile: an ERROR log,
``pb_partition_stopped`` and ``/ready``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from aiokafka import AIOKafkaConsumer, TopicPartition

from services.shared.platform.consumer.deliveries import Delivery

log = logging.getLogger(__name__)

FIRST_RETRY_DELAY = 1.0
"""Seconds before the first new try of a stopped partition's record."""
MAX_RETRY_DELAY = 30.0
"""The longest wait between two tries."""


@dataclass
class StoppedPartition:
    """A partition waiting for its handler to take the record at ``offset``."""

    topic: str  # logical topic
    partition: int
    offset: int
    message_type: str
    table_id: str | None
    error: str
    since: datetime
    attempts: int = 1
    delay: float = FIRST_RETRY_DELAY
    retry_at: float = 0.0  # time.monotonic()
    retrying: bool = False  # resumed, the record is being fetched again

    def describe(self) -> str:
        wait = max(0.0, self.retry_at - time.monotonic())
        return (
            f"{self.topic}:{self.partition} stopped at offset {self.offset} "
            f"({self.message_type}, table {self.table_id or '?'}) since "
            f"{self.since.isoformat(timespec='seconds')}: {self.error}; "
            f"{self.attempts} failed {'try' if self.attempts == 1 else 'tries'}, "
            f"next in {wait:.0f} s"
        )


class PartitionStops:
    """The stopped partitions of one consumer."""

    def __init__(self) -> None:
        self.first_delay = FIRST_RETRY_DELAY
        self.max_delay = MAX_RETRY_DELAY
        self._stopped: dict[TopicPartition, StoppedPartition] = {}
        self.on_change: Callable[[str, int, bool], None] | None = None

    def __contains__(self, tp: object) -> bool:
        return tp in self._stopped

    def __iter__(self) -> Iterator[StoppedPartition]:
        return iter(list(self._stopped.values()))

    def __len__(self) -> int:
        return len(self._stopped)

    def get(self, tp: TopicPartition) -> StoppedPartition | None:
        return self._stopped.get(tp)

    def stop(
        self,
        tp: TopicPartition,
        topic: str,
        offset: int,
        message_type: str,
        table_id: str | None,
        error: str,
    ) -> StoppedPartition:
        """Record a (new or repeated) failure at ``offset``; the next try waits longer."""
        stopped = self._stopped.get(tp)
        if stopped is None or stopped.offset != offset:
            stopped = StoppedPartition(
                topic=topic,
                partition=tp.partition,
                offset=offset,
                message_type=message_type,
                table_id=table_id,
                error=error,
                since=datetime.now(UTC),
                delay=self.first_delay,
            )
            self._stopped[tp] = stopped
            if self.on_change is not None:
                self.on_change(topic, tp.partition, True)
        else:
            stopped.attempts += 1
            stopped.error = error
            stopped.delay = min(stopped.delay * 2, self.max_delay)
        stopped.retrying = False
        stopped.retry_at = time.monotonic() + stopped.delay
        return stopped

    def due(self) -> list[TopicPartition]:
        """Stopped partitions whose next try is due (and not yet under way)."""
        now = time.monotonic()
        return [
            tp
            for tp, stopped in self._stopped.items()
            if not stopped.retrying and stopped.retry_at <= now
        ]

    def waiting(self, tp: TopicPartition) -> bool:
        """True while ``tp`` is stopped and its next try is not under way."""
        stopped = self._stopped.get(tp)
        return stopped is not None and not stopped.retrying

    def clear(self, tp: TopicPartition) -> StoppedPartition | None:
        """Forget ``tp``'s stop (its record was taken, or the partition went elsewhere)."""
        stopped = self._stopped.pop(tp, None)
        if stopped is not None and self.on_change is not None:
            self.on_change(stopped.topic, tp.partition, False)
        return stopped

    # ---- on the Kafka consumer -----------------------------------------------------------

    def pause(
        self,
        consumer: AIOKafkaConsumer | None,
        tp: TopicPartition,
        delivery: Delivery,
        error: Exception,
    ) -> StoppedPartition:
        """Stop ``tp`` at ``delivery`` (its handler raised ``error``): pause the partition and
        seek back to the record, so it is fetched again when its retry is due; log it."""
        first = tp not in self._stopped
        stopped = self.stop(
            tp,
            delivery.topic,
            delivery.offset,
            type(delivery.message).__name__,
            delivery.table_id,
            f"handler failed: {error!r}"[:500],
        )
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
            error,
            exc_info=error if first else None,
            extra={"table_id": delivery.table_id},  # structured logs (logs.py)
        )
        return stopped

    def resume_due(self, consumer: AIOKafkaConsumer | None) -> None:
        """Resume the stopped partitions whose next try is due."""
        if consumer is None:
            return
        assigned = consumer.assignment()
        for tp in self.due():
            if tp not in assigned:
                self.clear(tp)
                continue
            self._stopped[tp].retrying = True
            consumer.resume(tp)

    def taken(self, tp: TopicPartition) -> None:
        """``tp``'s records were handled: if it was stopped, it goes on (logged)."""
        stopped = self.clear(tp)
        if stopped is not None:
            log.warning(
                "%s:%d resumed: the record at offset %d (%s) was handled after %d failed tries",
                stopped.topic,
                stopped.partition,
                stopped.offset,
                stopped.message_type,
                stopped.attempts,
            )
