"""Against real Kafka: the processes of a partitioned service split its partition numbers.

``cells/membership.py``: each process is a member of the service's consumer group; the group
gives each a disjoint share of the partitions that together cover them all, gives a joining
member a share (taken from the others), and moves a leaving member's share to the rest. The
members never fetch a record (their partitions are paused): the cells read them. A new
cell starts where the service's one consumer stopped (``cells/membership.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from contracts import TABLE_COMMANDS
from services.shared.platform.cells.membership import GroupMembership, seed_cell_offsets
from services.shared.platform.kafka import client_options
from services.shared.platform.settings import Settings
from tests.integration.platform.kafka_tools import settings_for

pytestmark = [pytest.mark.kafka]

ALL = frozenset(range(3))  # the test topics' partitions (settings_for's default count)


class Member:
    """One process's membership, running until stopped."""

    def __init__(self, settings: Settings) -> None:
        self.membership = GroupMembership(settings, TABLE_COMMANDS)
        self.stopping = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    @property
    def owned(self) -> frozenset[int]:
        return self.membership.owned

    async def start(self) -> None:
        await self.membership.start()
        self.task = asyncio.create_task(self.membership.run(self.stopping))

    async def stop(self) -> None:
        self.stopping.set()
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        await self.membership.stop()


@contextlib.asynccontextmanager
async def members(settings: Settings, count: int) -> AsyncIterator[list[Member]]:
    started = [Member(settings) for _ in range(count)]
    try:
        yield started
    finally:
        for member in started:
            await member.stop()


async def until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


def split(shares: list[frozenset[int]]) -> bool:
    """Every partition owned by exactly one member, every member owning one at least."""
    return all(shares) and sum(len(s) for s in shares) == len(ALL) and set().union(*shares) == ALL


async def test_processes_split_the_partitions_take_a_joiner_in_and_cover_a_leaver(
    kafka_bootstrap: str,
) -> None:
    settings = settings_for("dealing", kafka_bootstrap)
    async with members(settings, 3) as (first, second, third):
        await first.start()
        await until(lambda: first.owned == ALL, "the only member to own every partition")

        await second.start()  # joins: the group takes a share from the first
        await until(lambda: split([first.owned, second.owned]), "two disjoint shares")

        before = {"first": first.owned, "second": second.owned}
        rounds = {"first": first.membership.assignments, "second": second.membership.assignments}
        await third.start()
        await until(
            lambda: (
                split([first.owned, second.owned, third.owned])
                and first.membership.assignments > rounds["first"]
                and second.membership.assignments > rounds["second"]
            ),
            "three disjoint shares, the group settled",
        )
        # Sticky (KIP-54): the joiner's share comes from the others, nothing else moves.
        assert first.owned <= before["first"] and second.owned <= before["second"]
        for member in (first, second, third):  # members only: nothing is fetched
            consumer = member.membership.consumer
            assert consumer is not None
            assert consumer.paused() == consumer.assignment()

        before = {"first": first.owned, "third": third.owned}
        await second.stop()  # leaves: its partition goes to the others
        await until(lambda: split([first.owned, third.owned]), "the leaver's share taken over")
        assert before["first"] <= first.owned and before["third"] <= third.owned


async def committed(settings: Settings, group: str, tp: TopicPartition) -> int | None:
    consumer = AIOKafkaConsumer(**client_options(settings), group_id=group)
    consumer.assign([tp])
    await consumer.start()
    try:
        return await consumer.committed(tp)
    finally:
        await consumer.stop()


async def commit(settings: Settings, group: str, tp: TopicPartition, offset: int) -> None:
    consumer = AIOKafkaConsumer(
        **client_options(settings), group_id=group, enable_auto_commit=False
    )
    consumer.assign([tp])
    await consumer.start()
    try:
        await consumer.commit({tp: OffsetAndMetadata(offset, "")})
    finally:
        await consumer.stop()


async def test_a_new_cell_starts_where_the_services_consumer_stopped_and_then_keeps_its_own(
    kafka_bootstrap: str,
) -> None:
    """Switching to PB_PARTITIONED must not judge again what the one consumer handled."""
    settings = settings_for("dealing", kafka_bootstrap)
    tp = TopicPartition(settings.topic(TABLE_COMMANDS), 1)
    cell_group = settings.for_partition(1).consumer_group
    await commit(settings, settings.consumer_group, tp, 5)

    assert await seed_cell_offsets(settings, 1, [TABLE_COMMANDS]) == {tp: 5}
    assert await committed(settings, cell_group, tp) == 5
    other = TopicPartition(settings.topic(TABLE_COMMANDS), 0)  # nothing committed there
    assert await seed_cell_offsets(settings, 0, [TABLE_COMMANDS]) == {}
    assert await committed(settings, settings.for_partition(0).consumer_group, other) is None

    await commit(settings, settings.consumer_group, tp, 9)  # the cell's own offsets win now
    assert await seed_cell_offsets(settings, 1, [TABLE_COMMANDS]) == {}
    assert await committed(settings, cell_group, tp) == 5
