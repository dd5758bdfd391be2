"""When a bet is in time: its place among dealing's marks in the partition, and its time.

Dealing's OpenBook and CloseBook travel in the table's partition of bet-commands, with the
bets. A bet is in time if it comes after the coup's OpenBook and before its CloseBook, and
was PLACED (broker LogAppendTime, never the client's occurred_at) before ``closes_at``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from eventsourcing.persistence import Tracking

from contracts import BetAccepted, BetRejected, BetSettled, CoupSettled, IncidentRaised
from services.settlement.application import SettlementApplication
from services.settlement.books import BetBook
from services.settlement.desk import BetDesk
from services.settlement.service import batch_handler, placed_at
from services.shared.platform.consumer import CREATE_TIME, LOG_APPEND_TIME, Delivery
from tests.unit.settlement.harness import (
    CLOSES_AT,
    PLACED_AT,
    T0,
    Clock,
    Dealing,
    Relay,
    bet,
    settlement_app,
)

SECOND = timedelta(seconds=1)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def dealing(clock: Clock) -> Dealing:
    dealing = Dealing(settlement_app(clock=clock))
    dealing.open_table()
    dealing.open_betting("c1")
    return dealing


@pytest.fixture
def app(dealing: Dealing) -> SettlementApplication:
    return dealing.app


def answer_of(relay: Relay, bet_id: str) -> BetAccepted | BetRejected:
    [answer] = [
        m
        for m in relay.published
        if isinstance(m, BetAccepted | BetRejected) and m.bet_id == bet_id
    ]
    return answer


def test_a_bet_after_the_close_mark_is_refused_even_if_placed_in_time(
    app: SettlementApplication, dealing: Dealing
) -> None:
    # After the CloseBook mark settlement announced BetsClosed and dealing may deal:
    # a bet behind the mark is too late, whatever its time says.
    dealing.close_betting("c1")
    placed = CLOSES_AT - SECOND
    refused = app.place_bet(bet("queued"), placed_at=placed)
    assert refused.reason_code == "BETTING_CLOSED"
    dealing.resolve("c1", ["9H", "KD"], ["2S", "3C"])
    relay = Relay(app)
    relay.pump()
    rejected = answer_of(relay, "queued")
    assert isinstance(rejected, BetRejected) and rejected.placed_at == placed
    assert relay.of_type(BetSettled) == []


def test_betting_closed_early_refuses_every_later_bet(
    app: SettlementApplication, dealing: Dealing
) -> None:
    closed_at = CLOSES_AT - timedelta(minutes=2)  # a CloseBetting before the window ended
    assert app.place_bet(bet("before"), placed_at=closed_at - SECOND).accepted
    dealing.close_betting("c1", at=closed_at)
    for bet_id, placed in (("late", closed_at - SECOND), ("after", closed_at + SECOND)):
        refused = app.place_bet(bet(bet_id, bettor_id="bob"), placed_at=placed)
        assert refused.reason_code == "BETTING_CLOSED"
        assert closed_at.isoformat() in refused.message


def test_a_bet_placed_after_closes_at_is_refused_before_betting_closed_is_applied(
    app: SettlementApplication,
) -> None:
    book = app.get_book("t1", "c1")
    assert book is not None and book.status == "BETTING"  # BettingClosed not applied yet
    placed = CLOSES_AT + SECOND
    answer = app.place_bet(bet("late"), placed_at=placed)
    assert answer.reason_code == "BETTING_CLOSED"
    relay = Relay(app)
    relay.pump()
    rejected = answer_of(relay, "late")
    assert isinstance(rejected, BetRejected) and rejected.placed_at == placed


def test_a_result_read_while_betting_is_open_waits_for_the_close_mark_and_the_cards(
    app: SettlementApplication, dealing: Dealing
) -> None:
    # Settlement may read dealing's CoupResolved before dealing's CloseBook (other topics, or
    # a forgery): nothing is paid while bets are taken; after the mark, the shoe's cards judge.
    dealing.resolve("c1", ["9H", "KD"], ["2S", "3C"], draw=False)
    assert app.place_bet(bet("after-claim"), placed_at=PLACED_AT).accepted
    dealing.close_betting("c1")
    relay = Relay(app)
    relay.pump()
    assert relay.of_type(BetSettled) == [] and relay.of_type(IncidentRaised) == []
    assert isinstance(answer_of(relay, "after-claim"), BetAccepted)
    dealing.draw("c1", ["9H", "2S", "KD", "3C"])
    relay.pump()
    [settled] = relay.of_type(BetSettled)
    assert (settled.bet_id, settled.result, settled.returned) == ("after-claim", "WIN", 2000)


def test_a_claim_read_while_betting_is_open_is_refused_by_the_shoes_cards(
    app: SettlementApplication, dealing: Dealing
) -> None:
    dealing.resolve("c1", ["9H", "KD"], ["2S", "3C"], draw=False)  # not what the shoe will draw
    dealing.close_betting("c1")
    dealing.draw("c1", ["8H", "2S", "KD", "3C"])
    relay = Relay(app)
    relay.pump()
    [incident] = relay.of_type(IncidentRaised)
    assert incident.code == "CARDS_MISMATCH" and incident.coup_id == "c1"
    assert relay.of_type(BetSettled) == []
    dealing.resolve("c1", ["8H", "KD"], ["2S", "3C"], draw=False)  # the shoe's own cards
    relay.pump()
    assert relay.of_type(CoupSettled) != []


@pytest.mark.parametrize(
    ("occurred_at", "placed", "accepted"),
    [
        (T0, CLOSES_AT + SECOND, False),  # backdated by the client: still too late
        (CLOSES_AT + timedelta(hours=1), PLACED_AT, True),  # a client clock ahead: in time
    ],
)
def test_the_clients_occurred_at_makes_no_difference(
    app: SettlementApplication, occurred_at: datetime, placed: datetime, accepted: bool
) -> None:
    answer = app.place_bet(bet("b1", occurred_at=occurred_at), placed_at=placed)
    assert answer.accepted is accepted


def test_without_a_broker_time_the_bet_counts_as_placed_when_handled(
    app: SettlementApplication, clock: Clock
) -> None:
    clock.now = CLOSES_AT + SECOND
    assert app.place_bet(bet("b1", occurred_at=T0)).reason_code == "BETTING_CLOSED"
    clock.now = CLOSES_AT - SECOND
    assert app.place_bet(bet("b2", occurred_at=CLOSES_AT + SECOND)).accepted


def test_a_bet_ahead_of_its_coups_open_mark_is_refused_and_may_be_sent_again(
    app: SettlementApplication, dealing: Dealing
) -> None:
    c2_closes = CLOSES_AT + timedelta(minutes=10)
    early = app.place_bet(bet("early", coup_id="c2"), placed_at=CLOSES_AT)
    assert early.reason_code == "NO_SUCH_COUP"
    dealing.close_betting("c1")
    dealing.open_betting("c2", number=2, closes_at=c2_closes)
    # NO_SUCH_COUP does not use up the bet id: the same bet, sent again, is judged.
    assert app.place_bet(bet("early", coup_id="c2"), placed_at=CLOSES_AT + SECOND).accepted
    relay = Relay(app)
    relay.pump()
    answers = [m for m in relay.published if getattr(m, "bet_id", None) == "early"]
    assert [type(m).__name__ for m in answers] == ["BetRejected", "BetAccepted"]
    assert answers[1].placed_at == CLOSES_AT + SECOND


def test_a_refusal_without_a_book_carries_placed_at(app: SettlementApplication) -> None:
    app.place_bet(bet("x", table_id="t9", coup_id="t9.c1"), placed_at=PLACED_AT)
    relay = Relay(app)
    relay.pump()
    rejected = answer_of(relay, "x")
    assert isinstance(rejected, BetRejected)
    assert rejected.reason_code == "NO_SUCH_TABLE" and rejected.placed_at == PLACED_AT


def test_events_recorded_before_the_times_were_kept_read_as_none() -> None:
    closed: dict[str, Any] = {}
    BetBook.BettingClosed.upcast_v1_v2(closed)
    assert closed == {"closed_at": None}
    refused: dict[str, Any] = {}
    BetDesk.BetRejected.upcast_v1_v2(refused)
    assert refused == {"placed_at": None}
    answered: dict[str, Any] = {"lines": [["b1", "alice", "player", 100, "EUR", None, ""]]}
    BetBook.BetsAnswered.upcast_v1_v2(answered)
    assert answered["placed_at"] == [None]


def delivery(message: Any, timestamp: int | None, timestamp_type: int | None) -> Delivery:
    return Delivery(
        message=message,
        topic="punto-banco.bet-commands",
        partition=0,
        offset=0,
        key="t1",
        source=None,
        tracking=Tracking("k:punto-banco.bet-commands:0", 1),
        timestamp=timestamp,
        timestamp_type=timestamp_type,
    )


def test_the_service_takes_the_brokers_append_time_never_the_producers() -> None:
    received = datetime(2026, 11, 30, 4, 0, tzinfo=UTC)
    appended = datetime(2026, 11, 30, 3, 59, 58, 123000, tzinfo=UTC)
    millis = int(appended.timestamp() * 1000)
    command = bet("b1", occurred_at=T0)
    assert placed_at(delivery(command, millis, LOG_APPEND_TIME), received) == appended
    # A CreateTime stamp is the producer's: the time settlement received the bet counts.
    assert placed_at(delivery(command, millis, CREATE_TIME), received) == received
    assert placed_at(delivery(command, None, None), received) == received


def test_the_service_handler_judges_a_batch_by_append_times(
    app: SettlementApplication,
) -> None:
    in_time = int((CLOSES_AT - SECOND).timestamp() * 1000)
    too_late = int((CLOSES_AT + SECOND).timestamp() * 1000)
    handle = batch_handler(app)
    deliveries = [
        delivery(bet("ok", occurred_at=CLOSES_AT + SECOND), in_time, LOG_APPEND_TIME),
        delivery(bet("late", occurred_at=T0, bettor_id="bob"), too_late, LOG_APPEND_TIME),
    ]
    handle(deliveries, Tracking("k:punto-banco.bet-commands:0", 2))
    ok, late = app.bet_answer("ok"), app.bet_answer("late")
    assert ok is not None and ok.accepted
    assert late is not None and late.reason_code == "BETTING_CLOSED"
    assert app.tracked_position("k:punto-banco.bet-commands:0") == 2
