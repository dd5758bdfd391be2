"""A partitioned deployment's audit: each partition's three stores checked as one closed
history, one report over all, every finding naming its partition, incomplete partitions and
another partition's anchors never taken for a store's own.

Two partitions (of two) played in memory by the real Applications, each system the cells of
one partition, with tables whose id hashes (murmur2, as the producer) into that partition.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from aiokafka.partitioner import DefaultPartitioner

from services.dev.simulation import LocalSystem, play
from services.shared.platform.kafka import table_partition
from services.shared.platform.security import Signer
from services.tools.audit.anchor_reader import AnchorRecords
from services.tools.audit.auditor import audit
from services.tools.audit.by_partition import audit_partitions, checkpoint_of
from services.tools.audit.findings import Code, Severity
from services.tools.audit.memory_stores import ListStore
from services.tools.audit.partitions import (
    archive_findings,
    archived_stores,
    layout_findings,
)
from services.tools.audit.report import to_html, to_json, to_text
from services.tools.audit.result import AuditReport
from services.tools.audit.stores import SERVICES, Row, StoreReader
from tests.unit.audit.anchoring import Record, read, relay_anchors, seal_rows, signers
from tests.unit.audit.helpers import Played, edit_state, only, tables_of

PARTITIONS = 2


@pytest.fixture(scope="module")
def cells() -> dict[int, Played]:
    """Each partition's stores: its tables played, every store sealed after each table."""
    out = {}
    for partition in range(PARTITIONS):
        system = LocalSystem.in_memory()
        logs = {}
        for seed, table in enumerate(tables_of(partition, PARTITIONS), start=1 + 10 * partition):
            logs[table] = play(system, table, 6, bets_per_coup=4, decks=1, void_every=4, seed=seed)
            system.pump()
            system.seal()
        out[partition] = Played(system, logs)
    return out


@pytest.fixture(scope="module")
def keys() -> tuple[dict[str, Signer], Any]:
    return signers()


def rows_of(cells: Mapping[int, Played]) -> dict[int, dict[str, list[Row]]]:
    return {partition: played.rows() for partition, played in cells.items()}


def stores_of(rows: Mapping[str, list[Row]]) -> dict[str, StoreReader]:
    return {service: ListStore(service, list(r)) for service, r in rows.items()}


def run(
    rows: Mapping[int, Mapping[str, list[Row]]],
    anchors: AnchorRecords | None = None,
    expected: int | None = PARTITIONS,
) -> AuditReport:
    layout = {n: set(stores) for n, stores in rows.items()}

    def open_partition(number: int) -> Mapping[str, StoreReader]:
        return stores_of(rows[number])

    return audit_partitions(
        sorted(rows), open_partition, layout_findings(layout, expected), anchors=anchors
    )


def anchors_of(
    cells: Mapping[int, Played], keys: tuple[dict[str, Signer], Any], partitions: list[int]
) -> list[Record]:
    made = keys[0]
    return [
        record
        for n in partitions
        for s in SERVICES
        for record in relay_anchors(cells[n].system.apps[s], s, made[s], partition=n)
    ]


def test_the_tables_hash_into_their_partition_as_the_producer_puts_them() -> None:
    producer = DefaultPartitioner()
    for table in ("t1", "t2", "t3", "baccarat-07", "salon-privé"):
        expected = producer(table.encode(), list(range(3)), list(range(3)))
        assert table_partition(table, 3) == expected
    assert (
        tables_of(0, PARTITIONS)
        and tables_of(1, PARTITIONS)
        and not set(tables_of(0, PARTITIONS)) & set(tables_of(1, PARTITIONS))
    )


