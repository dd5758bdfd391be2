"""Bets an earlier version held, on a durable store across a restart."""

from __future__ import annotations

from contracts import BetRejected
from services.settlement.bet_index import BetAnswer
from services.settlement.desk import BetDesk, held_line
from tests.unit.settlement.harness import (
    PLACED_AT,
    Dealing,
    Relay,
    bet,
    settlement_app,
)
from tests.unit.settlement.test_settlement_bets import hold_as_before


def test_bets_held_by_an_earlier_version_are_refused_at_the_next_coup_after_a_restart(
    store_env: dict[str, str],
) -> None:
    """Stores of a version that held bets ahead of their coup keep BetsHeld (and older,
    BetHeld) events: replayed at start, and the held bets refused at the next open mark."""
    dealing = Dealing(settlement_app(env=store_env))
    dealing.open_table()
    dealing.open_betting("c1")
    lines = [held_line("c2", f"h{n}", f"p{n}", "banker", "500", "EUR", PLACED_AT) for n in range(5)]
    hold_as_before(dealing.app, lines)
    desk = BetDesk(table_id="t9")
    desk._held_one(  # what an even earlier version recorded: one event per bet
        table_id="t9",
        coup_id="t9.c2",
        bet_id="old-1",
        bettor_id="p1",
        bet_type="banker",
        amount="500",
        currency="EUR",
        placed_at=PLACED_AT,
    )
    dealing.app.save(desk)
    dealing.close_betting("c1")
    dealing.app.close()

    dealing.app = settlement_app(env=store_env)  # the same store: desk and index rebuilt
    assert dealing.app.bet_answer("h3") == BetAnswer("h3", False, held=True)
    assert list(dealing.app.repository.get(desk.id).held) == ["old-1"]
    dealing.open_betting("c2", number=2)
    assert [dealing.app.bet_answer(f"h{n}") for n in range(5)] == [None] * 5  # free again
    relay = Relay(dealing.app)
    refused = [m for m in relay.pump() if isinstance(m, BetRejected)]
    assert {m.bet_id for m in refused} == {f"h{n}" for n in range(5)}
    assert {m.reason_code for m in refused} == {"NO_SUCH_COUP"}
    assert dealing.app.place_bet(bet("h3", coup_id="c2", bettor_id="p3", amount=500)).accepted
    dealing.app.close()
