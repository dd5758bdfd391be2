"""Applying one partition's records: one store transaction, retries, dead letters, stops.

:meth:`PartitionHandling.apply` takes the records of ONE topic-partition of a fetched batch:

1. they are sorted out in the worker thread (``intake.py``); the refused ones are published to
   the dead-letter topic (``dead_letters.py``: bounded, whatever the record holds) BEFORE the
   store commit;
2. the fresh deliveries go to the subscription's handler in the worker thread, as ONE batch
   with ONE ``Tracking`` (the batch's last position): the handler records its new events and
   that tracking record in one transaction, so a redelivered or republished message has no
   second effect; a batch with nothing fresh only records its position;
3. if the handler raises, nothing of the batch was recorded: the messages are tried one by
   one. A message nothing vouches for (an outside type such as a PlaceBet or a table command,
   or anything no service's signature came with: ``Delivery.external``) that fails is
   dead-lettered (error ``handler failed: ...``) and the partition goes on: a forged record
   must not stop a partition. An internal message (signed by its sender) that fails raises
   :class:`PartitionStopped`: its partition stops there (``stops.py``), nothing past it is
   recorded;
4. store errors that may pass (OperationalError, InterfaceError, and an IntegrityError a few
   times: another writer's race) are retried with a back-off until they pass or the service
   stops.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import ConsumerRecord
from eventsourcing.persistence import IntegrityError, InterfaceError, OperationalError, Tracking

from services.shared.platform.consumer.deliveries import Delivery, Subscription
from services.shared.platform.consumer.intake import Intake, Position, RecordIntake
from services.shared.platform.security.signing import Where
from services.shared.platform.store.application import ServiceApplication
from services.shared.platform.store.worker import AppWorker

log = logging.getLogger(__name__)

TRANSIENT = (OperationalError, InterfaceError)
"""Store errors that may pass: retried with a back-off."""
MAX_INTEGRITY_RETRIES = 3
"""A batch failing on IntegrityError this many times is applied one message at a time."""

DeadLetter = Callable[[Sequence[tuple[ConsumerRecord[Any, Any], str]]], Awaitable[None]]
"""Publish (record, why) pairs to the dead-letter topic."""


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


class PartitionHandling:
    """Applies one partition's records exactly once (see the module docstring)."""

    def __init__(
        self,
        app: ServiceApplication,
        worker: AppWorker,
        intake: RecordIntake,
        dead_letter: DeadLetter,
        delivered: Callable[[Sequence[Delivery]], None],
        stats: ConsumerStats,
    ) -> None:
        self.app = app
        self.worker = worker
        self.intake = intake
        self.dead_letter = dead_letter
        self.delivered = delivered  # deliveries taken (the operations hook)
        self.stats = stats

    async def apply(
        self,
        subscription: Subscription,
        logical: str,
        where: Where,
        partitions: int,
        name: str,
        records: list[tuple[ConsumerRecord[Any, Any], Position]],
        stopping: asyncio.Event,
    ) -> bool:
        """True once the records are applied; False when the service stopped meanwhile.
        Raises :class:`PartitionStopped` (an internal message failed) and what the dead
        letters' producer raises. ``where``: the partition read (``intake.py``),
        ``partitions``: its topic's partition count."""
        partition = where.partition
        delay = 0.1
        integrity_failures = 0
        while True:
            try:
                intake = await self.worker.call(
                    self.intake.sort, logical, where, partitions, name, records
                )
                self.stats.duplicates += intake.duplicates
                if intake.refused:
                    await self.dead_letter([(r.record, r.error) for r in intake.refused])
                if intake.last is None:
                    return True
                if not intake.fresh:
                    await self.worker.call(self.advance, name, intake.last)
                    return True
                handler_started = time.perf_counter()
                try:
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
                            partition,
                            len(intake.fresh),
                        )
                    await self._one_by_one(subscription, intake, failure)
                else:
                    self.delivered(intake.fresh)
                log.debug(
                    "%s:%d handled %d messages in %.3fs",
                    logical,
                    partition,
                    len(intake.fresh),
                    time.perf_counter() - handler_started,
                )
                return True
            except (*TRANSIENT, IntegrityError) as error:
                if stopping.is_set():
                    return False
                log.warning(
                    "store error on %s:%d (%s); retrying in %.1fs", logical, partition, error, delay
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _one_by_one(
        self, subscription: Subscription, intake: Intake, failure: Exception | None = None
    ) -> None:
        """Handle the fresh deliveries one at a time; ``failure``: why the batch failed."""
        if not intake.fresh or intake.last is None:
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
                    self.delivered(handled)
                    raise
                except Exception as failed:
                    error = failed
            if error is None:
                handled.append(delivery)
            elif not delivery.external:
                self.delivered(handled)
                raise PartitionStopped(delivery, error) from error
            else:
                log.error(
                    "handler failed on %s; dead-lettering it",
                    delivery.where(),
                    exc_info=error,
                )
                await self.dead_letter(
                    [(intake.raw[delivery.offset], f"handler failed: {error!r}")]
                )
                await self.worker.call(self.advance, name, position)
            recorded = position
        self.delivered(handled)
        if intake.last > recorded:
            await self.worker.call(self.advance, name, intake.last)

    def advance(self, name: str, position: int) -> None:
        """Record ``position`` for ``name`` unless it is recorded already."""
        if self.app.tracked_position(name) < position:
            self.app.record_position(name, position)
