"""What each wallet answer means, and which calls a bet needs (no I/O): a debit of unknown fate is
rolled back, a refused one is not; a rollback's 404 is done; a credit of ``returned`` (stake
included), none for a loser unless zero credits are asked for; a void of a settled bet reverses
both its debit and its credit, the credit's reversal only once the credit is confirmed; every
transaction id is the bet's and the call's, the same each time."""

from __future__ import annotations

import pytest

from services.gateway.domain import Bet, Kind, Status, transaction_id
from services.gateway.wallet import Answer, judge


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
    ],
)
def test_an_answer_means(kind: Kind, answer: Answer, outcome: str, code: str) -> None:
    verdict = judge(kind, answer)
    assert (verdict.outcome, verdict.reason_code) == (outcome, code)


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


def test_transaction_ids_are_per_operator_bet_and_call() -> None:
    ids = {transaction_id(op, b, k) for op in ("acme", "bravo") for b in ("1", "2") for k in Kind}
    assert len(ids) == 16
    assert transaction_id("acme", "1", Kind.DEBIT) == transaction_id("acme", "1", Kind.DEBIT)
