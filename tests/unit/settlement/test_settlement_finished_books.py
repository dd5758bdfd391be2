"""A settled or voided coup's book leaves settlement's memory (the aggregate cache): memory
holds the bets of open coups only, bounded by PB_MAX_BETS_PER_COUP per open coup. A late
message about a finished coup reads its book again from the store and is answered as before."""

from __future__ import annotations

from contracts import BetRefunded, BetRejected, BetSettled
from services.settlement.books import book_aggregate_id
from tests.unit.settlement.harness import Dealing, Relay, bet, settlement_app
from tests.unit.settlement.stores import POPO


def cached(dealing: Dealing, coup_id: str) -> bool:
    cache = dealing.app.repository.cache
    assert cache is not None
    try:
        cache.get(book_aggregate_id("t1", coup_id))
    except KeyError:
        return False
    return True


def played(coup_id: str = "c1") -> tuple[Dealing, Relay]:
    dealing = Dealing(settlement_app(env=POPO))
    dealing.open_table()
    dealing.open_betting(coup_id, number=1)
    relay = Relay(dealing.app)
    for n in range(3):
        assert dealing.app.place_bet(bet(f"b{n}", bettor_id=f"p{n}", coup_id=coup_id)).accepted
    assert cached(dealing, coup_id)  # open: its bets are in memory
    return dealing, relay


def test_a_settled_book_leaves_memory_and_a_late_bet_is_still_refused_betting_closed() -> None:
    dealing, relay = played()
    dealing.close_betting("c1")
    assert cached(dealing, "c1")  # closed, not settled yet
    dealing.resolve("c1", ["9H", "KD"], ["2C", "3S"])
    assert sorted(m.bet_id for m in relay.pump() if isinstance(m, BetSettled)) == [
        "b0",
        "b1",
        "b2",
    ]
    assert not cached(dealing, "c1")
    late = dealing.app.place_bet(bet("late", coup_id="c1"))
    assert (late.accepted, late.reason_code) == (False, "BETTING_CLOSED")
    assert [m.bet_id for m in relay.pump() if isinstance(m, BetRejected)] == ["late"]
    assert not cached(dealing, "c1")  # a late message does not bring it back for good
    book = dealing.app.get_book("t1", "c1")  # read again from the store, whole
    assert book is not None and book.bet_count == 3


def test_a_void_after_settlement_refunds_every_bet_from_the_book_read_again() -> None:
    dealing, relay = played()
    dealing.close_betting("c1")
    dealing.resolve("c1", ["9H", "KD"], ["2C", "3S"])
    relay.pump()
    assert not cached(dealing, "c1")
    dealing.void("c1", was_resolved=True)
    refunded = [m for m in relay.pump() if isinstance(m, BetRefunded)]
    assert sorted(m.bet_id for m in refunded) == ["b0", "b1", "b2"]
    assert not cached(dealing, "c1")
