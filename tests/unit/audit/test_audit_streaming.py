"""The audit streams: bounded open state, the same report as checking the whole history.

The streaming audit (``stream.py``, ``window.py``) checks each coup once it is complete in
every store and drops it; these tests hold it to the whole-history audit (every store read
into one History, then ``Checker.run``) on clean and tampered histories, show that what it
holds open does not grow with the history, and that a late event (a resolved coup voided
many coups later, then refunded) brings a checked coup back.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from contracts import PlaceBet
from services.dev.simulation import LocalSystem, PlayLog, _void, play
from services.tools.audit.auditor import audit
from services.tools.audit.checks import Checker
from services.tools.audit.findings import Code
from services.tools.audit.memory_stores import ListStore
from services.tools.audit.stores import SERVICES, Row
from services.tools.audit.stream import StreamAudit
from services.tools.history.views import History
from tests.unit.audit.helpers import TOPIC_SETTLED, Played, play_history, streamed, whole_history

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _stores(rows: dict[str, list[Row]]) -> dict[str, ListStore]:
    return {name: ListStore(name, list(r)) for name, r in rows.items()}


def _whole(rows: dict[str, list[Row]]) -> dict[str, Any]:
    return whole_history(_stores(rows))


def _streamed(rows: dict[str, list[Row]], **options: Any) -> dict[str, Any]:
    return streamed(audit(_stores(rows), **options))


@pytest.fixture(scope="module")
def played() -> Played:
    return play_history(coups=30, tables=2)


def test_a_clean_history_streams_to_the_whole_history_report(played: Played) -> None:
    rows = played.rows()
    assert _streamed(rows) == _whole(rows)


def test_a_settlement_written_again_at_the_end_of_the_store_is_found(played: Played) -> None:
    """A CoupSettled of the first coup appended after everything: the coup was checked and
    dropped long before; the row brings it back and it is settled twice, as in the whole
    history (and the seal finds the row nobody sealed)."""
    rows = played.rows()
    settlement = rows["settlement"]
    first = next(row for row in settlement if row.topic == TOPIC_SETTLED)
    last_version = max(r.originator_version for r in settlement if r[1] == first[1])
    again = first._replace(
        notification_id=settlement[-1].notification_id + 1, originator_version=last_version + 1
    )
    rows["settlement"] = [*settlement, again]
    streamed = _streamed(rows)
    assert streamed == _whole(rows)
    assert Code.SETTLED_TWICE.value in {f["code"] for f in streamed["findings"]}


def test_a_coup_whose_settlement_is_deleted_is_never_settled(played: Played) -> None:
    rows = played.rows()
    settled = [row for row in rows["settlement"] if row.topic == TOPIC_SETTLED]
    rows["settlement"] = [row for row in rows["settlement"] if row != settled[3]]
    streamed = _streamed(rows)
    assert streamed == _whole(rows)
    assert Code.NEVER_SETTLED.value in {f["code"] for f in streamed["findings"]}


STEP = 20
"""Rows read from one store at a time: small, for histories this short to be many steps."""


def _peaks(rows: dict[str, list[Row]]) -> tuple[dict[str, int], int]:
    checker = Checker(History())
    run = StreamAudit(_stores(rows), checker, step=STEP)
    run.run()
    return dict(run.window.peak), checker.checked["coups"]


def test_what_the_audit_holds_open_does_not_grow_with_the_history() -> None:
    """Ten times the coups: the same number of coups, books and shoes held at once at most
    (bounded by the table, the few coups every store has not yet moved past, and the rows
    read from a store at a time)."""
    peaks = []
    for coups in (30, 300):
        system = LocalSystem.in_memory()
        play(system, "t1", coups, bets_per_coup=4, decks=1, void_every=7, batch=2, seed=3)
        system.pump()
        system.seal()
        peak, checked = _peaks(Played(system, {}).rows())
        assert checked >= coups
        peaks.append(peak)
    small, large = peaks
    # Which coups are voided, and how many coups a (1-deck) shoe lasts, vary a little with
    # the shuffles; what is held stays a handful while the coups (and 50-odd shoes) grow.
    assert large["coups"] <= small["coups"] + 1
    assert large["books"] <= small["books"] + 1
    assert max(large.values()) <= 8


def _voided_late() -> dict[str, list[Row]]:
    """One table, 50 coups; after coup 36 a supervisor voids coup 2 (resolved long ago: the
    audit has checked and dropped it when it reads the void)."""
    system = LocalSystem.in_memory()

    def after(number: int) -> None:
        if number == 36:
            _void(system, PlayLog(), "t1", "t1.coup-2", "misdeal found on camera")

    play(system, "t1", 50, bets_per_coup=4, decks=1, batch=2, seed=5, on_coup=after)
    system.pump()
    system.seal()
    return Played(system, {}).rows()


def test_late_bets_on_checked_coups_bring_nothing_back_and_are_not_held() -> None:
    """Bets naming coups checked long before (refused on the desk, BETTING_CLOSED): none
    brings its coup back to be read and checked again, and the audit holds none of them,
    however many; the report is the whole history's (which shows them under their coups)."""
    system = LocalSystem.in_memory()
    log = play(system, "t1", 24, bets_per_coup=4, decks=1, batch=2, seed=5)
    late = [
        PlaceBet(
            table_id="t1",
            coup_id=coup_id,
            bet_id=f"{coup_id}.late-{n}",
            bettor_id=f"late-{n}",
            bet_type="player",
            amount=1_000,
            currency="EUR",
        )
        for coup_id in list(log.bets)[:12]
        for n in range(5)
    ]
    system.place_bets(late)
    system.pump()
    system.seal()
    rows = Played(system, {}).rows()
    run = StreamAudit(_stores(rows), Checker(History()), step=STEP)
    run.run()
    assert run.revived == 0
    assert run.feed.history.desk_rejections == {}
    assert _streamed(rows) == _whole(rows)


