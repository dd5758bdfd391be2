"""The group's assignor for partitioned processes: move as few cells as a fair split allows.

Kafka's range assignor deals the partitions out afresh at every rebalance (in the order of
the members' random ids), so a process joining or leaving can move cells that had no reason
to move, and each move stops a cell (its last seal, its relay's backlog, its store closed)
and starts it elsewhere. :class:`StickyCellsAssignor` tells the group, in each member's
subscription (its ``user_data``), the partitions that member runs, and :func:`sticky_shares`
lets every member keep what it runs up to its fair share (the partition count divided among
the members, the remainder going to those that keep the most), and hands out only the rest.
The same partition numbers go with a member on every topic it subscribes to (co-partitioned
topics). A member's claim is bounded and checked: a partition claimed twice stays with the
first member in id order; unknown partitions are dropped.

Each process makes its own class (:func:`sticky_assignor`): aiokafka calls an assignor's
class methods, so a process's claim lives on its own class.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Iterable, Mapping
from typing import ClassVar

from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

log = logging.getLogger(__name__)

MAX_CLAIM_BYTES = 16_384
"""The most ``user_data`` read from a member (a claim of a few thousand partitions)."""


def sticky_shares(
    partitions: Collection[int], claims: Mapping[str, Collection[int]]
) -> dict[str, list[int]]:
    """Each member's partitions: what it claims, up to its fair share, and its share of the
    rest. Every partition goes to exactly one member; shares differ by one at most."""
    members = sorted(claims)
    if not members:
        return {}
    valid = set(partitions)
    taken: set[int] = set()
    kept: dict[str, list[int]] = {}
    for member in members:  # a partition claimed twice stays with the first member
        own = sorted(p for p in set(claims[member]) if p in valid and p not in taken)
        kept[member] = own
        taken.update(own)
    base, extra = divmod(len(valid), len(members))
    by_kept = sorted(members, key=lambda member: (-len(kept[member]), member))
    quota = {member: base + (1 if rank < extra else 0) for rank, member in enumerate(by_kept)}
    free = sorted(valid - taken)
    for member in members:
        while len(kept[member]) > quota[member]:
            free.append(kept[member].pop())  # its highest partitions go
    free.sort(reverse=True)
    for member in members:
        while len(kept[member]) < quota[member]:
            kept[member].append(free.pop())
    return {member: sorted(own) for member, own in kept.items()}


def decode_claim(user_data: bytes) -> list[int]:
    """A member's claim (a JSON list of partition numbers); anything else claims nothing."""
    if not user_data or len(user_data) > MAX_CLAIM_BYTES:
        return []
    try:
        claim = json.loads(user_data)
    except ValueError:
        return []
    if not isinstance(claim, list):
        return []
    return [p for p in claim if isinstance(p, int) and not isinstance(p, bool) and p >= 0]


class StickyCellsAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
    """Keeps each member's partitions where it can (see the module docstring)."""

    name = "pb-sticky-cells"
    version = 0
    owned: ClassVar[frozenset[int]] = frozenset()  # this process's; per class (sticky_assignor)

    @classmethod
    def assign(
        cls,
        cluster: ClusterMetadata,
        members: Mapping[str, ConsumerProtocolMemberMetadata],
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        claims = {member: decode_claim(meta.user_data) for member, meta in members.items()}
        topics = sorted({topic for meta in members.values() for topic in meta.subscription})
        assignment: dict[str, list[tuple[str, list[int]]]] = {member: [] for member in members}
        for topic in topics:
            partitions = cluster.partitions_for_topic(topic)
            if partitions is None:
                log.warning("no partition metadata for topic %s", topic)
                continue
            readers = {m: claims[m] for m, meta in members.items() if topic in meta.subscription}
            for member, share in sticky_shares(partitions, readers).items():
                assignment[member].append((topic, share))
        return {
            member: ConsumerProtocolMemberAssignment(cls.version, sorted(shares), b"")
            for member, shares in assignment.items()
        }

    @classmethod
    def metadata(cls, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        claim = json.dumps(sorted(cls.owned)).encode()
        return ConsumerProtocolMemberMetadata(cls.version, sorted(topics), claim)

    @classmethod
    def on_assignment(cls, assignment: ConsumerProtocolMemberAssignment) -> None:
        cls.owned = frozenset(tp.partition for tp in assignment.partitions())


def sticky_assignor() -> type[StickyCellsAssignor]:
    """An assignor class of this process's own (its claim is class state)."""
    return type("StickyCellsAssignor", (StickyCellsAssignor,), {"owned": frozenset()})
