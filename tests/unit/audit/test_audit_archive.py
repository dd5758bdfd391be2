"""Daily archives: the audit reads them and then the hot store as one sealed history.

A table plays 40 coups, sealed after coup 20 and at the end; the two seals' spans are
written as two days' archives. Read with the hot store (whole, or with the archived rows
removed), the audit is the one of the store alone; a changed row in an archive is found by
the seals (its file re-digested), and a file that does not match its digest is refused.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from services.dev.simulation import LocalSystem, play
from services.shared.platform.store import LEDGER_ID
from services.tools.audit.archive import ArchiveDamaged, ArchiveStore, write_day, write_span
from services.tools.audit.auditor import audit
from services.tools.audit.findings import Code
from services.tools.audit.memory_stores import ListStore
from services.tools.audit.stores import SERVICES, Row
from services.tools.history.from_store import read_json
from tests.unit.audit.helpers import Played, redigest, streamed

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def rows() -> dict[str, list[Row]]:
    system = LocalSystem.in_memory()

    def after(number: int) -> None:
        if number == 20:
            system.pump()
            system.seal()

    play(system, "t1", 40, bets_per_coup=4, decks=1, void_every=9, batch=2, seed=4, on_coup=after)
    system.pump()
    system.seal()
    return Played(system, {}).rows()


def _archive(rows: dict[str, list[Row]], folder: Path) -> dict[str, int]:
    """Two days per store, one per seal; the last archived notification id per store."""
    last = {}
    for service in SERVICES:
        store = ListStore(service, rows[service])
        seals = [r for r in rows[service] if r[1] == LEDGER_ID.bytes and r[2] > 1]
        spans = [int(read_json(seal.state)["to_id"]) for seal in seals]
        assert len(spans) == 2
        write_span(store, "2026-11-30", 0, spans[0], folder)
        write_span(store, "2026-12-01", spans[0], spans[1], folder)
        last[service] = spans[1]
    return last


def _with_archives(hot: dict[str, list[Row]], folder: Path) -> dict[str, ArchiveStore]:
    return {s: ArchiveStore(ListStore(s, list(r)), folder) for s, r in hot.items()}


def test_archives_then_the_hot_store_audit_as_the_store(
    rows: dict[str, list[Row]], tmp_path: Path
) -> None:
    last = _archive(rows, tmp_path)
    alone = streamed(audit({s: ListStore(s, list(r)) for s, r in rows.items()}))
    assert streamed(audit(_with_archives(rows, tmp_path))) == alone
    moved_out = {s: [r for r in rows[s] if r.notification_id > last[s]] for s in SERVICES}
    archived = audit(_with_archives(moved_out, tmp_path))
    assert streamed(archived) == alone and archived.findings == []
    assert sum(archived.events.values()) == sum(len(r) for r in rows.values())


def test_a_row_changed_in_an_archive_is_found_by_the_seals(
    rows: dict[str, list[Row]], tmp_path: Path
) -> None:
    _archive(rows, tmp_path)
    path = tmp_path / "settlement-2026-11-30.jsonl.gz"
    lines = gzip.decompress(path.read_bytes()).splitlines()
    row = json.loads(lines[20])
    row["state"] = row["state"].replace('"timestamp"', '"timestamp" ', 1)
    lines[20] = json.dumps(row).encode()
    path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    with pytest.raises(ArchiveDamaged, match="does not match its digest"):
        _with_archives(rows, tmp_path)
    redigest(path)  # re-digested: only the seals can tell
    report = audit(_with_archives(rows, tmp_path))
    altered = [f for f in report.errors if f.code is Code.ROW_ALTERED]
    assert [f.notification_id for f in altered] == [row["id"]]


def test_a_day_with_no_seal_writes_no_archive(rows: dict[str, list[Row]], tmp_path: Path) -> None:
    assert write_day(ListStore("dealing", rows["dealing"]), "1999-01-01", tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_each_store_reads_only_the_archives_of_its_own_name(
    rows: dict[str, list[Row]], tmp_path: Path
) -> None:
    """One folder holds the unpartitioned store's archives and the partition stores'
    (``<service>-p<N>``): each reads its own; one renamed to another's name is refused."""
    store = ListStore("settlement", rows["settlement"])
    for name in ("settlement", "settlement-p1", "settlement-p10"):
        write_span(store, "2026-11-30", 0, 5, tmp_path, name)
    write_span(store, "2026-11-30", 0, 5, tmp_path, "dealing-p1")
    for name in ("settlement", "settlement-p1", "settlement-p10"):
        read = ArchiveStore(store, tmp_path, name)
        assert [p.name for p in read.files] == [f"{name}-2026-11-30.jsonl.gz"]
        assert [h["store"] for h in read.headers] == [name]
    assert ArchiveStore(store, tmp_path).files == ArchiveStore(store, tmp_path, "settlement").files
    taken = tmp_path / "settlement-p10-2026-11-30.jsonl.gz"
    ours = tmp_path / "settlement-p1-2026-11-30.jsonl.gz"
    ours.write_bytes(taken.read_bytes())
    redigest(ours)
    with pytest.raises(ArchiveDamaged, match="store 'settlement-p10', not 'settlement-p1'"):
        ArchiveStore(store, tmp_path, "settlement-p1")
