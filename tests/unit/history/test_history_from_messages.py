"""Kafka's messages into the views: batches gathered, redeliveries ignored, a partial stream."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

from contracts import (
    BetAccepted,
    BetLimitSpec,
    BetRejected,
    BetSettled,
    BettingOpened,
    CardDrawn,
    CoupSettled,
    TableOpened,
)
from services.tools.history.from_messages import EventIds, MessageFeed
from services.tools.history.views import History

T, C = "t1", "c1"


def opened() -> list[TableOpened | BettingOpened]:
    return [
        TableOpened(
            table_id=T,
            decks=1,
            paytable="standard",
            limits={"player": BetLimitSpec(minimum=100, maximum=10_000)},
            currency="EUR",
            betting_window_ms=100,
            cut_card_from_end=10,
        ),
        BettingOpened(
            table_id=T,
            coup_id=C,
            coup_number=1,
            shoe_id="s1",
            closes_at=datetime(2026, 1, 1, tzinfo=UTC),
            last_of_shoe=False,
        ),
    ]


def accepted(bet_id: str, amount: int = 1000) -> BetAccepted:
    return BetAccepted(
        table_id=T,
        bet_id=bet_id,
        coup_id=C,
        bettor_id="x",
        bet_type="player",
        amount=amount,
        currency="EUR",
    )


def settled(bet_id: str) -> BetSettled:
    return BetSettled(
        table_id=T,
        bet_id=bet_id,
        coup_id=C,
        bettor_id="x",
        bet_type="player",
        result="LOSE",
        stake=1000,
        payout=0,
        returned=0,
        currency="EUR",
    )


def totals(bets: int = 2) -> CoupSettled:
    return CoupSettled(
        table_id=T,
        coup_id=C,
        bets=bets,
        staked=1000 * bets,
        paid=0,
        house_result=1000 * bets,
        currency="EUR",
    )


def fed(*messages: object) -> tuple[History, MessageFeed]:
    history = History()
    feed = MessageFeed(history)
    for message in messages:
        feed.apply(message)  # type: ignore[arg-type]
    return history, feed


def test_a_redelivered_message_changes_nothing() -> None:
    bet = accepted("b1")
    history, feed = fed(*opened(), bet, bet)
    assert list(history.books[(T, C)].accepted) == ["b1"]
    assert history.books[(T, C)].twice == []
    assert feed.redeliveries == 1


def test_bets_settled_gather_into_the_settlement_their_coup_settled_closes() -> None:
    history, _feed = fed(*opened(), accepted("b1"), accepted("b2"), settled("b1"), settled("b2"))
    [open_settlement] = history.books[(T, C)].settlements
    assert [line.bet_id for line in open_settlement.lines] == ["b1", "b2"]
    assert open_settlement.staked is None  # its CoupSettled not seen yet
    history, _feed = fed(
        *opened(), accepted("b1"), accepted("b2"), settled("b1"), settled("b2"), totals()
    )
    [settlement] = history.books[(T, C)].settlements
    assert (settlement.bets, settlement.staked, settlement.paid) == (2, 2000, 0)
    assert settlement.house_result == 2000 and settlement.outcome is None  # not published


def test_a_second_coup_settled_is_a_second_settlement() -> None:
    history, _feed = fed(*opened(), accepted("b1"), settled("b1"), totals(1), totals(1))
    first, second = history.books[(T, C)].settlements
    assert [line.bet_id for line in first.lines] == ["b1"] and second.lines == []


def test_bets_seen_before_their_coup_opened_keep_their_book_and_get_its_terms() -> None:
    table, betting = opened()
    history, _feed = fed(table, accepted("b1"), betting, accepted("b2"))
    book = history.books[(T, C)]
    assert list(book.accepted) == ["b1", "b2"]
    assert book.paytable == "standard" and book.bounds == {"player": (100, 10_000)}
    assert history.coups[(T, C)].coup_number == 1
    assert history.tables[T].coups == [C]


def test_cards_drawn_one_by_one_gather_into_the_draw_of_their_request() -> None:
    cards = [
        CardDrawn(
            table_id=T, shoe_id="s1", coup_id=C, request_id=request, position=position, card=card
        )
        for request, position, card in (("r1", 5, "9H"), ("r1", 6, "2C"), ("r2", 7, "KD"))
    ]
    history, _feed = fed(*cards)
    draws = history.shoes[(T, "s1")].draws
    assert [(d.request_id, d.first_position, d.cards) for d in draws] == [
        ("r1", 5, ["9H", "2C"]),
        ("r2", 7, ["KD"]),
    ]


def test_a_refusal_for_an_unknown_coup_is_the_desks_else_the_books() -> None:
    def refused(bet_id: str, coup_id: str) -> BetRejected:
        return BetRejected(
            table_id=T,
            bet_id=bet_id,
            coup_id=coup_id,
            bettor_id="x",
            bet_type="tie",
            amount="5",
            currency="EUR",
            reason_code="NO_SUCH_COUP" if coup_id != C else "BELOW_MINIMUM",
            message="why",
        )

    history, _feed = fed(*opened(), refused("b1", C), refused("b2", "nope"))
    assert list(history.books[(T, C)].rejected) == ["b1"]
    assert list(history.desk_rejections[T]) == ["b2"]


def test_event_ids_kept_are_bounded_when_asked() -> None:
    ids = EventIds(limit=3)
    seen = [uuid4() for _ in range(5)]
    for event_id in seen:
        ids.add(event_id)
    assert len(ids) == 3
    assert seen[0] not in ids and seen[-1] in ids
