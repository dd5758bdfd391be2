"""Placing bets: acceptance, every refusal reason, idempotency by bet id."""

from __future__ import annotations

import json
from datetime import timedelta
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts import HOUSE, BetAccepted, BetRejected, PlaceBet
from services.settlement.application import SettlementApplication
from services.settlement.bet_ids import change_row
from services.settlement.bet_index import Answered, BetAnswer, BetRequest
from services.settlement.books import BetBook
from services.settlement.desk import BetDesk, desk_aggregate_id, held_line
from services.shared.facts.settlement import AnswerLine
from tests.unit.settlement.harness import (
    CLOSES_AT,
    PLACED_AT,
    POPO,
    Dealing,
    Relay,
    bet,
    settlement_app,
)


@pytest.fixture
def dealing() -> Dealing:
    dealing = Dealing(settlement_app(env=POPO))
    dealing.open_table()
    dealing.open_betting("c1")
    return dealing


@pytest.fixture
def app(dealing: Dealing) -> SettlementApplication:
    return dealing.app


def test_a_good_bet_is_accepted(app: SettlementApplication) -> None:
    answer = app.place_bet(bet("b1", amount="2500.00"))
    assert answer.accepted and not answer.repeated
    accepted = Relay(app).pump()
    assert len(accepted) == 1 and isinstance(accepted[0], BetAccepted)
    assert (accepted[0].bet_id, accepted[0].amount, accepted[0].bet_type) == ("b1", 2500, "player")
    book = app.get_book("t1", "c1")
    assert book is not None and book.bet_count == 1


@pytest.mark.parametrize(
    ("command", "code"),
    [
        (bet("x", table_id="t9", coup_id="t9.c1"), "NO_SUCH_TABLE"),
        (bet("x", amount=99), "BELOW_MINIMUM"),
        (bet("x", amount=100_001), "ABOVE_MAXIMUM"),
        (bet("x", bet_type="tie", amount=10_001), "ABOVE_MAXIMUM"),
        (bet("x", currency="USD"), "WRONG_CURRENCY"),
        (bet("x", currency="eur"), "WRONG_CURRENCY"),
        (bet("x", amount=0), "INVALID_AMOUNT"),
        (bet("x", amount=-500), "INVALID_AMOUNT"),
        (bet("x", amount="1000.5"), "INVALID_AMOUNT"),
        (bet("x", bet_type="dragon"), "UNKNOWN_BET_TYPE"),
        (bet("x", bet_type="PLAYER"), "UNKNOWN_BET_TYPE"),
    ],
)
def test_a_bad_bet_is_rejected_with_its_reason(
    app: SettlementApplication, command: PlaceBet, code: str
) -> None:
    answer = app.place_bet(command)
    assert not answer.accepted
    assert answer.reason_code == code
    published = Relay(app).pump()
    assert len(published) == 1 and isinstance(published[0], BetRejected)
    rejected = published[0]
    assert (rejected.reason_code, rejected.bet_id, rejected.amount) == (
        code,
        "x",
        str(command.amount),
    )
    assert rejected.message == answer.message and rejected.message
    book = app.get_book("t1", "c1")
    assert book is not None and book.bet_count == 0


def test_player_and_banker_from_one_bettor_are_opposing(app: SettlementApplication) -> None:
    assert app.place_bet(bet("b1", bet_type="player")).accepted
    assert app.place_bet(bet("b2", bet_type="tie")).accepted
    refused = app.place_bet(bet("b3", bet_type="banker"))
    assert refused.reason_code == "OPPOSING_BETS"
    assert app.place_bet(bet("b4", bet_type="banker", bettor_id="bob")).accepted
    assert app.place_bet(bet("b5", bet_type="player")).accepted  # same side again is fine


def test_betting_closed_after_betting_closed_or_for_a_bet_placed_too_late(
    app: SettlementApplication, dealing: Dealing
) -> None:
    assert app.place_bet(bet("late"), placed_at=CLOSES_AT).reason_code == "BETTING_CLOSED"
    # Placed in time: accepted however late it is judged, until the coup is settled.
    early = CLOSES_AT - timedelta(microseconds=1)
    assert app.place_bet(bet("early"), placed_at=early).accepted
    dealing.close_betting("c1")
    assert app.place_bet(bet("after-close"), placed_at=CLOSES_AT).reason_code == ("BETTING_CLOSED")


