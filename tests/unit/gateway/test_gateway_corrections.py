"""A settled bet's result corrected (``BetCorrected``, on an in-memory store): the gateway
records it once however often it is delivered, asks its wallet for the difference (a credit,
or a debit of winnings taken back) and counts it in the day's figures, so that the
reconciliation's ``net`` is the casino's result after the correction."""

from __future__ import annotations

from uuid import UUID

from contracts import BetCorrected, BetSettled
from services.gateway.application import GatewayApplication
from services.gateway.domain import Kind
from services.gateway.wallet import Answer, judge
from services.shared.platform.store.incidents import IncidentLog
from tests.unit.gateway.test_gateway_bet_ids_taken import (
    NOW,
    REQUEST,
    accepted,
    deliver,
    fields,
    gateway,
    won,
)

CORRECTION = UUID("0b6f8a52-94c3-4f57-9df6-0a4f3f1c2d11")


def lost() -> BetCorrected:
    """The banker win (975 returned) found a loss: 975 taken back."""
    return BetCorrected(
        **fields(),
        correction_id=CORRECTION,
        stake=500,
        previous_result="WIN",
        previous_payout=475,
        result="LOSE",
        payout=0,
        difference=-975,
        currency="EUR",
        occurred_at=NOW,
    )


def settled() -> BetSettled:
    return won().model_copy(update={"occurred_at": NOW})  # the day of the calls' figures


def corrected_bet(app: GatewayApplication) -> None:
    """The bet debited, accepted, settled a win, its credit confirmed, then found a loss."""
    bet = app.request(REQUEST)
    app.record_call(bet.bet_id, Kind.DEBIT, "confirmed", 200, 10_000)
    deliver(app, accepted())
    deliver(app, settled())
    app.record_call(bet.bet_id, Kind.CREDIT, "confirmed", 200, 10_475)
    deliver(app, lost())  # 975 to take back


def test_a_correction_is_recorded_once_and_its_difference_debited_after_the_credit() -> None:
    app = gateway()
    bet = app.request(REQUEST)
    app.record_call(bet.bet_id, Kind.DEBIT, "confirmed", 200, 10_000)
    deliver(app, accepted())
    deliver(app, settled())
    deliver(app, lost())
    deliver(app, lost())  # delivered again: nothing twice
    found = app.bet(REQUEST.bet_id)
    assert found is not None and found.corrections == {str(CORRECTION): -975}
    assert found.settlement is not None and found.settlement["result"] == "LOSE"
    assert [t.kind for t in found.due()] == [Kind.CREDIT]
    app.record_call(bet.bet_id, Kind.CREDIT, "confirmed", 200, 10_475)
    found = app.bet(REQUEST.bet_id)
    assert found is not None
    (debit,) = found.due()
    assert (debit.kind, debit.amount) == (Kind.CORRECTION_DEBIT, 975)
    answer = ("confirmed", 200, 9_500)
    app.record_call(bet.bet_id, Kind.CORRECTION_DEBIT, *answer, correction=str(CORRECTION))
    app.record_call(bet.bet_id, Kind.CORRECTION_DEBIT, *answer, correction=str(CORRECTION))
    found = app.bet(REQUEST.bet_id)
    assert found is not None and found.done
    ledger = app.ledger(NOW.date().isoformat())
    assert ledger is not None
    figures = ledger.figures["EUR"]
    assert (figures["corrections"], figures["corrected"]) == (1, -975)
    assert (figures["correction_debits"], figures["correction_debited"]) == (1, 975)
    # the casino's result: the stake kept, the winnings paid and then taken back
    net = figures["staked"] - figures["returned"] - figures["corrected"] - figures["adjusted"]
    assert net == 500


def test_a_refused_correction_debit_is_an_incident_and_is_asked_for_again() -> None:
    app = gateway()
    corrected_bet(app)
    bet = app.bet(REQUEST.bet_id)
    assert bet is not None
    verdict = judge(Kind.CORRECTION_DEBIT, Answer(402))
    app.record_call(
        bet.bet_id,
        Kind.CORRECTION_DEBIT,
        verdict.outcome,
        402,
        None,
        message=verdict.message,
        incident=verdict.incident,
        correction=str(CORRECTION),
    )
    found = app.bet(REQUEST.bet_id)
    assert found is not None and not found.done
    assert [(t.kind, t.amount) for t in found.due()] == [(Kind.CORRECTION_DEBIT, 975)]
    raised = app.process_recorder.select_notifications(1, 1000, topics=[IncidentLog.Raised.TOPIC])
    assert [app.mapper.to_domain_event(n).code for n in raised] == ["WALLET_CORRECTION_REFUSED"]
