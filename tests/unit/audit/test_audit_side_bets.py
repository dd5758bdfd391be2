"""The no-commission and EZ tables with their side bets: the audit recomputes every payout from
the cards, so a side bet paid wrong (consistently with the coup's totals) is a finding."""

from __future__ import annotations

import json
import random
import secrets
from typing import Any

import pytest

from services.dev.simulation import LocalSystem, play
from services.shared.rules import get_paytable
from services.tools.audit.auditor import read_history
from services.tools.audit.findings import Code
from services.tools.audit.memory_stores import ListStore
from services.tools.audit.recall import recall, recall_text
from services.tools.audit.stores import Row
from tests.unit.audit.helpers import TOPIC_SETTLED, Played, audit_rows, codes, edit_state, only

MAIN = ("player", "banker", "tie", "player_pair", "banker_pair")


def side_bets(paytable: str) -> list[str]:
    return [bet.value for bet in get_paytable(paytable).offered if bet.value not in MAIN]


@pytest.fixture(scope="module")
def played() -> Played:
    """Two tables played on shoes shuffled by a seeded generator, so the side bets the tests
    need to see won (an either pair, big, small, a Dragon Bonus) win in every run."""
    system = LocalSystem.in_memory()
    system.keep_published = True
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(secrets, "_sysrand", random.Random(1))
        logs = _play(system)
    system.pump()
    system.seal()
    return Played(system, logs)


def _play(system: LocalSystem) -> dict[str, Any]:
    return {
        table: play(
            system,
            table,
            14,
            bets_per_coup=24,
            decks=1,
            paytable=paytable,
            side_bets=side_bets(paytable),
            void_every=6,
            seed=number,
        )
        for number, (table, paytable) in enumerate(
            (("nc", "no-commission"), ("ez", "ez-baccarat")), start=1
        )
    }


def settled_lines(rows: list[Row]) -> list[tuple[int, list[Any]]]:
    return [
        (index, line)
        for index, row in enumerate(rows)
        if row.topic == TOPIC_SETTLED
        for line in json.loads(row.state)["lines"]
    ]


def test_side_bets_settled_by_settlement_audit_clean(played: Played) -> None:
    rows = played.rows()
    report = audit_rows(rows)
    assert report.findings == [], [str(f) for f in report.findings]
    settled = {line[2] for _, line in settled_lines(rows["settlement"])}
    assert settled >= {*side_bets("no-commission"), *side_bets("ez-baccarat")}
    won = {line[2] for _, line in settled_lines(rows["settlement"]) if line[3] == "WIN"}
    assert {"either_pair", "big", "small", "dragon_bonus_player"} <= won


@pytest.mark.parametrize(
    "bet_type", ["either_pair", "big", "small", "dragon_bonus_player", "dragon_bonus_banker"]
)
def test_a_side_bet_paid_wrong_is_a_finding(played: Played, bet_type: str) -> None:
    rows = played.rows()
    settlement = rows["settlement"]
    index, line = next(
        (i, line)
        for i, line in settled_lines(settlement)
        if line[2] == bet_type and line[3] == "WIN"
    )

    def richer(state: dict[str, Any]) -> None:
        for each in state["lines"]:
            if each[0] == line[0]:
                each[5] += 1
                each[6] += 1
        state["paid"] += 1  # the coup's totals kept consistent with its lines

    settlement[index] = edit_state(settlement[index], richer)
    report = audit_rows(rows)
    wrong = only(report, Code.WRONG_SETTLEMENT)
    assert [f.bet_id for f in wrong] == [line[0]]
    assert f"{bet_type} by" in wrong[0].message and f"payout {line[5] + 1} " in wrong[0].message
    assert Code.WRONG_TOTALS not in codes(report)


def test_a_lost_side_bet_recorded_as_a_push_is_a_finding(played: Played) -> None:
    rows = played.rows()
    settlement = rows["settlement"]
    index, line = next(
        (i, line)
        for i, line in settled_lines(settlement)
        if line[2] == "super_6" and line[3] == "LOSE"
    )

    def pushed(state: dict[str, Any]) -> None:
        for each in state["lines"]:
            if each[0] == line[0]:
                each[3], each[6] = "PUSH", each[4]
        state["paid"] += line[4]

    settlement[index] = edit_state(settlement[index], pushed)
    wrong = only(audit_rows(rows), Code.WRONG_SETTLEMENT)
    assert [f.bet_id for f in wrong] == [line[0]]
    assert "the no-commission paytable gives super_6" in wrong[0].message


def test_recall_says_what_the_cards_gave_each_side_bet(played: Played) -> None:
    rows = played.rows()
    history = read_history({name: ListStore(name, r) for name, r in rows.items()})[0]
    coups = recall(history, "nc", last=20)
    bets = [
        (coup, bet)
        for coup in coups
        for bet in coup["bets"]
        if bet["settlement"] and coup["status"] == "resolved"
    ]
    assert all(coup["paytable"] == "no-commission" for coup, _ in bets)
    for coup, bet in bets:
        on, result = bet["settlement"]["on"], bet["settlement"]["result"]
        assert (on is None) is (result == "LOSE"), bet
        if bet["bet_type"] == "banker" and result == "WIN":
            assert on == ("win on a 6: 1 to 2" if coup["banker_total"] == 6 else "1 to 1")
        if bet["bet_type"].startswith("dragon_bonus") and result == "WIN":
            margin = abs(coup["player_total"] - coup["banker_total"])
            pays = {9: 30, 8: 10, 7: 6, 6: 4, 5: 2, 4: 1}[margin] if margin >= 4 else 0
            assert on == ("natural: 1 to 1" if coup["natural"] else f"by {margin}: {pays} to 1")
    assert {bet["bet_type"] for _, bet in bets} >= set(side_bets("no-commission"))
    text = recall_text("nc", coups)
    assert "paytable no-commission" in text
    assert "(natural: 1 to 1)" in text or "(by " in text
