"""placed_at kept in a durable store across a restart."""

from __future__ import annotations

from datetime import timedelta

from tests.unit.settlement.harness import (
    CLOSES_AT,
    Dealing,
    Relay,
    bet,
    settlement_app,
)
from tests.unit.settlement.test_settlement_bet_timing import SECOND, answer_of


def test_placed_at_survives_a_restart(store_env: dict[str, str]) -> None:
    first = settlement_app(env=store_env)
    dealing = Dealing(first)
    dealing.open_table()
    dealing.open_betting("c1")
    placed = CLOSES_AT - SECOND
    assert first.place_bet(bet("b1"), placed_at=placed).accepted
    dealing.close_betting("c1", at=CLOSES_AT - timedelta(minutes=1))
    first.close()
    second = settlement_app(env=store_env)
    dealing.app = second
    book = second.get_book("t1", "c1")
    assert book is not None and book.closed_at == CLOSES_AT - timedelta(minutes=1)
    assert second.place_bet(bet("b2", bettor_id="bob"), placed_at=placed).reason_code == (
        "BETTING_CLOSED"
    )
    assert second.place_bet(bet("b1")).repeated
    relay = Relay(second)
    relay.pump()
    assert answer_of(relay, "b1").placed_at == placed
    second.close()
