"""The partitioned processes' assignor moves as few cells as a fair split allows.

Every move of a partition stops a cell (its last seal, its relay's backlog) and starts it
elsewhere; Kafka's range assignor deals everything afresh at each rebalance. ``sticky_shares``
must still give every partition to exactly one member, shares within one of each other.
"""

from __future__ import annotations

import itertools
import json

from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment

from services.shared.platform.sticky_cells import decode_claim, sticky_assignor, sticky_shares

TWELVE = range(12)


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
        first = sticky_shares(partitions, {name: [] for name in names})
        check_fair(first, partitions)
        joined = sticky_shares(partitions, {**first, "new": []})
        check_fair(joined, partitions)
        moved = sum(len(set(first[n]) - set(joined[n])) for n in names)
        assert moved == len(joined["new"])  # only the joiner's share moved


def test_bad_claims_claim_nothing_and_a_partition_claimed_twice_stays_with_one() -> None:
    assert decode_claim(b"not json") == [] and decode_claim(b'{"a": 1}') == []
    assert decode_claim(b"[1, -2, true, 3.5, 4]") == [1, 4]
    assert decode_claim(json.dumps(list(range(10_000))).encode()) == []  # over the bound
    shares = sticky_shares(range(4), {"a": [0, 1], "b": [1, 2, 99]})
    check_fair(shares, range(4))
    assert shares["a"] == [0, 1] and 1 not in shares["b"] and 2 in shares["b"]


def test_each_process_claims_what_it_was_given_on_its_own_class() -> None:
    mine, other = sticky_assignor(), sticky_assignor()
    given = ConsumerProtocolMemberAssignment(0, [("t", [2, 5])], b"")
    mine.on_assignment(given)
    assert json.loads(mine.metadata(["t"]).user_data) == [2, 5]
    assert json.loads(other.metadata(["t"]).user_data) == []  # not shared between processes
