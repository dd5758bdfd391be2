"""Partitioned benchmark runs: settings, when a service's processes have settled their
partitions, where the tables land, and the per-process tables."""

from __future__ import annotations

import pytest

from services.dev.bench.instances import (
    DEFAULT_PARTITIONS,
    balanced_tables,
    cells_of,
    parse_instances,
    parse_partitions,
    partitions_settled,
    process_memory_table,
    shares,
    spread,
    spread_lines,
)
from services.shared.platform.kafka import table_partition

PREFIX = "2026-12-01 18:00:00,000 INFO [settlement] services.shared.platform"


def owns(partitions: str) -> str:
    return f"{PREFIX}.group_membership: settlement: this process owns partitions {partitions}"


def serving(partition: int) -> str:
    return f"{PREFIX}.partitioned: settlement: partition {partition}: serving"


def moved(partition: int) -> str:
    return f"{PREFIX}.partitioned: settlement: partition {partition} moved away: stopping its cell"


def test_instance_counts_and_partitions_are_read_from_their_variables() -> None:
    assert parse_instances("") == ()
    assert parse_instances("1, 2") == (1, 2)
    assert parse_instances("2,1,2") == (2, 1, 2)
    assert parse_instances("unpartitioned,1,2") == (None, 1, 2)
    for wrong in ("0", "two", "1,-2"):
        with pytest.raises(ValueError, match="PB_BENCH_INSTANCES"):
            parse_instances(wrong)
    assert parse_partitions("") == DEFAULT_PARTITIONS == 6
    assert parse_partitions(" 12 ") == 12
    with pytest.raises(ValueError, match="PB_BENCH_PARTITIONS"):
        parse_partitions("0")


def test_a_process_serves_the_cells_it_started_and_did_not_hand_away() -> None:
    log = "\n".join([owns("[0, 1, 2, 3]"), *(serving(p) for p in range(4)), owns("[0, 1]")])
    assert cells_of(log) == (frozenset({0, 1}), frozenset({0, 1, 2, 3}))
    log += "\n" + moved(2) + "\n" + moved(3)
    assert cells_of(log) == (frozenset({0, 1}), frozenset({0, 1}))
    assert cells_of("starting\n") == (None, frozenset())
    assert cells_of(owns("none")) == (frozenset(), frozenset())


def test_partitions_are_settled_once_each_is_owned_once_and_served_by_its_owner() -> None:
    first = [owns("[0, 1, 2, 3]"), *(serving(p) for p in range(4))]
    assert partitions_settled(["\n".join(first)], 4)
    assert not partitions_settled(["\n".join(first)], 6), "partitions 4 and 5 unowned"
    # A second process joins: the first gives 2 and 3 away, the second waits for their leases.
    first.append(owns("[0, 1]"))
    second = [owns("[2, 3]")]
    assert not partitions_settled(["\n".join(first), "\n".join(second)], 4)
    first += [moved(2), moved(3)]
    assert not partitions_settled(["\n".join(first), "\n".join(second)], 4)
    second += [serving(2), serving(3)]
    assert partitions_settled(["\n".join(first), "\n".join(second)], 4)
    assert not partitions_settled(["\n".join(first), "\n".join(second), ""], 4), "no assignment"
    both = [owns("[0, 1]"), serving(0), serving(1)]
    assert not partitions_settled(["\n".join(both), "\n".join(both)], 2), "owned twice"


def test_tables_land_where_kafkas_default_partitioner_puts_their_key() -> None:
    # Java's murmur2 of "foobar" and "21" is -790,332,482 and -973,932,308 (Kafka's UtilsTest);
    # the partitioner keeps the positive bits, modulo the partition count.
    assert table_partition("foobar", 6) == (-790_332_482 & 0x7FFFFFFF) % 6 == 0
    assert table_partition("21", 12) == (-973_932_308 & 0x7FFFFFFF) % 12
    assert spread(["a", "b", "a"], 1) == [2]


def test_balanced_tables_give_every_partition_and_both_halves_their_share() -> None:
    for tables, partitions, expected in ((10, 6, [2, 2, 1, 2, 2, 1]), (100, 6, [17, 17, 16] * 2)):
        ids = balanced_tables("run.T10", tables, partitions)
        assert len(set(ids)) == tables and all(i.startswith("run.T10.t") for i in ids)
        assert spread(ids, partitions) == expected
        assert shares(spread(ids, partitions), 2) == [tables // 2, tables // 2]
    assert balanced_tables("run", 3, 6) == balanced_tables("run", 3, 6), "the same ids each time"


def test_the_range_assignor_gives_the_first_processes_the_spare_partitions() -> None:
    assert shares([1, 2, 3, 4, 5, 6], 2) == [6, 15]
    assert shares([1, 2, 3, 4], 3) == [3, 3, 4]
    assert shares([5, 5], 1) == [10]


def test_the_memory_table_lists_every_process_of_a_service() -> None:
    mib = 2**20
    table = process_memory_table(
        {
            "sqlite, 1 proc": {"shoe": 90 * mib, "settlement": 200 * mib},
            "sqlite, 2 procs": {
                "shoe-1": 80 * mib,
                "shoe-2": 81 * mib,
                "settlement-1": 120 * mib,
                "settlement-2": 130 * mib,
            },
        },
        "10 tables",
    )
    lines = table.splitlines()
    assert lines[2] == "| Run | shoe | settlement |"
    assert lines[4] == "| sqlite, 1 proc | 90 MiB | 200 MiB |"
    assert lines[5] == "| sqlite, 2 procs | 80 + 81 MiB | 120 + 130 MiB |"


def test_spread_lines_name_tables_per_partition_and_per_process() -> None:
    ids = balanced_tables("run", 10, 6)
    assert spread_lines([(1, ids), (2, ids)], 6) == [
        "- 10 tables on 6 partitions: 2 / 2 / 1 / 2 / 2 / 1 per partition.",
        "- 10 tables on 6 partitions: 2 / 2 / 1 / 2 / 2 / 1 per partition; "
        "5 / 5 per process (2 processes).",
    ]
