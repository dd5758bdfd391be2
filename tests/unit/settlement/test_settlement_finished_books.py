"""A settled or voided coup's book leaves settlement's memory (the aggregate cache): memory
holds the bets of open coups only, bounded by PB_MAX_BETS_PER_COUP per open coup. A late
message about a finished coup other than a bet reads its book again from the store. A bet
naming it (a late bet) reads and writes nothing of the book: it is answered on the table's
desk, so a flood of late bets never makes a book, or a batch, cost more."""

from __future__ import annotations

from contracts import BetRefunded, BetRejected, BetSettled
from services.settlement.application import SettlementApplication
from services.settlement.books import book_aggregate_id
from tests.unit.settlement.harness import POPO, Dealing, Relay, bet, settlement_app


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


def settled(app: SettlementApplication) -> tuple[Dealing, Relay]:
    """Coup c1 of table t1 with 3 bets, settled; its messages pumped."""
    dealing = Dealing(app)
    dealing.open_table()
    dealing.open_betting("c1", number=1)
    app.handle_batch([bet(f"b{n}", bettor_id=f"p{n}") for n in range(3)], None)
    dealing.close_betting("c1")
    dealing.resolve("c1", ["9H", "KD"], ["2C", "3S"])
    relay = Relay(app)
    relay.pump()
    return dealing, relay


def test_a_late_bet_is_answered_once_by_its_bet_id() -> None:
    app = settlement_app(env=POPO)
    _, relay = settled(app)
    late = bet("late", bettor_id="z")
    first = app.place_bet(late)
    assert (first.accepted, first.reason_code) == (False, "BETTING_CLOSED")
    last = app.recorder.max_notification_id()
    again = app.place_bet(late)
    assert again.repeated and again.reason_code == "BETTING_CLOSED"
    assert app.recorder.max_notification_id() == last  # a resend records nothing
    other = app.place_bet(bet("late", bettor_id="z", amount=2000))
    assert other.reason_code == "DUPLICATE_BET_ID"
    assert [m.reason_code for m in relay.pump() if isinstance(m, BetRejected)] == [
        "BETTING_CLOSED",
        "DUPLICATE_BET_ID",
    ]


def test_a_late_bet_after_a_void_of_the_settled_coup_is_told_it_was_voided() -> None:
    app = settlement_app(env=POPO)
    dealing, _ = settled(app)
    assert "resolved and settled" in app.place_bet(bet("late-1", bettor_id="z1")).message
    dealing.void("c1", was_resolved=True)
    assert "was voided" in app.place_bet(bet("late-2", bettor_id="z2")).message
