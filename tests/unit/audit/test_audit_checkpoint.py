"""An audit resumes from its checkpoint: only what is new is read, the same money is counted,
and a seal changed under the checkpoint refuses the resume.

A table plays 60 coups; the stores are sealed after coup 25 (the first day's audit writes
its checkpoint then) and at the end (the next day's audit resumes from it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.dev.simulation import LocalSystem, PlayLog, _void, play
from services.shared.platform.store import LEDGER_ID, seal_store
from services.tools.audit.auditor import audit
from services.tools.audit.findings import Code, Severity
from services.tools.audit.memory_stores import ListStore
from services.tools.audit.stores import SERVICES, Row
from tests.unit.audit.helpers import Played

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

Stores = dict[str, list[Row]]


def _history(void_late: bool = False) -> tuple[Stores, Stores]:
    """The stores as sealed after coup 25 (dealing after 28), and as sealed at the end (60
    coups); with
    ``void_late``, coup 3 (resolved and checked on the first day) is voided after coup 40."""
    system = LocalSystem.in_memory()
    first: list[Stores] = []

    def after(number: int) -> None:
        if number == 25:
            system.pump()
            system.seal()
        if number == 28:  # dealing alone: its last seal is three coups past settlement's
            seal_store(system.apps["dealing"], "dealing")
            first.append(Played(system, {}).rows())
        if void_late and number == 40:
            _void(system, PlayLog(), "t1", "t1.coup-3", "misdeal found on camera")

    play(system, "t1", 60, bets_per_coup=4, decks=1, void_every=9, batch=2, seed=7, on_coup=after)
    system.pump()
    system.seal()
    return first[0], Played(system, {}).rows()


def _stores(rows: Stores) -> dict[str, ListStore]:
    return {name: ListStore(name, list(r)) for name, r in rows.items()}


@pytest.fixture(scope="module")
def history() -> tuple[Stores, Stores]:
    return _history()


def test_the_next_audit_reads_only_what_came_after_the_checkpoint(
    history: tuple[Stores, Stores], tmp_path: Path
) -> None:
    day1, day2 = history
    checkpoint = tmp_path / "audit.checkpoint"
    first = audit(_stores(day1), checkpoint=checkpoint)
    # Coups dealing resolved before its last seal, settled after settlement's: still open.
    assert first.errors == [] and checkpoint.is_file()
    marks = json.loads(checkpoint.read_text())["stores"]
    second = audit(_stores(day2), checkpoint=checkpoint)
    assert second.errors == []
    for service in SERVICES:  # read: the rows after the first day's seal, to the new seal
        last_seal = max(r.notification_id for r in day2[service] if r[1] == LEDGER_ID.bytes)
        new = [r for r in day2[service] if marks[service]["to_id"] < r.notification_id]
        assert second.events[service] == len([r for r in new if r.notification_id <= last_seal])
        assert 0 < second.events[service] < len(day2[service])


def test_a_resumed_audit_counts_the_same_money_as_a_whole_one(
    history: tuple[Stores, Stores], tmp_path: Path
) -> None:
    """Day 1 then day 2 from its checkpoint: every coup they checked has the tally the whole
    audit of day 2 gives it, and only the coups still open at the end are left over."""
    day1, day2 = history
    checkpoint = tmp_path / "audit.checkpoint"
    audit(_stores(day1), checkpoint=checkpoint)
    resumed = audit(_stores(day2), checkpoint=checkpoint).totals.to_json()
    whole = audit(_stores(day2)).totals.to_json()
    assert resumed["coups"] and set(resumed["coups"]) <= set(whole["coups"])
    assert all(whole["coups"][key] == tally for key, tally in resumed["coups"].items())
    assert len(whole["coups"]) - len(resumed["coups"]) <= 3  # open at the last seal


def test_a_coup_checked_before_the_checkpoint_and_voided_after_is_checked_again(
    tmp_path: Path,
) -> None:
    day1, day2 = _history(void_late=True)
    checkpoint = tmp_path / "audit.checkpoint"
    audit(_stores(day1), checkpoint=checkpoint)
    assert "t1/t1.coup-3" in json.loads(checkpoint.read_text())["totals"]["coups"]
    resumed = audit(_stores(day2), checkpoint=checkpoint)
    assert resumed.errors == []
    assert resumed.totals.coups["t1/t1.coup-3"].voided == 1
    whole = audit(_stores(day2)).totals.to_json()
    assert resumed.totals.to_json()["coups"]["t1/t1.coup-3"] == whole["coups"]["t1/t1.coup-3"]


def test_a_seal_rewritten_under_the_checkpoint_refuses_the_resume(
    history: tuple[Stores, Stores], tmp_path: Path
) -> None:
    """The chain re-computed over changed history gives the checkpoint's seal another
    digest: the resumed audit says so, reads nothing, and keeps the checkpoint as it was."""
    day1, day2 = history
    checkpoint = tmp_path / "audit.checkpoint"
    audit(_stores(day1), checkpoint=checkpoint)
    kept = checkpoint.read_bytes()
    mark = json.loads(kept)["stores"]["dealing"]
    rows = day2["dealing"]
    at = next(i for i, r in enumerate(rows) if r.notification_id == mark["nid"])
    state = json.loads(rows[at].state)
    state["digest"] = "0" * 64
    rows[at] = rows[at]._replace(state=json.dumps(state).encode())
    report = audit(_stores(day2), checkpoint=checkpoint)
    (refused,) = report.errors
    assert refused.code is Code.SEAL_CHAIN_BROKEN and refused.store == "dealing"
    assert "rewritten" in refused.message and report.total_events == 0
    assert checkpoint.read_bytes() == kept


def test_no_checkpoint_is_written_over_errors(
    history: tuple[Stores, Stores], tmp_path: Path
) -> None:
    day1, _ = history
    rows = dict(day1)
    settled = [r for r in rows["settlement"] if r.topic.endswith("CoupSettled")]
    rows["settlement"] = [r for r in rows["settlement"] if r != settled[2]]
    checkpoint = tmp_path / "audit.checkpoint"
    report = audit(_stores(rows), checkpoint=checkpoint)
    assert any(f.severity is Severity.ERROR for f in report.findings)
    assert not checkpoint.exists()
