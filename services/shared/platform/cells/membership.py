"""A partitioned process's membership of its consumer group, and where a new cell starts reading.

:class:`GroupMembership` is a consumer of the service's first input topic that fetches nothing:
aiokafka's sticky assignor (a class per membership: it keeps state) splits the partition
numbers fairly and moves as few as it can. A new cell starts at the offsets the service's one
consumer committed (:func:`seed_cell_offsets`), and cells' offsets are committed again now and
then (a group without members loses them after the broker's retention).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.sticky.sticky_assignor import (
    StickyAssignorMemberMetadataV1,
    StickyPartitionAssignor,
)
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata
from aiokafka.structs import OffsetAndMetadata

from services.shared.platform.host.faststream import KafkaService
from services.shared.platform.kafka import client_options
from services.shared.platform.settings import Settings

log = logging.getLogger(__name__)

MEMBERSHIP_POLL_MS = 500


class StickyCellsAssignor(StickyPartitionAssignor):  # type: ignore[misc]
    @classmethod
    def parse_member_metadata(
        cls, metadata: ConsumerProtocolMemberMetadata
    ) -> StickyAssignorMemberMetadataV1:
        """The library's, except that user data decoding to a null array claims nothing (the
        library raises TypeError then, and the group's rebalance fails with it)."""
        try:
            return super().parse_member_metadata(metadata)
        except TypeError:
            nothing = ConsumerProtocolMemberMetadata(metadata.version, metadata.subscription, b"")
            return super().parse_member_metadata(nothing)


def sticky_assignor() -> type[StickyCellsAssignor]:
    """aiokafka's sticky assignor, as a class of this membership's own (see the module)."""
    fresh = {"member_assignment": None, "generation": StickyPartitionAssignor.generation}
    return type("StickyCellsAssignor", (StickyCellsAssignor,), fresh)


class GroupMembership(ConsumerRebalanceListener):  # type: ignore[misc]
    """The process's membership of its service's consumer group: which partitions it owns."""

    def __init__(self, settings: Settings, topic: str) -> None:
        self.settings = settings
        self.topic = settings.topic(topic)
        self.owned: frozenset[int] = frozenset()
        self.assignments = 0  # rebalances this member took part in (0: not yet a member)
        self.changed = asyncio.Event()
        self.consumer: AIOKafkaConsumer | None = None

    async def start(self) -> None:
        settings = self.settings
        self.consumer = consumer = AIOKafkaConsumer(
            **client_options(settings),
            group_id=settings.consumer_group,
            client_id=f"pb-{settings.service}-member",
            enable_auto_commit=False,
            # sticky (as few cells moved as a fair split allows); range while a member that
            # does not speak it is in the group (an older version's "pb-sticky-cells")
            partition_assignment_strategy=(sticky_assignor(), RangePartitionAssignor),
        )
        consumer.subscribe([self.topic], listener=self)
        await consumer.start()

    async def run(self, stopping: asyncio.Event) -> None:
        """Keep the membership alive (a member that stops polling is dropped)."""
        consumer = self.consumer
        if consumer is None:
            raise RuntimeError("membership not started")
        while not stopping.is_set():
            await consumer.getmany(timeout_ms=MEMBERSHIP_POLL_MS)

    async def stop(self) -> None:
        """Leave the group: the other processes take this one's partitions."""
        consumer, self.consumer = self.consumer, None
        if consumer is not None:
            await consumer.stop()

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        """Nothing stops here: a cell stops once the next assignment no longer has it."""

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        partitions = list(assigned)
        if self.consumer is not None and partitions:
            self.consumer.pause(*partitions)  # membership only: the cells read the records
        self.owned = frozenset(tp.partition for tp in partitions if tp.topic == self.topic)
        log.info(
            "%s: this process owns partitions %s",
            self.settings.service,
            sorted(self.owned) or "none",
        )
        self.assignments += 1
        self.changed.set()


async def seed_cell_offsets(
    settings: Settings, partition: int, inputs: Sequence[str]
) -> dict[TopicPartition, int]:
    """Give partition ``partition``'s cell the service group's offsets it lacks; returns them."""
    cell = settings.for_partition(partition)
    partitions = [TopicPartition(settings.topic(topic), partition) for topic in inputs]
    seeded: dict[TopicPartition, int] = {}
    async with contextlib.AsyncExitStack() as stack:
        own = await _offsets_reader(settings, cell.consumer_group, partitions, stack)
        lacking = [tp for tp in partitions if await own.committed(tp) is None]
        if not lacking:
            return seeded  # not the cell's first run: the service's group is not asked
        service = await _offsets_reader(settings, settings.consumer_group, lacking, stack)
        for tp in lacking:
            offset = await service.committed(tp)
            if offset is not None:
                seeded[tp] = offset
        if seeded:
            await own.commit({tp: OffsetAndMetadata(offset, "") for tp, offset in seeded.items()})
            log.info(
                "%s: partition %d's cell starts where the service's consumer stopped: %s",
                settings.service,
                partition,
                ", ".join(f"{tp.topic} at {offset}" for tp, offset in sorted(seeded.items())),
            )
    return seeded


async def _offsets_reader(
    settings: Settings,
    group: str,
    partitions: list[TopicPartition],
    stack: contextlib.AsyncExitStack,
) -> AIOKafkaConsumer:
    """A started reader of ``group``'s offsets of ``partitions``, stopped when ``stack`` closes."""
    consumer = AIOKafkaConsumer(
        **client_options(settings),
        group_id=group,
        client_id=f"pb-{settings.service}-offsets",
        enable_auto_commit=False,
    )
    consumer.assign(partitions)  # no group membership: offsets only
    await consumer.start()
    stack.push_async_callback(consumer.stop)
    return consumer


async def keep_offsets_alive(
    cells: Callable[[], Iterable[KafkaService[Any]]], stopping: asyncio.Event
) -> None:
    """Commit every cell's offsets again now and then: a cell's group has no members (its
    consumer is assigned), so Kafka expires each offset ``offsets.retention.minutes`` (7 days
    by default) after its last commit, and a quiet partition would lose its place."""
    while not stopping.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), OFFSETS_REFRESH_SECONDS)
        if stopping.is_set():
            return
        for cell in cells():
            consumer = cell.consumer.consumer if cell.consumer is not None else None
            if consumer is None:
                continue
            try:
                offsets = {}
                for tp in consumer.assignment():
                    committed = await consumer.committed(tp)
                    if committed is not None:
                        offsets[tp] = committed
                if offsets:
                    await consumer.commit(offsets)
            except Exception as error:  # the next round tries again
                log.warning("committing a cell's offsets again failed (%r); next round", error)


OFFSETS_REFRESH_SECONDS = 3600.0