def test_a_closed_table_takes_no_bets(app: SettlementApplication, dealing: Dealing) -> None:
    dealing.close_betting("c1")
    dealing.close_table()
    assert app.place_bet(bet("x")).reason_code == "TABLE_CLOSED"


def test_a_resent_bet_gets_the_original_answer_and_changes_nothing(
    app: SettlementApplication,
) -> None:
    relay = Relay(app)
    first = app.place_bet(bet("b1"))
    relay.pump()
    again = app.place_bet(bet("b1", amount="1000.00"))  # the same amount, written differently
    assert again.accepted and again.repeated
    refused = app.place_bet(bet("r1", amount=5))
    again_refused = app.place_bet(bet("r1", amount=5))
    assert again_refused.repeated and again_refused.reason_code == refused.reason_code
    assert first.accepted
    assert [type(m).__name__ for m in relay.pump()] == ["BetRejected"]  # r1 once, b1 not again
    book = app.get_book("t1", "c1")
    assert book is not None and book.bet_count == 1


@pytest.mark.parametrize("amount", ["sNaN", "NaN", "-Infinity", "\u0661\u0660\u0660\u0660"])
def test_a_resent_bet_whose_amount_is_not_a_number_gets_its_first_answer(
    app: SettlementApplication, amount: str
) -> None:
    """Its amount is compared as its text (Decimal's NaN equals nothing, its sNaN raised on
    every later bet of the id, so that none was ever answered again)."""
    first = app.place_bet(bet("b1", amount=amount))
    assert first.reason_code == "INVALID_AMOUNT"
    again = app.place_bet(bet("b1", amount=amount))
    assert again.repeated and again.reason_code == "INVALID_AMOUNT"
    assert app.place_bet(bet("b1")).reason_code == "DUPLICATE_BET_ID"


def test_a_reused_bet_id_with_other_content_is_a_duplicate(app: SettlementApplication) -> None:
    assert app.place_bet(bet("b1")).accepted
    for other in (bet("b1", amount=2000), bet("b1", bettor_id="bob"), bet("b1", bet_type="tie")):
        answer = app.place_bet(other)
        assert answer.reason_code == "DUPLICATE_BET_ID"
    assert app.place_bet(bet("b1")).repeated  # the original is still the answer to a resend
    book = app.get_book("t1", "c1")
    assert book is not None and book.bet_count == 1


def test_a_bet_ahead_of_its_coups_open_mark_is_refused_and_its_id_stays_free(
    app: SettlementApplication, dealing: Dealing
) -> None:
    relay = Relay(app)
    early = bet("b1", coup_id="c2")
    bogus = bet("b2", coup_id="c9", bettor_id="bob")
    bad = bet("b3", coup_id="c2", bettor_id="carol", amount=5)
    for command in (early, bogus, bad):
        assert app.place_bet(command).reason_code == "NO_SUCH_COUP"
        assert app.bet_answer(command.bet_id) is None  # the id stays free
    assert [getattr(m, "reason_code", None) for m in relay.pump()] == ["NO_SUCH_COUP"] * 3
    dealing.close_betting("c1")
    assert [type(m).__name__ for m in relay.pump()] == ["BetsClosed"]
    dealing.open_betting("c2", number=2)
    for command in (early, bogus, bad):  # sent again once the coup is open
        app.place_bet(command)
    answers = sorted(relay.pump(), key=lambda m: getattr(m, "bet_id", ""))
    assert [
        (type(m).__name__, getattr(m, "bet_id", None), getattr(m, "reason_code", None))
        for m in answers
    ] == [
        ("BetAccepted", "b1", None),
        ("BetRejected", "b2", "NO_SUCH_COUP"),
        ("BetRejected", "b3", "BELOW_MINIMUM"),
    ]
    assert app.place_bet(early).repeated and app.place_bet(early).accepted


def test_bets_held_by_an_earlier_version_are_refused_when_the_table_closes(
    app: SettlementApplication, dealing: Dealing
) -> None:
    hold_as_before(app, [held_line("c2", "b1", "alice", "player", "1000", "EUR", PLACED_AT)])
    assert app.bet_answer("b1") == BetAnswer("b1", False, held=True)
    dealing.close_betting("c1")
    dealing.close_table()
    assert app.bet_answer("b1") == BetAnswer("b1", False, "TABLE_CLOSED", "table t1 is closed")
    relay = Relay(app)
    refused = [m for m in relay.pump() if getattr(m, "bet_id", None) == "b1"]
    assert [getattr(m, "reason_code", None) for m in refused] == ["TABLE_CLOSED"]


