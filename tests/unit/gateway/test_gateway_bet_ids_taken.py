"""A bet id another writer of the operator's bet-commands topic placed first (on an in-memory
store): settlement answers the gateway's own copy with nothing (a resend), so the gateway
refuses it DUPLICATE_BET_ID instead of leaving its stake debited for ever: at once when it is
requested after the other's answer, with its debit rolled back when the answer comes while
the debit is on its way; an answer that leaves the id free (NO_SUCH_COUP) takes nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import count

from eventsourcing.persistence import Tracking

from contracts import BET_EVENTS, BetAccepted, BetRejected, BetSettled, Message
from services.gateway.application import BetRequest, GatewayApplication
from services.gateway.domain import Bet, Kind, Status
from services.shared.platform.consumer import Delivery, with_unit_of_work

REQUEST = BetRequest("b-7", "p1", "vip-1", "vip-1.coup-3", "banker", 500, "EUR")
offsets = count(1)


NOW = datetime(2026, 12, 5, 12, tzinfo=UTC)


def gateway() -> GatewayApplication:
    env = {"PERSISTENCE_MODULE": "eventsourcing.popo"}
    return GatewayApplication(env=env, wallet=True, clock=lambda: NOW)


def deliver(app: GatewayApplication, message: Message) -> None:
    """``message`` read from the operator's bet-events topic."""
    tracking = Tracking(f"gateway:{BET_EVENTS}:0", next(offsets))
    delivery = Delivery(message, BET_EVENTS, 0, tracking.notification_id, "vip-1", None, tracking)
    with_unit_of_work(app, app.handle)([delivery], tracking)


def fields() -> dict[str, object]:
    return {
        "table_id": REQUEST.table_id,
        "coup_id": REQUEST.coup_id,
        "bet_id": REQUEST.bet_id,
        "bettor_id": REQUEST.player_id,
        "bet_type": REQUEST.bet_type,
    }


def accepted() -> BetAccepted:
    return BetAccepted(**fields(), amount=REQUEST.amount, currency=REQUEST.currency)


def rejected(code: str) -> BetRejected:
    return BetRejected(
        **fields(), amount=str(REQUEST.amount), currency="EUR", reason_code=code, message="no"
    )


def won() -> BetSettled:
    return BetSettled(
        **fields(),
        result="WIN",
        stake=500,
        payout=475,
        returned=975,
        currency="EUR",
    )


def placed(app: GatewayApplication) -> list[object]:
    """The Placed facts the relay would publish as PlaceBets."""
    found = app.process_recorder.select_notifications(1, 1000, topics=[Bet.Placed.TOPIC])
    return list(found)


def test_a_bet_id_answered_before_the_gateway_heard_of_it_is_refused_and_debits_nothing() -> None:
    app = gateway()
    deliver(app, accepted())  # another writer's copy, accepted
    deliver(app, won())
    bet = app.request(REQUEST)
    assert (bet.status, bet.reason_code) == (Status.REJECTED, "DUPLICATE_BET_ID")
    assert "another client" in bet.message
    assert bet.due() == [] and bet.done and not placed(app)
    assert app.round_bets(REQUEST.table_id, REQUEST.coup_id) == [REQUEST.bet_id]
    assert app.request(REQUEST).status is Status.REJECTED  # the same again: the same answer


def test_an_answer_while_its_debit_is_on_its_way_refuses_the_bet_and_rolls_it_back() -> None:
    app = gateway()
    assert [t.kind for t in app.request(REQUEST).due()] == [Kind.DEBIT]
    deliver(app, accepted())  # the other writer's copy got there first
    refused = app.bet(REQUEST.bet_id)
    assert refused is not None and refused.reason_code == "DUPLICATE_BET_ID"
    bet = app.record_call(REQUEST.bet_id, Kind.DEBIT, "confirmed", 200, 999_500)
    assert bet is not None and not bet.placed and not placed(app)  # never sent to settlement
    assert [t.kind for t in bet.due()] == [Kind.ROLLBACK]
    deliver(app, won())  # the other copy's money, not this bet's
    bet = app.record_call(REQUEST.bet_id, Kind.ROLLBACK, "confirmed", 200, 1_000_000)
    assert bet is not None and bet.done and bet.settlement is None
    ledger = app.ledger("2026-12-05")
    assert ledger is not None
    figures = ledger.figures["EUR"]
    assert (figures["debited"], figures["rolled_back"], figures["credited"]) == (500, 500, 0)


def test_an_answer_that_leaves_the_id_free_takes_nothing() -> None:
    app = gateway()
    deliver(app, rejected("NO_SUCH_COUP"))  # the other copy overtook its coup: id still free
    assert app.request(REQUEST).debit_pending
    deliver(app, rejected("NO_SUCH_COUP"))
    bet = app.record_call(REQUEST.bet_id, Kind.DEBIT, "confirmed", 200, 999_500)
    assert bet is not None and bet.placed and bet.status is Status.PENDING
