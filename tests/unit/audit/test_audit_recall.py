"""Recall shows what was dealt, bet and voided."""

from __future__ import annotations

import pytest

from contracts import CardDealt, CoupResolved
from services.tools.audit.auditor import read_history
from services.tools.audit.memory_stores import ListStore
from services.tools.audit.recall import UnknownTable, recall, recall_text
from tests.unit.audit.helpers import play_history


def test_recall_matches_what_was_dealt_bet_and_voided() -> None:
    played = play_history(coups=12, tables=1)
    history = read_history({n: ListStore(n, r) for n, r in played.rows().items()})[0]
    coups = recall(history, "t1", last=10)
    assert [c["coup_number"] for c in coups] == list(range(4, 14))  # 13: the one in play
    dealt: dict[str, list[tuple[str, str, int]]] = {}
    resolved: dict[str, CoupResolved] = {}
    for message in played.system.published:
        if isinstance(message, CardDealt):
            dealt.setdefault(message.coup_id, []).append(
                (message.side, message.card, message.position)
            )
        if isinstance(message, CoupResolved):
            resolved[message.coup_id] = message
    log = played.logs["t1"]
    for coup in coups:
        coup_id = coup["coup_id"]
        got = [(c["side"], c["card"], c["position"]) for c in coup["cards"]]
        assert got == dealt.get(coup_id, [])
        if coup_id in resolved:
            assert coup["outcome"] == resolved[coup_id].outcome
            assert coup["player_total"] == resolved[coup_id].player_total
        if coup_id in log.voided:
            who, why = log.voided[coup_id]
            assert coup["status"] == "voided"
            assert coup["voids"][0]["supervisor_id"] == who and coup["voids"][0]["reason"] == why
            assert all(b["refund"] is not None for b in coup["bets"])
        elif coup["status"] == "resolved":
            assert all(b["settlement"] is not None for b in coup["bets"])
        sent = set(log.bets.get(coup_id, []))
        answered = {b["bet_id"] for b in coup["bets"]} | {
            b["bet_id"] for b in coup["rejected_bets"]
        }
        assert sent <= answered
        late = [b for b in coup["rejected_bets"] if b["bet_id"] in log.late_bets]
        if f"{coup_id}.late" in log.late_bets:  # answered on the desk: the coup's refusal
            assert [b["reason_code"] for b in late] == ["BETTING_CLOSED"]
    assert sum(".late" in b["bet_id"] for c in coups for b in c["rejected_bets"]) == 3
    text = recall_text("t1", coups)
    assert "VOIDED by supervisor-7" in text and "cards in order" in text


def test_recall_of_an_unknown_table_names_the_known_ones() -> None:
    played = play_history(coups=2, tables=1)
    history = read_history({n: ListStore(n, r) for n, r in played.rows().items()})[0]
    with pytest.raises(UnknownTable, match="t1"):
        recall(history, "nope")
