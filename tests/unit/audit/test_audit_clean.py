"""A history played through the real Applications audits clean; totals add up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from contracts import BetRejected, PlaceBet
from services.dev.simulation import LocalSystem, play
from services.tools.audit.auditor import read_history
from services.tools.audit.checks import Filters
from services.tools.audit.findings import Code
from services.tools.audit.memory_stores import ListStore
from services.tools.audit.read_models import read_models
from services.tools.audit.report import to_html, to_json, to_text
from tests.unit.audit.helpers import Played, audit_rows, codes, play_history


def test_a_played_history_with_voids_and_refused_bets_audits_clean() -> None:
    played = play_history()
    report = audit_rows(played.rows())
    assert report.findings == [], [str(f) for f in report.findings]
    assert report.passed
    assert report.checked["shoes"] >= 6  # several shoes per table
    assert report.checked["coups"] == 2 * 24 + 2  # + the coup in play on each table
    voided = sum(len(log.voided) for log in played.logs.values())
    assert report.totals.overall.voided == voided
    assert report.totals.overall.coups == 2 * 24
    for seal in report.seals.values():
        assert seal.unsealed_rows == 0 and seal.seals == 1


def test_bets_refused_because_their_coups_book_was_full_audit_clean() -> None:
    """BOOK_FULL is a refusal like any other: the audit takes it as recorded."""
    system = LocalSystem.in_memory()
    system.keep_published = True
    system.settlement.max_bets_per_coup = 4  # the simulation plays 6 bets a coup
    log = play(system, "t1", 6, bets_per_coup=6, decks=1, void_every=5, batch=4, seed=1)
    system.pump()
    system.seal()
    full = [m for m in system.published if isinstance(m, BetRejected)]
    assert full and {m.reason_code for m in full} == {"BOOK_FULL"}
    report = audit_rows(Played(system, {"t1": log}).rows())
    assert report.findings == [], [str(f) for f in report.findings]
    assert report.passed


def test_totals_agree_at_every_level() -> None:
    report = audit_rows(play_history(coups=12).rows())
    totals = report.totals
    for level in (totals.tables, totals.days, totals.shoes, totals.coups):
        assert sum(t.staked for t in level.values()) == totals.overall.staked
        assert sum(t.paid for t in level.values()) == totals.overall.paid
        assert sum(t.refunded for t in level.values()) == totals.overall.refunded
    overall = totals.overall
    assert overall.house_result == overall.staked - overall.paid
    assert overall.edge is not None and 0 < overall.edge < 1


def test_an_unsealed_store_is_a_warning_not_tampering() -> None:
    report = audit_rows(play_history(seal=False, coups=6, tables=1).rows())
    assert codes(report) == {Code.NOT_SEALED}
    assert report.errors == [] and len(report.warnings) == 3


def test_rows_after_the_last_seal_are_an_unsealed_tail() -> None:
    played = play_history(coups=6, tables=1)
    coup_id = played.system.current_coup("t1")
    assert coup_id is not None
    played.system.place_bets(
        [
            PlaceBet(
                table_id="t1",
                coup_id=coup_id,
                bet_id="after-the-seal",
                bettor_id="b",
                bet_type="tie",
                amount=500,
                currency="EUR",
            )
        ]
    )
    report = audit_rows(played.rows())
    assert Code.UNSEALED_TAIL in codes(report)
    assert report.errors == []


def test_filters_restrict_checks_and_totals_to_a_table_and_a_time() -> None:
    rows = play_history(coups=8).rows()
    everything = audit_rows(rows)
    one = audit_rows(rows, Filters(table="t2"))
    assert set(one.totals.tables) == {"t2"}
    assert one.checked["coups"] == everything.checked["coups"] // 2
    future = datetime.now(UTC) + timedelta(days=1)
    none = audit_rows(rows, Filters(since=future))
    assert none.checked.get("coups", 0) == 0 and none.totals.overall.coups == 0


def test_reports_for_people_and_tools() -> None:
    report = audit_rows(play_history(coups=4, tables=1).rows())
    text = to_text(report)
    assert text.startswith("Audit PASSED")
    assert "table t1" in text and "hold" in text
    data = to_json(report)
    assert '"passed": true' in data
    page = to_html(report)
    assert page.startswith("<!doctype html>") and "PASSED" in page


def test_read_models_rebuilt_twice_are_byte_identical() -> None:
    rows = play_history(coups=8).rows()
    first = read_models(read_history({n: ListStore(n, list(r)) for n, r in rows.items()})[0])
    second = read_models(read_history({n: ListStore(n, list(r)) for n, r in rows.items()})[0])
    assert first == second
    assert set(first) == {"table-history.json", "bettor-history.json"}
    assert b'"t1"' in first["table-history.json"]


def test_two_operators_at_one_table_with_the_same_bet_ids_audit_clean() -> None:
    """Operators (B2B): each operator's bets are its own (same ids at both), settled once
    per operator; the audit reads them apart and every total counts both."""
    from services.dev.simulation import LocalSystem, play
    from tests.unit.audit.helpers import Played

    system = LocalSystem.in_memory(operators=("acme", "bravo"))
    log = play(system, "t1", 10, bets_per_coup=5, decks=1, void_every=4, invalid_every=3,
               late_every=3, batch=3, operators=("acme", "bravo"))  # fmt: skip
    system.pump()
    system.seal()
    report = audit_rows(Played(system, {"t1": log}).rows())
    assert report.findings == [], [str(f) for f in report.findings]
    alone = LocalSystem.in_memory(operators=("acme",))
    play(alone, "t1", 10, bets_per_coup=5, decks=1, void_every=4, invalid_every=3,
         late_every=3, batch=3, operators=("acme",))  # fmt: skip
    alone.pump()
    alone.seal()
    single = audit_rows(Played(alone, {}).rows())
    # the same bets (seeded) at each operator; the cards differ (shuffled afresh)
    assert report.totals.overall.staked == 2 * single.totals.overall.staked
    assert report.totals.overall.bets == 2 * single.totals.overall.bets
