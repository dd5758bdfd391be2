"""What each wallet answer means, and which calls a bet needs (no I/O): a debit of unknown fate is
rolled back, a refused one is not; a rollback's 404 is done; a credit of ``returned`` (stake
included), none for a loser unless zero credits are asked for; a void of a settled bet reverses
both its debit and its credit, the credit's reversal only once the credit is confirmed; every
transaction id is the bet's and the call's, the same each time. A correction's difference is
a credit or a debit of its own after the settlement's credit, one correction at a time; a
correction's debit refused is asked for again; a corrected coup voided reverses each
correction's call (one not made yet is rolled back instead of made), then the credit."""

from __future__ import annotations

import pytest

from services.gateway.domain import CORRECTIONS, Bet, Kind, Status, transaction_id
from services.gateway.wallet import Answer, _balance, judge


@pytest.mark.parametrize(
    ("kind", "answer", "outcome", "code"),
    [
        (Kind.DEBIT, Answer(200, 900), "confirmed", ""),
        (Kind.DEBIT, Answer(402), "refused", "INSUFFICIENT_FUNDS"),
        (Kind.DEBIT, Answer(409), "refused", "WALLET_REFUSED"),
        (Kind.DEBIT, Answer(400), "refused", "WALLET_REFUSED"),
        (Kind.DEBIT, Answer(500), "unknown", "WALLET_UNAVAILABLE"),
        (Kind.DEBIT, Answer(None, error="ReadTimeout"), "unknown", "WALLET_UNAVAILABLE"),
        (
            Kind.DEBIT,
            Answer(200, None, "with a body that is not JSON"),
            "unknown",
            "WALLET_UNAVAILABLE",
        ),
        (Kind.CREDIT, Answer(200, 5), "confirmed", ""),
        (Kind.CREDIT, Answer(404), "retry", ""),
        (Kind.CREDIT, Answer(500), "retry", ""),
        (Kind.ROLLBACK, Answer(404), "confirmed", ""),
        (Kind.CREDIT_ROLLBACK, Answer(404), "confirmed", ""),
        (Kind.ROLLBACK, Answer(None, error="ConnectError"), "retry", ""),
        (Kind.CORRECTION_CREDIT, Answer(200, 5), "confirmed", ""),
        (Kind.CORRECTION_CREDIT, Answer(402), "retry", ""),
        (Kind.CORRECTION_DEBIT, Answer(200, 5), "confirmed", ""),
        (Kind.CORRECTION_DEBIT, Answer(402), "retry", ""),  # asked for again: decided
        (Kind.CORRECTION_DEBIT, Answer(503), "retry", ""),  # never rolled back: retried
        (Kind.CORRECTION_DEBIT, Answer(None, error="ReadTimeout"), "retry", ""),
        (Kind.CORRECTION_ROLLBACK, Answer(404), "confirmed", ""),
    ],
)
def test_an_answer_means(kind: Kind, answer: Answer, outcome: str, code: str) -> None:
    verdict = judge(kind, answer)
    assert (verdict.outcome, verdict.reason_code) == (outcome, code)


@pytest.mark.parametrize(
    "body", [b"", b"{", b"[" * 3000 + b"]" * 3000, b'{"balance": ' + b"9" * 5000 + b"}"]
)
def test_a_body_that_cannot_be_read_is_an_answer_without_a_balance(body: bytes) -> None:
    """Never an error (a RecursionError once escaped, and the debit was sent again and
    again, never rolled back): the call's fate is unknown (WALLET_UNAVAILABLE, rolled back)."""
    assert _balance(body) == (None, "with a body that is not JSON")


def test_a_refused_correction_debit_is_an_incident() -> None:
    verdict = judge(Kind.CORRECTION_DEBIT, Answer(402))
    assert verdict.incident is not None and verdict.incident[0] == "WALLET_CORRECTION_REFUSED"
    below = judge(Kind.CORRECTION_DEBIT, Answer(200, -5)).incident
    assert below is not None and below[0] == "WALLET_BALANCE_MISMATCH"


