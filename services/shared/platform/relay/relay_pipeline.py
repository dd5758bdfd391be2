"""Sending one relay batch: a sender per topic-partition, one record batch at a time, in order.

Each topic-partition of a relay batch has one sender task that hands the producer one record
batch (up to the producer's 256 KiB) and awaits its acknowledgement before building and
sending the next (``relay_producer.py``); partitions are sent in parallel. When a batch fails,
that partition sends nothing more (nor do the others start new batches) and the relay batch
fails without recording a position. So in every partition what was appended is a prefix, in
log order, of the relay batch's records there (a quarantined record's place is taken by its
record on the dead-letters topic: ``relay_refusals.py``); republishing the batch from the
recorded position then appends the rest after duplicates that consumers skip: no consumer ever
sees a record whose predecessor in the log was not appended. Recording the position only once
the whole relay batch is acknowledged is therefore enough.

A batch the broker refuses for good (:data:`relay_refusals.REFUSALS`) is sent again one record
per batch; a record refused alone is quarantined and the partition goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from services.shared.platform.relay.relay_producer import PartitionRecords, RelayProducer
from services.shared.platform.relay.relay_records import OutgoingRecord, Quarantine

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Published:
    """What one relay batch delivered (acknowledged), for the counters and hooks."""

    acknowledged: list[OutgoingRecord] = field(default_factory=list)
    quarantined: list[OutgoingRecord] = field(default_factory=list)  # quarantine records


class Pipeline:
    """The partition senders of (part of) a relay batch; ``finish`` awaits them all."""

    def __init__(
        self, producer: RelayProducer, quarantine: Quarantine, published: Published
    ) -> None:
        self.producer = producer
        self.quarantine = quarantine
        self.published = published
        self.partitions: dict[tuple[str, int], PartitionRecords] = {}
        self.closing = False
        self.error: BaseException | None = None

    async def add(self, records: Sequence[OutgoingRecord]) -> None:
        touched: dict[tuple[str, int], PartitionRecords] = {}
        for record in records:
            if record.replaces is not None:
                self.published.quarantined.append(record)
            tp = (record.topic, await self.producer.partition_of(record))
            part = self.partitions.get(tp)
            if part is None:
                part = self.partitions[tp] = PartitionRecords(*tp)
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

    async def _send(self, part: PartitionRecords) -> None:
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
                refusal, end = await self.producer.deliver(part, start)
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
                self.producer.name,
                original.message.type,
                original.message.event_id,
                refusal,
                original.notification_id,
                original.index,
            )
            return
        await self.add([self.quarantine(record, refusal)])
