"""A settled or voided coup's book leaves settlement's memory (the aggregate cache): memory
holds the bets of open coups only, bounded by PB_MAX_BETS_PER_COUP per open coup. A late
message about a finished coup other than a bet reads its book again from the store. A bet
naming it (a late bet) reads and writes nothing of the book: it is answered on the table's
desk, so a flood of late bets never makes a book, or a batch, cost more."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.utils import get_topic

from contracts import BetRefunded, BetRejected, BetSettled, Message
from services.settlement.application import SettlementApplication
from services.settlement.books import book_aggregate_id
from services.settlement.desk import BetDesk
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


def reads_of(app: SettlementApplication, monkeypatch: pytest.MonkeyPatch) -> list[UUID]:
    """The aggregate ids whose events the store is asked for from now on, once per read."""
    asked: list[UUID] = []
    select = app.recorder.select_events

    def counted(originator_id: UUID, *args: Any, **kwargs: Any) -> Any:
        asked.append(originator_id)
        return select(originator_id, *args, **kwargs)

    monkeypatch.setattr(app.recorder, "select_events", counted)
    return asked


def book_version(app: SettlementApplication) -> int:
    [last] = app.recorder.select_events(book_aggregate_id("t1", "c1"), desc=True, limit=1)
    return last.originator_version


def late_batches(count: int, size: int = 50) -> Iterator[list[Message]]:
    for batch in range(count):
        yield [bet(f"late-{batch}-{n}", bettor_id=f"q{n}") for n in range(size)]


def test_late_bets_read_and_write_nothing_of_their_settled_book(
    store_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    app = settlement_app(env=store_env)
    _, relay = settled(app)
    version = book_version(app)
    reads = reads_of(app, monkeypatch)
    for batch in late_batches(3):
        app.handle_batch(batch, None)
    assert book_aggregate_id("t1", "c1") not in reads  # not read, not replayed
    assert book_version(app) == version  # not one event longer
    answers = [m for m in relay.pump() if isinstance(m, BetRejected)]
    assert len(answers) == 150
    assert {(m.reason_code, m.message) for m in answers} == {
        (
            "BETTING_CLOSED",
            "betting on coup c1 is closed (the coup is resolved and settled); "
            "wait for the next BettingOpened",
        )
    }
    refusals = app.recorder.select_notifications(1, 1000, topics=[get_topic(BetDesk.BetsRefused)])
    assert len(refusals) == 3  # one event per batch on the table's desk
    app.close()


def test_after_a_restart_a_late_bet_reads_its_book_once_as_long_as_the_coup_made_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "s")}
    first = settlement_app(env=env)
    settled(first)
    version = book_version(first)
    for batch in late_batches(4):
        first.handle_batch(batch, None)
    first.close()
    again = settlement_app(env=env)
    reads = reads_of(again, monkeypatch)
    book = book_aggregate_id("t1", "c1")
    again.handle_batch([bet("after-1", bettor_id="r1")], None)
    again.handle_batch([bet("after-2", bettor_id="r2")], None)
    assert reads.count(book) == 1  # once, then what it needs is kept
    assert book_version(again) == version  # the late bets before made it no longer
    assert again.bet_answer("after-2") is not None
    assert again.bet_answer("after-2").reason_code == "BETTING_CLOSED"  # type: ignore[union-attr]
    again.close()


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
