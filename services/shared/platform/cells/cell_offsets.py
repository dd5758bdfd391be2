"""Where a new partition cell starts reading: where the service's one consumer stopped.

A cell commits its offsets under ``<group>.p<n>`` (``Settings.consumer_group``). The first
time a cell of partition n runs, that group has no offset; left alone, the cell would read
partition n from the beginning of each topic, and a deployment switched to ``PB_PARTITIONED``
would judge again every command its unpartitioned service had handled (its store's tracking
records are in the old store, not the cell's). :func:`seed_cell_offsets` copies, for each
input topic's partition n that the cell's group has no offset for, the offset the service's
own group committed there (none: the beginning, as for a new deployment); the service's
group is read only then, so a cell that ran before (a partition handed over) starts with one
offsets reader, not two. Offsets the cell's group already has are never touched (and
:func:`keep_offsets_alive` commits them again now and then, so that Kafka does not expire a
quiet partition's). Switching a running deployment is still a maintenance step
(``docs/scaling.md``): the cells start with empty stores, so tables must be closed first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from services.shared.platform.host.runner import ServiceHost
from services.shared.platform.kafka import client_options
from services.shared.platform.settings import Settings

log = logging.getLogger(__name__)


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
    cells: Callable[[], Iterable[ServiceHost[Any]]], stopping: asyncio.Event
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
