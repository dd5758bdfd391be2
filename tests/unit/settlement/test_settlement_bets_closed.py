"""BetsClosed: settlement closes a coup's book once, and dealing deals only after it.

When settlement applies dealing's BettingClosed it records the book closed and the
relay publishes ONE BetsClosed (bets accepted, total staked); every bet judged
after that is refused with BETTING_CLOSED.
"""

from __future__ import annotations

from datetime import timedelta

from eventsourcing.persistence import Tracking

from contracts import BetsClosed, BettingClosed
from services.settlement.books import BetBook
from tests.unit.settlement.harness import CLOSES_AT, Dealing, Relay, bet, settlement_app

SECOND = timedelta(seconds=1)


def test_betting_closed_gives_one_bets_closed_with_the_book_totals() -> None:
    dealing = Dealing(settlement_app())
    app = dealing.app
    dealing.open_table()
    dealing.open_betting("c1")
    assert app.place_bet(bet("b1", amount=1000), placed_at=CLOSES_AT - SECOND).accepted
    assert app.place_bet(
        bet("b2", bettor_id="bob", bet_type="tie", amount=500), placed_at=CLOSES_AT - SECOND
    ).accepted
    app.place_bet(bet("bad", bettor_id="carol", currency="USD"), placed_at=CLOSES_AT - SECOND)
    dealing.close_betting("c1")
    # The same BettingClosed again (redelivered under a new position): no second effect.
    app.handle(
        BettingClosed(table_id="t1", coup_id="c1"),
        Tracking("dealing:punto-banco.table-events:0", 999),
    )
    relay = Relay(app)
    relay.pump()
    [closed] = relay.of_type(BetsClosed)
    assert (closed.table_id, closed.coup_id) == ("t1", "c1")
    assert (closed.bets, closed.staked, closed.currency) == (2, 1500, "EUR")
    # Republishing the stored event gives the same message id.
    again = Relay(app)
    again.pump()
    assert again.of_type(BetsClosed)[0].event_id == closed.event_id


def test_every_bet_after_bets_closed_is_refused() -> None:
    dealing = Dealing(settlement_app())
    app = dealing.app
    dealing.open_table()
    dealing.open_betting("c1")
    closed_at = CLOSES_AT - timedelta(minutes=3)  # an early CloseBetting
    dealing.close_betting("c1", at=closed_at)
    for n, placed in enumerate((closed_at - SECOND, closed_at, closed_at + SECOND)):
        answer = app.place_bet(bet(f"late{n}", bettor_id=f"p{n}"), placed_at=placed)
        assert answer.reason_code == "BETTING_CLOSED"
    relay = Relay(app)
    relay.pump()
    [closed] = relay.of_type(BetsClosed)
    assert (closed.bets, closed.staked) == (0, 0)


def test_a_book_closed_before_bets_closed_existed_publishes_nothing() -> None:
    state = {"closed_at": None}
    BetBook.BettingClosed.upcast_v2_v3(state)
    assert state["table_id"] is None and state["bets"] == 0
