"""The partitioned processes' assignor moves as few cells as a fair split allows.

Every move of a partition stops a cell (its last seal, its relay's backlog) and starts it
elsewhere; Kafka's range assignor deals everything afresh at each rebalance. The group's
assignor (aiokafka's sticky one, ``group_membership.sticky_assignor``) must still give every
partition to exactly one member, shares within one of each other. ``sticky_shares`` runs a
rebalance as the group leader does: each member's claim is what it was given last.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping

from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyAssignorUserDataV1
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from services.shared.platform.cells.membership import sticky_assignor

TWELVE = range(12)


class Cluster:
    """The leader's metadata: one topic, ``t``."""

    def __init__(self, partitions: Collection[int]) -> None:
        self.partitions = set(partitions)

    def topics(self) -> set[str]:
        return {"t"}

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return self.partitions if topic == "t" else None


def joining(claim: list[int] | None) -> ConsumerProtocolMemberMetadata:
    """A member's subscription as the leader decodes it, claiming what it was given last."""
    assignor = sticky_assignor()
    if claim is not None:
        assignor.on_assignment(ConsumerProtocolMemberAssignment(0, [("t", claim)], b""))
    return ConsumerProtocolMemberMetadata.decode(assignor.metadata(["t"]).encode())


def sticky_shares(
    partitions: Collection[int], claims: Mapping[str, list[int] | None]
) -> dict[str, list[int]]:
    """Each member's partitions after a rebalance (members in id order, as the broker lists)."""
    members = {member: joining(claims[member]) for member in sorted(claims)}
    assignment = sticky_assignor().assign(Cluster(partitions), members)
    return {m: [p for _, ps in a.assignment for p in ps] for m, a in assignment.items()}


def check_fair(shares: dict[str, list[int]], partitions: range) -> None:
    everyone = sorted(p for share in shares.values() for p in share)
    assert everyone == list(partitions)  # each exactly once
    sizes = [len(share) for share in shares.values()]
    assert max(sizes) - min(sizes) <= 1


def test_a_joining_member_takes_only_its_share_and_the_others_keep_the_rest() -> None:
    before = {"a": list(range(6)), "b": list(range(6, 12))}
    after = sticky_shares(TWELVE, {**before, "c": []})
    check_fair(after, TWELVE)
    assert len(after["c"]) == 4
    for member in ("a", "b"):  # 2 moved from each, 4 kept each
        assert set(after[member]) <= set(before[member]) and len(after[member]) == 4


def test_a_leaving_members_partitions_go_to_the_others_and_nothing_else_moves() -> None:
    before = {"a": [0, 1, 2, 3], "b": [4, 5, 6, 7], "c": [8, 9, 10, 11]}
    after = sticky_shares(TWELVE, {"a": before["a"], "c": before["c"]})
    check_fair(after, TWELVE)
    assert set(before["a"]) <= set(after["a"]) and set(before["c"]) <= set(after["c"])


def test_every_split_is_fair_and_keeps_what_each_member_may_keep() -> None:
    """Exhaustive over small groups: previous owners keep min(what they had, their share)."""
    for count, members in itertools.product(range(1, 9), range(1, 5)):
        partitions = range(count)
        names = [f"m{i}" for i in range(members)]
        first = sticky_shares(partitions, {name: None for name in names})
        check_fair(first, partitions)
        joined = sticky_shares(partitions, {**first, "new": None})
        check_fair(joined, partitions)
        moved = sum(len(set(first[n]) - set(joined[n])) for n in names)
        assert moved == len(joined["new"])  # only the joiner's share moved
        for leaver in names[1:]:  # and a leaver's share only goes to the others
            left = sticky_shares(partitions, {n: first[n] for n in names if n != leaver})
            check_fair(left, partitions)
            assert all(set(first[n]) <= set(left[n]) for n in names if n != leaver)


def test_bad_claims_claim_nothing_and_a_partition_claimed_twice_stays_with_one() -> None:
    for user_data in (b"not json", b'{"a": 1}', b"\xff" * 64):
        junk = ConsumerProtocolMemberMetadata(0, ["t"], user_data)
        assert sticky_assignor().parse_member_metadata(junk).partitions == []
    shares = sticky_shares(range(4), {"a": [0, 1], "b": [1, 2, 99]})  # 99: no such partition
    check_fair(shares, range(4))
    assert shares["a"] == [0, 1] and 1 not in shares["b"] and 2 in shares["b"]


def test_each_process_claims_what_it_was_given_on_its_own_class() -> None:
    mine, other = sticky_assignor(), sticky_assignor()
    given = ConsumerProtocolMemberAssignment(0, [("t", [2, 5])], b"")
    mine.on_assignment(given)
    claim = StickyAssignorUserDataV1.decode(mine.metadata(["t"]).user_data)
    assert [tuple(p) for p in claim.previous_assignment] == [("t", [2, 5])]
    assert other.metadata(["t"]).user_data == b""  # not shared between processes
