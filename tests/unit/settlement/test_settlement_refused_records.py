"""What settlement does with a record its consumer refused but could identify (``intake.py``):
a bet read outside its table's partition, or that the contract refuses but whose bet id can
be read, gets a BetRejected on its operator's topic and nothing else; a fact read outside its
table's partition is an incident."""

from __future__ import annotations

import json
from typing import Any

import pytest
from eventsourcing.persistence import Tracking

from contracts import (
    BET_COMMANDS,
    HOUSE,
    TABLE_EVENTS,
    BetAccepted,
    BetRejected,
    ContractError,
    IncidentRaised,
    Message,
    PlaceBet,
    bet_commands_topic,
    decode,
    encode,
)
from services.settlement.application import SettlementApplication
from services.settlement.service import _subscriptions
from services.shared.platform.consumer import LOG_APPEND_TIME, Delivery, Refusal
from services.shared.platform.consumer.intake import misplaced, refused_bet
from services.shared.platform.security import Where
from tests.unit.settlement.harness import PLACED_AT, Dealing, Relay, bet, claim, settlement_app

PARTITIONS = 3
HOME = 1  # murmur2("t1") % 3: where t1's records belong
BETS = bet_commands_topic(HOUSE)
positions = iter(range(1, 10_000))


def deliver(
    app: SettlementApplication,
    message: Message,
    refusal: Refusal | None,
    topic: str = BETS,
) -> None:
    """``message`` handed to settlement's handler of ``topic`` as its consumer would."""
    handler = {s.topic: s.handler for s in _subscriptions(app)}[topic]
    tracking = Tracking(f"{topic}:0", next(positions))
    millis = int(PLACED_AT.timestamp() * 1000)  # the broker's append time: in the window
    delivery = Delivery(
        message, topic, 0, 7, "t1", None, tracking, millis, LOG_APPEND_TIME, refusal
    )
    handler([delivery], tracking)


def read_elsewhere(message: Message, partition: int = 0, key: bytes = b"t1") -> Refusal:
    """Why the consumer of ``partition`` refuses ``message`` keyed ``key``."""
    found = misplaced(message, key, Where("", "p." + BET_COMMANDS, partition), PARTITIONS)
    assert found is not None
    return found


def refused_document(**fields: Any) -> tuple[PlaceBet, Refusal]:
    """A PlaceBet's JSON with ``fields`` changed, as the consumer reads it: refused by the
    contract, answered because its bet id can be read."""
    document = json.loads(encode(bet("b9")))
    document.update(fields)
    with pytest.raises(ContractError) as refused:
        decode(BET_COMMANDS, json.dumps(document).encode())
    found = refused_bet(refused.value, b"t1")
    assert found is not None
    return found


@pytest.fixture
def dealing() -> Dealing:
    dealing = Dealing(settlement_app())
    dealing.open_table()
    dealing.open_betting("c1")
    return dealing


def test_the_home_partition_is_murmur2_of_the_table_id() -> None:
    assert misplaced(bet("b1"), b"t1", Where("", BETS, HOME), PARTITIONS) is None


def test_a_bet_read_in_another_partition_is_answered_and_changes_nothing(dealing: Dealing) -> None:
    app, relay = dealing.app, Relay(dealing.app)
    relay.pump()
    refusal = read_elsewhere(bet("b1"))
    assert refusal.code == "WRONG_PARTITION" and "murmur2" in refusal.message
    deliver(app, bet("b1"), refusal)
    [answer] = relay.pump()
    assert isinstance(answer, BetRejected) and answer.reason_code == "WRONG_PARTITION"
    assert answer.bet_id == "b1" and answer.message == refusal.message
    book = app.get_book("t1", "c1")
    assert book is not None and book.bet_count == 0
    assert app.bet_answer("b1") is None  # its id stays free: sent where it belongs, it is judged
    deliver(app, bet("b1"), None)
    [accepted] = relay.pump()
    assert isinstance(accepted, BetAccepted) and accepted.bet_id == "b1"