def test_a_bet_on_an_unknown_table_is_refused_at_once(app: SettlementApplication) -> None:
    answer = app.place_bet(bet("x", table_id="t9", coup_id="t9.c1"))
    assert answer.reason_code == "NO_SUCH_TABLE"
    assert app.bet_answer("x") is None  # the id stays free


def hold_as_before(app: SettlementApplication, lines: list[list[str]]) -> None:
    """Record held bets the way the version before OpenBook did (one BetsHeld event)."""
    with app.unit_of_work() as uow:
        desk = uow.get(desk_aggregate_id("t1"), BetDesk)
        if desk is None:
            desk = BetDesk(table_id="t1")
            uow.add(desk)
        for line in lines:
            desk.draft_hold(line)
            app.bet_index.replay(BetRequest.held("t1", line), BetAnswer(line[1], False, held=True))
        desk.flush()


def test_a_bets_amount_is_parsed_once_where_it_enters(
    app: SettlementApplication, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``_place_bet`` parses the amount; the book and the rules judge the parsed stake."""
    from services.settlement import application
    from services.shared.rules import validation

    calls: list[object] = []
    parse = validation.parse_amount

    def counted(amount: object) -> int | None:
        calls.append(amount)
        return parse(amount)

    monkeypatch.setattr(application, "parse_amount", counted)
    monkeypatch.setattr(validation, "parse_amount", lambda amount: pytest.fail("parsed again"))
    assert app.place_bet(bet("b1", amount="2500.00")).accepted
    refused = app.place_bet(bet("b2", amount="12.5"))
    assert refused.reason_code == "INVALID_AMOUNT" and "12.5" in refused.message
    assert calls == ["2500.00", "12.5"]


@given(st.lists(st.text(max_size=12), min_size=6, max_size=6))
def test_a_bet_ids_row_holds_the_bet_as_json_dumps_writes_it(parts: list[str]) -> None:
    """The row's ``bet`` is written without json.dumps (a third of its cost), byte for byte
    as it would write it: quotes, backslashes, control and non-ASCII characters escaped."""
    table_id, coup_id, bettor_id, bet_type, amount, currency = parts
    request = BetRequest(table_id, coup_id, "b1", bettor_id, bet_type, amount, currency)
    row = change_row(("house", "b1"), Answered(request, BetAnswer("b1", True)), 0)
    assert row is not None and row[3] == json.dumps(parts)
    assert json.loads(row[3]) == parts


def test_a_bet_ids_row_holds_a_part_that_is_not_text_as_json_dumps_writes_it() -> None:
    request = BetRequest("t1", "c1", "b1", "p1", "player", 2500, "EUR")  # type: ignore[arg-type]
    row = change_row(("house", "b1"), Answered(request, BetAnswer("b1", True)), 0)
    assert row is not None and row[3] == '["t1", "c1", "p1", "player", 2500, "EUR"]'


def test_a_replayed_answer_takes_its_bet_unless_the_book_holds_it_as_it_is() -> None:
    """Live, the book took an accepted bet when it drafted it, and its BetsAnswered does not
    take it again; a replay takes every line, the later of two with one id as before."""
    book = BetBook(
        table_id="t1",
        coup_id="c1",
        paytable="standard",
        limits={name: {"minimum": 1, "maximum": 10**6} for name in ("player", "banker")},
        currency="EUR",
        closes_at=CLOSES_AT,
    )
    lines = [
        AnswerLine("b1", "alice", "player", 100, "EUR", None, ""),
        AnswerLine("b1", "bob", "banker", 500, "EUR", None, ""),
        AnswerLine("b2", "alice", "player", 200, "EUR", None, ""),
    ]
    BetBook.BetsAnswered.apply(SimpleNamespace(operator=HOUSE, lines=lines), book)  # type: ignore[arg-type]
    assert book.bets[(HOUSE, "b1")].bettor_id == "bob"
    assert set(book.bettor_types) == {(HOUSE, "alice"), (HOUSE, "bob")}
    held = dict(book.bets), book.exposure
    BetBook.BetsAnswered.apply(SimpleNamespace(operator=HOUSE, lines=lines[1:]), book)  # type: ignore[arg-type]
    assert (dict(book.bets), book.exposure) == held  # taken as they are: nothing changes