def test_a_balance_that_does_not_add_up_is_an_incident_not_trusted() -> None:
    verdict = judge(Kind.DEBIT, Answer(200, -5))
    assert verdict.outcome == "confirmed"
    assert verdict.incident is not None and verdict.incident[0] == "WALLET_BALANCE_MISMATCH"
    assert judge(Kind.CREDIT, Answer(200, None, "x")).incident is not None


def bet(debit: bool = True) -> Bet:
    return Bet(
        operator="acme",
        bet_id="b1",
        table_id="t1",
        coup_id="c1",
        bettor_id="p1",
        bet_type="player",
        amount=1000,
        currency="EUR",
        digest="d",
        debit=debit,
    )


def test_a_settled_then_voided_winner_reverses_its_debit_and_then_its_credit() -> None:
    found = bet()
    assert [t.kind for t in found.due()] == [Kind.DEBIT]
    found.confirm("debit", 200, 9000)
    found.place()
    found.answer(True, None, "")
    found.settle("WIN", 1000, 1000, 2000, True, "2026-12-05")
    (credit,) = found.due()
    assert (credit.kind, credit.amount) == (Kind.CREDIT, 2000)  # returned, stake included
    found.refunded(1000, -1000, "2026-12-05")
    assert [t.kind for t in found.due()] == [Kind.CREDIT, Kind.ROLLBACK]  # not yet reversed
    found.confirm("credit", 200, 11000)
    due = {t.kind: t for t in found.due()}
    assert set(due) == {Kind.ROLLBACK, Kind.CREDIT_ROLLBACK}
    assert due[Kind.CREDIT_ROLLBACK].reference == transaction_id("acme", "b1", Kind.CREDIT)
    assert due[Kind.ROLLBACK].reference == transaction_id("acme", "b1", Kind.DEBIT)
    found.confirm("rollback", 200, 12000)
    found.confirm("credit-rollback", 200, 10000)
    assert found.done


def test_refusals_and_losses_need_the_calls_they_need() -> None:
    unknown = bet()
    unknown.debit_failed("WALLET_UNAVAILABLE", "timed out", None, True)
    assert unknown.status is Status.REJECTED
    assert [t.kind for t in unknown.due()] == [Kind.ROLLBACK]
    refused = bet()
    refused.debit_failed("INSUFFICIENT_FUNDS", "402", 402, False)
    assert refused.due() == [] and refused.done
    loser = bet()
    loser.confirm("debit", 200, 0)
    loser.place()
    loser.answer(True, None, "")
    loser.settle("LOSE", 1000, 0, 0, False, "2026-12-05")
    assert loser.due() == [] and loser.done
    no_wallet = bet(debit=False)
    no_wallet.place()
    no_wallet.answer(False, "BETTING_CLOSED", "late")
    assert no_wallet.due() == [] and no_wallet.done


def test_transaction_ids_are_per_operator_bet_call_and_correction() -> None:
    calls = [(k, "") for k in Kind if k not in CORRECTIONS]
    calls += [(k, c) for k in CORRECTIONS for c in ("c1", "c2")]
    ids = {
        transaction_id(op, b, *call)
        for op in ("acme", "bravo")
        for b in ("1", "2")
        for call in calls
    }
    assert len(ids) == 2 * 2 * (4 + 3 * 2)
    # the ids of calls already made never change (a retry after an upgrade is the same call)
    assert transaction_id("acme", "1", Kind.DEBIT) == "cf64d637-7fda-567d-b270-43f9ce4ef800"


def settled(found: Bet, result: str, payout: int, returned: int) -> Bet:
    found.confirm("debit", 200, 9000)
    found.place()
    found.answer(True, None, "")
    found.settle(result, 1000, payout, returned, returned > 0, "2026-12-05")
    return found