def test_a_misplaced_copy_of_an_accepted_bet_changes_nothing_of_it(dealing: Dealing) -> None:
    app, relay = dealing.app, Relay(dealing.app)
    deliver(app, bet("b1"), None)
    relay.pump()
    deliver(app, bet("b1", amount=5000), read_elsewhere(bet("b1"), key=b"other"))
    [answer] = relay.pump()
    assert isinstance(answer, BetRejected) and answer.reason_code == "WRONG_KEY"
    found = app.bet_answer("b1")
    assert found is not None and found.accepted
    book = app.get_book("t1", "c1")
    assert book is not None and book.bet_count == 1


def test_a_fact_read_in_another_partition_is_an_incident_and_changes_nothing(
    dealing: Dealing,
) -> None:
    app, relay = dealing.app, Relay(dealing.app)
    dealing.close_betting("c1")
    relay.pump()
    result = claim("t1", "c1", 1, ["9H", "KD"], ["2C", "5S"])
    deliver(app, result, read_elsewhere(result), TABLE_EVENTS)
    [incident] = relay.pump()
    assert isinstance(incident, IncidentRaised) and incident.code == "WRONG_PARTITION"
    assert incident.evidence_id == result.event_id and incident.coup_id == "c1"
    book = app.get_book("t1", "c1")
    assert book is not None and book.claims == [] and book.facts is None


@pytest.mark.parametrize(
    ("fields", "code", "echoed"),
    [
        ({"amount": 10**25}, "INVALID_AMOUNT", {"amount": str(10**25)}),
        ({"amount": 12.5}, "INVALID_AMOUNT", {"amount": "12.5"}),
        ({"amount": "x\ud800"}, "INVALID_AMOUNT", {"amount": ""}),  # no answer could quote it
        ({"bet_type": "x" * 600}, "UNKNOWN_BET_TYPE", {"bet_type": "x" * 40}),
        ({"currency": ["EUR"]}, "WRONG_CURRENCY", {"currency": '["EUR"]'}),
        ({"bettor_id": ""}, "INVALID_BETTOR_ID", {"bettor_id": "?"}),
        ({"coup_id": "c" * 500}, "NO_SUCH_COUP", {"coup_id": "c" * 128}),
        ({"table_id": "a b"}, "NO_SUCH_TABLE", {"table_id": "t1"}),  # the record's key
        ({"event_id": "not a uuid"}, "INVALID_ENVELOPE", {}),
        ({"odds": 2}, "INVALID_ENVELOPE", {}),
        ({"amount": 10**25, "occurred_at": 1}, "INVALID_ENVELOPE", {}),  # the first field
    ],
)
def test_a_bet_the_contract_refuses_is_answered_with_its_first_wrong_field(
    dealing: Dealing, fields: dict[str, Any], code: str, echoed: dict[str, str]
) -> None:
    app, relay = dealing.app, Relay(dealing.app)
    relay.pump()
    message, refusal = refused_document(**fields)
    assert refusal.code == code and next(iter(fields)) in refusal.message
    deliver(app, message, refusal)
    [answer] = relay.pump()  # a valid BetRejected (the relay's round trip is checked)
    assert isinstance(answer, BetRejected) and answer.reason_code == code
    assert answer.bet_id == "b9" and len(answer.message) <= 1000
    assert {name: getattr(answer, name) for name in echoed} == echoed
    book = app.get_book("t1", "c1")
    assert book is not None and book.bet_count == 0


def test_an_answered_broken_bet_is_idempotent_by_its_id(dealing: Dealing) -> None:
    app, relay = dealing.app, Relay(dealing.app)
    relay.pump()
    message, refusal = refused_document(amount=10**25)
    deliver(app, message, refusal)
    deliver(app, message, refusal)  # resent: the recorded answer, nothing new
    [answer] = relay.pump()
    assert isinstance(answer, BetRejected) and answer.reason_code == "INVALID_AMOUNT"
    deliver(app, bet("b9"), None)  # the id is taken, like any binding refusal
    [again] = relay.pump()
    assert isinstance(again, BetRejected) and again.reason_code == "DUPLICATE_BET_ID"


def test_a_document_without_a_readable_bet_id_is_not_answered() -> None:
    for fields in ({"bet_id": "x" * 65}, {"bet_id": 7}, {"type": "OpenBook"}):
        document = {**json.loads(encode(bet("b9"))), **fields}
        with pytest.raises(ContractError) as refused:
            decode(BET_COMMANDS, json.dumps(document).encode())
        assert refused_bet(refused.value, b"t1") is None