def test_every_partition_is_audited_and_the_totals_are_over_all(
    cells: dict[int, Played],
) -> None:
    rows = rows_of(cells)
    report = run(rows)
    assert report.findings == []
    assert set(report.stores) == {f"{s}-p{n}" for s in SERVICES for n in range(PARTITIONS)}
    assert report.partitions is not None and sorted(report.partitions) == [0, 1]
    parts = report.partitions
    alone = [audit(stores_of(rows[n])) for n in range(PARTITIONS)]
    for n in range(PARTITIONS):
        assert parts[n].checked == alone[n].checked and parts[n].checked["coups"] >= 12
        assert parts[n].events == alone[n].total_events == sum(len(r) for r in rows[n].values())
    assert report.checked["coups"] == sum(a.checked["coups"] for a in alone)
    assert report.totals.overall.staked == sum(a.totals.overall.staked for a in alone) > 0
    assert report.totals.overall.paid == sum(a.totals.overall.paid for a in alone)
    assert report.totals.tables == {**alone[0].totals.tables, **alone[1].totals.tables}
    assert set(report.totals.tables) == set(tables_of(0, PARTITIONS)) | set(
        tables_of(1, PARTITIONS)
    )
    text = to_text(report)
    assert "Partitions (2;" in text and "partition 1: stores shoe, dealing, settlement" in text
    shown = json.loads(to_json(report))["partitions"]["1"]
    assert shown["checked"]["coups"] == alone[1].checked["coups"]
    assert "<h2>Partitions</h2>" in to_html(report)


def test_a_tampered_partition_store_is_found_and_named_with_its_partition(
    cells: dict[int, Played],
) -> None:
    rows = rows_of(cells)
    settlement = rows[1]["settlement"]
    i = next(i for i, row in enumerate(settlement) if row.topic.endswith("CoupSettled"))

    def richer(state: dict[str, Any]) -> None:
        state["paid"] = int(str(state.get("paid", 0))) + 1000

    settlement[i] = edit_state(settlement[i], richer)
    report = run(rows)
    assert report.errors
    assert {f.partition for f in report.findings} == {1}
    altered = only(report, Code.ROW_ALTERED)
    assert altered and altered[0].store == "settlement" and altered[0].partition == 1
    assert "partition 1, settlement store" in str(altered[0])
    assert report.partitions is not None
    assert report.partitions[0].errors == 0 and report.partitions[1].errors >= 1


def test_a_partition_missing_a_store_is_an_error() -> None:
    found = {0: set(SERVICES), 1: {"shoe", "dealing"}}
    (missing,) = layout_findings(found)
    assert (missing.severity, missing.code) == (Severity.ERROR, Code.PARTITION_MISSING)
    assert (missing.partition, missing.store) == (1, "settlement")
    assert "no settlement store" in missing.message


def test_a_gap_in_the_partitions_and_a_short_count_are_errors() -> None:
    gap = layout_findings({0: set(SERVICES), 2: set(SERVICES)})
    assert {(f.partition, f.store) for f in gap} == {(1, s) for s in SERVICES}
    short = layout_findings({0: set(SERVICES)}, expected=2)
    assert {(f.partition, f.store) for f in short} == {(1, s) for s in SERVICES}
    beyond = layout_findings({0: set(SERVICES), 1: set(SERVICES)}, expected=1)
    assert [(f.code, f.partition) for f in beyond] == [(Code.PARTITION_MISSING, 1)]
    assert layout_findings({0: set(SERVICES), 1: set(SERVICES)}, expected=2) == []


def test_a_partition_store_with_archives_but_no_store_is_an_error(tmp_path: Any) -> None:
    """Only partition stores' archive names count; one missing store is said once."""
    for name in ("shoe-p0", "settlement-p1", "dealing-p2", "shoe", "shoe-p3-x", "shoe-p04"):
        (tmp_path / f"{name}-2026-11-30.jsonl.gz").write_bytes(b"")
    (tmp_path / "shoe-p3-2026-11-30.jsonl.gz.sha256").write_bytes(b"")
    archives = archived_stores(tmp_path)
    assert archives == {0: {"shoe"}, 1: {"settlement"}, 2: {"dealing"}}
    found = {0: set(SERVICES), 1: {"shoe", "dealing"}}
    layout = layout_findings(found)
    (gone,) = archive_findings(found, archives, layout)
    assert (gone.code, gone.partition, gone.store) == (Code.PARTITION_MISSING, 2, "dealing")
    assert "daily archives of its dealing store but no such store" in gone.message
    assert archived_stores(tmp_path / "none") == {}