def test_a_correction_moves_its_difference_after_the_settlements_credit_and_in_order() -> None:
    found = settled(bet(), "WIN", 1000, 2000)
    found.correct("c1", "LOSE", 0, 0, -2000, "2026-12-06")  # the win taken back
    found.correct("c2", "WIN", 1000, 2000, 2000, "2026-12-06")  # and given again
    assert [t.kind for t in found.due()] == [Kind.CREDIT]  # the settlement's credit first
    assert found.transaction(Kind.CREDIT).amount == 2000  # what it was: same id, same amount
    found.confirm("credit", 200, 11000)
    (first,) = found.due()  # one correction at a time, in their order
    assert (first.kind, first.amount, first.correction) == (Kind.CORRECTION_DEBIT, 2000, "c1")
    assert first.transaction_id == transaction_id("acme", "b1", Kind.CORRECTION_DEBIT, "c1")
    found.confirm("correction-debit", 200, 9000, "c1")
    (second,) = found.due()
    assert (second.kind, second.amount, second.correction) == (Kind.CORRECTION_CREDIT, 2000, "c2")
    found.confirm("correction-credit", 200, 11000, "c2")
    assert found.due() == [] and found.done
    assert found.settlement is not None and found.settlement["returned"] == 2000


def test_a_corrected_coup_voided_reverses_each_correction_and_then_the_credit() -> None:
    found = settled(bet(), "PUSH", 0, 1000)  # the stake back
    found.confirm("credit", 200, 10000)
    found.correct("c1", "WIN", 1000, 2000, 1000, "2026-12-06")
    found.confirm("correction-credit", 200, 11000, "c1")
    found.refunded(1000, -1000, "2026-12-06")  # stake - returned (after the correction)
    due = {t.kind: t for t in found.due()}
    # the correction's reversal first: the credit's waits (never more taken than was paid)
    assert set(due) == {Kind.ROLLBACK, Kind.CORRECTION_ROLLBACK}
    back = due[Kind.CORRECTION_ROLLBACK]
    assert back.reference == transaction_id("acme", "b1", Kind.CORRECTION_CREDIT, "c1")
    assert back.amount == 1000
    found.confirm("rollback", 200, 12000)
    found.confirm("correction-rollback", 200, 11000, "c1")
    (credit_back,) = found.due()
    assert (credit_back.kind, credit_back.amount) == (Kind.CREDIT_ROLLBACK, 1000)
    found.confirm("credit-rollback", 200, 10000)
    assert found.due() == [] and found.done  # the player ends with the stake


def test_a_correction_waits_for_the_one_before_it_however_long_the_wallet_refuses() -> None:
    found = settled(bet(), "WIN", 1000, 2000)
    found.confirm("credit", 200, 11000)
    found.correct("c1", "LOSE", 0, 0, -2000, "2026-12-06")
    found.correct("c2", "WIN", 1000, 2000, 2000, "2026-12-06")
    for _ in range(3):  # refused (402) again and again: asked for again, nothing after it
        assert [(t.kind, t.correction) for t in found.due()] == [(Kind.CORRECTION_DEBIT, "c1")]
    assert not found.done


def test_a_coup_voided_before_a_corrections_call_rolls_that_call_back_instead() -> None:
    found = settled(bet(), "WIN", 1000, 2000)
    found.confirm("credit", 200, 11000)
    found.correct("c1", "LOSE", 0, 0, -2000, "2026-12-06")  # its debit not taken yet
    found.refunded(1000, 1000, "2026-12-06")
    due = {t.kind: t for t in found.due()}
    assert set(due) == {Kind.ROLLBACK, Kind.CORRECTION_ROLLBACK}  # never the debit itself
    back = due[Kind.CORRECTION_ROLLBACK]
    assert back.reference == transaction_id("acme", "b1", Kind.CORRECTION_DEBIT, "c1")
    found.confirm("correction-rollback", 404, None, "c1")  # the wallet never had it
    assert {t.kind for t in found.due()} == {Kind.ROLLBACK, Kind.CREDIT_ROLLBACK}
    assert found.transaction(Kind.CREDIT_ROLLBACK).amount == 2000  # what the credit moved
    assert Kind.CORRECTION_DEBIT not in {t.kind for t in found.calls()}


def test_an_operator_without_a_wallet_makes_no_correction_call() -> None:
    found = bet(debit=False)
    found.place()
    found.answer(True, None, "")
    found.settle("LOSE", 1000, 0, 0, False, "2026-12-05")
    found.correct("c1", "WIN", 1000, 2000, 2000, "2026-12-06")
    assert found.calls() == [] and found.done