def test_a_coup_voided_long_after_its_result_is_checked_again_with_its_refund() -> None:
    """A supervisor may void a resolved coup within the void window: its void (dealing) and
    refund (settlement) come many coups later, after the coup was checked and dropped. It
    is brought back and checked again: the report is the whole history's, the coup counted
    once, as voided."""
    rows = _voided_late()
    checker = Checker(History())
    run = StreamAudit(_stores(rows), checker)
    run.run()
    assert run.revived >= 1
    streamed = _streamed(rows)
    assert streamed == _whole(rows)
    assert streamed["totals"]["coups"]["t1/t1.coup-2"]["voided"] == 1
    assert streamed["checked"]["coups"] >= 50


def test_a_late_event_after_the_revive_window_names_nothing_known() -> None:
    """Past ``revive_within`` a checked coup is forgotten: a row about it is then an event
    that names nothing known (an error), never silently accepted."""
    report = audit(_stores(_voided_late()), revive_within=timedelta(0))
    assert Code.UNREADABLE_EVENT in {f.code for f in report.errors}


def test_every_store_is_read_whole_and_counted() -> None:
    system = LocalSystem.in_memory()
    play(system, "t1", 10, bets_per_coup=3, decks=1, seed=2)
    system.pump()
    system.seal()
    rows = Played(system, {}).rows()
    report = audit(_stores(rows))
    assert report.events == {name: len(rows[name]) for name in SERVICES}
    assert report.findings == []


def test_without_coup_totals_the_days_and_tables_are_the_same() -> None:
    """For a history of any length: no tally per coup or shoe is kept (they grow with it);
    the days, tables and overall totals are those of the full report, voids revived too."""
    rows = _voided_late()
    full = audit(_stores(rows)).totals.to_json()
    lean = audit(_stores(rows), coup_totals=False).totals.to_json()
    assert lean["coups"] == {} and lean["shoes"] == {}
    assert {k: lean[k] for k in ("overall", "days", "tables")} == {
        k: full[k] for k in ("overall", "days", "tables")
    }
    assert full["overall"]["voided"] >= 1