def test_an_audit_missing_a_partition_store_fails(cells: dict[int, Played]) -> None:
    rows = rows_of(cells)
    del rows[0]["dealing"]
    report = run(rows)
    missing = only(report, Code.PARTITION_MISSING)
    assert [(f.partition, f.store) for f in missing] == [(0, "dealing")]
    assert report.errors and "dealing-p0" not in report.stores
    assert report.partitions is not None  # the partition's count has its missing store too
    assert report.partitions[0].errors == sum(f.partition == 0 for f in report.errors)
    assert report.partitions[1].errors == 0


def test_each_partition_matches_its_own_anchors_on_the_shared_topic(
    cells: dict[int, Played], keys: tuple[dict[str, Signer], Any]
) -> None:
    """Both partitions' cells anchor seals 1 and 2 of each service under the same key: the
    auditor keeps them apart (one partition's anchors would otherwise 'differ' from the
    other's)."""
    anchored = read(keys[1], anchors_of(cells, keys, [0, 1]))
    report = run(rows_of(cells), anchored)
    assert report.findings == []
    assert report.anchors is not None
    for n in range(PARTITIONS):
        summary = report.anchors[f"settlement-p{n}"]
        assert (summary.anchors, summary.matched) == (2, 2)
    assert "settlement-p1: anchored head seal 2" in to_text(report)


def test_an_anchor_of_partition_1_never_vouches_for_partition_0(
    cells: dict[int, Played], keys: tuple[dict[str, Signer], Any]
) -> None:
    anchored = read(keys[1], anchors_of(cells, keys, [1]))
    report = run(rows_of(cells), anchored)
    assert report.anchors is not None
    for service in SERVICES:
        assert report.anchors[f"{service}-p0"].matched == 0
        assert report.anchors[f"{service}-p1"].matched == 2
    unanchored = only(report, Code.SEAL_NOT_ANCHORED)
    assert {(f.partition, f.store) for f in unanchored} == {(0, s) for s in SERVICES}


def test_a_truncated_partition_store_is_found_by_its_own_anchors(
    cells: dict[int, Played], keys: tuple[dict[str, Signer], Any]
) -> None:
    rows = rows_of(cells)
    dealing = rows[0]["dealing"]
    last_seal = seal_rows(dealing)[-1]
    rows[0]["dealing"] = [r for r in dealing if r.notification_id < last_seal.notification_id]
    report = run(rows, read(keys[1], anchors_of(cells, keys, [0, 1])))
    (missing,) = only(report, Code.ANCHOR_MISSING_IN_STORE)
    assert (missing.partition, missing.store, missing.severity) == (0, "dealing", Severity.ERROR)


def test_a_deleted_partition_store_its_anchors_vouch_for_is_an_error(
    cells: dict[int, Played], keys: tuple[dict[str, Signer], Any]
) -> None:
    rows = rows_of(cells)
    del rows[1]["settlement"]
    report = run(rows, read(keys[1], anchors_of(cells, keys, [0, 1])))
    anchored = only(report, Code.ANCHOR_MISSING_IN_STORE)
    assert [(f.partition, f.store) for f in anchored] == [(1, "settlement")]
    assert "2 seals of the settlement store of partition 1 are anchored" in anchored[0].message


def test_each_partition_has_its_checkpoint_beside_the_one_given(tmp_path: Any) -> None:
    given = tmp_path / "audit.json"
    assert checkpoint_of(given, 0) == tmp_path / "audit-p0.json"
    assert checkpoint_of(tmp_path / "daily", 12) == tmp_path / "daily-p12"
