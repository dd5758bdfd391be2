"""The read side builds fact records straight from stored JSON (upcast, lines typed)."""

from __future__ import annotations

import json

from contracts import BetSettled, CoupResolved
from services.shared.facts import fact_from, line_from, read_fact
from services.shared.facts.dealing import CoupResolvedFact
from services.shared.facts.settlement import (
    AnswerLine,
    BetsAnsweredFact,
    BookClosedFact,
    CoupSettledFact,
    SettledLine,
)
from tests.unit.compat.golden import golden_rows, legacy_rows

STAMP = {"_type_": "datetime_iso", "_data_": "2026-12-01T10:00:00+00:00"}


def test_a_stored_settlement_reads_as_its_fact_with_typed_lines() -> None:
    row = next(r for r in golden_rows("settlement") if r["topic"] == CoupSettledFact.STORED_TOPIC)
    state = json.loads(row["state"])
    fact = read_fact(CoupSettledFact, json.loads(row["state"]))
    assert type(fact) is CoupSettledFact and fact.coup_id == state["coup_id"]
    assert all(type(line) is SettledLine for line in fact.lines)
    assert [list(line) for line in fact.lines] == state["lines"]
    assert fact.paid == sum(line.returned for line in fact.lines)


def test_an_older_version_is_upcast_as_the_services_upcast_it() -> None:
    row = next(r for r in legacy_rows("settlement") if r["topic"] == BetsAnsweredFact.STORED_TOPIC)
    fact = read_fact(BetsAnsweredFact, json.loads(row["state"]))
    assert fact.placed_at == [None] * len(fact.lines)
    closed = read_fact(BookClosedFact, {"timestamp": STAMP})  # version 1: no field at all
    assert (closed.closed_at, closed.table_id, closed.bets, closed.currency) == (
        None,
        None,
        0,
        None,
    )


def test_a_longer_stored_line_keeps_its_extra_item() -> None:
    eight = ["b1", "p1", "banker", 900, "EUR", None, "", "2026-12-01T10:00:00+00:00"]
    state = {"timestamp": STAMP, "table_id": "t1", "coup_id": "c1", "lines": [eight]}
    (line,) = read_fact(BetsAnsweredFact, state).lines
    assert type(line) is AnswerLine and line.amount == 900 and line[7] == eight[7]


def test_a_contract_message_gives_its_fact_and_its_line() -> None:
    resolved = CoupResolved(
        table_id="t1",
        coup_id="t1.c1",
        coup_number=1,
        shoe_id="s1",
        player_cards=["9H", "TD"],
        banker_cards=["3C", "4S"],
        player_total=9,
        banker_total=7,
        outcome="PLAYER",
        natural=True,
        player_pair=False,
        banker_pair=False,
    )
    fact = fact_from(CoupResolvedFact, resolved)
    assert fact.player_cards == ["9H", "TD"] and fact.outcome == "PLAYER"
    settled = BetSettled(
        table_id="t1",
        bet_id="b1",
        coup_id="t1.c1",
        bettor_id="p1",
        bet_type="player",
        result="WIN",
        stake=100,
        payout=100,
        returned=200,
        currency="EUR",
    )
    assert line_from(SettledLine, settled) == SettledLine(
        "b1", "p1", "player", "WIN", 100, 100, 200
    )
