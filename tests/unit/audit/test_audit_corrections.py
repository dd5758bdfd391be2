"""The audit of a studio coup's result corrected after settlement: it verifies the correction's
signed decision against the supervisors keyring, settles every bet again on the corrected cards
and checks each ``BetCorrected`` (a changed difference is ``wrong_correction``), and counts the
corrected result in the house's totals."""

from __future__ import annotations

from typing import Any

import pytest

from contracts import BetCorrected, CoupCorrected
from services.dev.simulation import LocalSystem
from services.tools.audit.auditor import AuditReport, audit
from services.tools.audit.findings import Code
from services.tools.audit.memory_stores import ListStore
from services.tools.audit.stores import Row
from tests.unit.audit.helpers import Played, StudioPlay, codes, edit_state, only

BANKER = ["3S", "2D", "TH", "7C"]  # a 3S and a 7C, read as 9S and 3C: Banker 9 to 3


@pytest.fixture(scope="module")
def played() -> Played:
    """A studio coup settled as a Player win (9 to 5), then corrected to a Banker win: the
    Player bet's win becomes a loss, the Banker bet's loss a win."""
    system = LocalSystem.in_memory()
    system.keep_published = True
    studio = StudioPlay(system)
    studio.burn("AH", "2S")
    coup_id = studio.coup("9S", "2D", "TH", "3C")
    system.pump()
    system.command(system.supervisor.correct_result("s1", coup_id, BANKER, "the video"))
    system.pump()
    return Played(system, {})


def run(rows: dict[str, list[Row]], played: Played) -> AuditReport:
    stores = {name: ListStore(name, list(r)) for name, r in rows.items()}
    return audit(stores, supervisors=played.system.supervisors, require_decisions=True)


def edit(rows: dict[str, list[Row]], store: str, topic: str, change: Any) -> None:
    [index] = [i for i, row in enumerate(rows[store]) if row.topic.endswith(topic)]
    rows[store][index] = edit_state(rows[store][index], change)


def test_a_correction_paid_as_its_cards_say_passes(played: Played) -> None:
    published = played.system.published
    assert [m.outcome for m in published if isinstance(m, CoupCorrected)] == ["BANKER"]
    assert {
        m.bet_type: (m.previous_result, m.result, m.difference)
        for m in published
        if isinstance(m, BetCorrected)
    } == {"player": ("WIN", "LOSE", -2000), "banker": ("LOSE", "WIN", 1950)}
    report = run(played.rows(), played)
    assert not report.errors, report.errors
    assert report.checked["corrections"] == 1
    overall = report.totals.to_json()["overall"]
    assert (overall["staked"], overall["paid"]) == (2000, 1950)  # the Banker bet's win only


def test_a_tampered_difference_is_a_wrong_correction(played: Played) -> None:
    rows = played.rows()

    def more(state: dict[str, Any]) -> None:
        lines = state["lines"]
        assert isinstance(lines, list)
        lines[0][-1] += 500  # the difference, the line's last field

    edit(rows, "settlement", ":BetBook.SettlementCorrected", more)
    [finding] = only(run(rows, played), Code.WRONG_CORRECTION)
    assert "should be" in finding.message and finding.bet_id is not None


def test_a_correction_not_as_signed_is_not_authorized(played: Played) -> None:
    rows = played.rows()

    def other_reason(state: dict[str, Any]) -> None:
        state["reason"] = "no reason"

    edit(rows, "dealing", ":Coup.Corrected", other_reason)
    report = run(rows, played)
    assert Code.CORRECTION_NOT_AUTHORIZED in codes(report)
