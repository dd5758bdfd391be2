"""Every publication agrees with its fact: the same fields by name, and the same types.

A stored fact becomes its contract(s) by field name (``services.shared.platform.relay.publishing``).
These tests list every publication of the three services (their ``to_messages`` tables, and
incidents) and check that the contract's payload fields are the fact's fields (plus what is
derived, minus what stays private), that line records hold contract fields, and, as a
property, that a valid contract message turned into its fact, stored, read back and
published again is the very same message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.domain import CanInitAggregate
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import contracts as c
from services.dealing.domain import CommandRejections
from services.dealing.messages import to_messages as dealing_messages
from services.settlement.domain import BetBook
from services.settlement.messages import to_messages as settlement_messages
from services.shared.facts import Fact, fact_fields, fact_from, line_fields, line_from
from services.shared.facts.dealing import (
    DEALING_FACTS,
    CommandRejectedFact,
    CoupCorrectedFact,
    CoupVoidedFact,
)
from services.shared.facts.incidents import IncidentRaisedFact
from services.shared.facts.settlement import (
    SETTLEMENT_FACTS,
    AnswerLine,
    BetsAnsweredFact,
    BookOpenedFact,
    CorrectedLine,
    CoupRefundedFact,
    CoupSettledFact,
    OperatorClosedFact,
    RefundLine,
    SettledLine,
    SettlementCorrectedFact,
)
from services.shared.facts.shoe import (
    SHOE_FACTS,
    CardsAcceptedFact,
    CardsBurnedFact,
    CorrectionWaitingFact,
    CoupClearedFact,
    DrawRequestedFact,
    ReadTakenFact,
    ReadWaitingFact,
    ShoeAttachedFact,
    ShoeHeldFact,
    ShoeShuffledFact,
    StudioShoeOpenedFact,
    StudioTableStartedFact,
)
from services.shared.platform.relay import message_id, with_incidents
from services.shared.platform.relay.lines import line_ids
from services.shared.platform.relay.publishing import Publication, payload_fields
from services.shared.platform.security import (
    SecretKeys,
)
from services.shared.platform.store import ServiceApplication
from services.shared.platform.store.application import FactMapper
from services.shared.platform.store.incidents import IncidentLog
from services.shoe.messages import to_messages as shoe_messages
from services.tools.admin.keys import (
    new_key,
)
from tests.unit.contracts.schema_strategies import from_schema

SCHEMAS = Path(c.__file__).parent / "schemas"
OPTIONAL = {"causation_id", "correlation_id"}
"""Envelope fields a fact may lack (dealing's and settlement's events): left at None."""
PRIVATE: dict[type[Fact], set[str]] = {
    ShoeShuffledFact: {"order", "salt", "encrypted"},
    CoupVoidedFact: {"authorization"},
    CoupCorrectedFact: {"authorization"},
    StudioShoeOpenedFact: {"after_seq"},
}
"""Fact fields kept out of the contract (the shoe's secret until it closes, and its ciphertext
at rest; where a studio shoe takes its device's reads from; a void's or a result correction's
signed decision, kept for the audit: the published message names its supervisor)."""
PRIVATE_VALUES: dict[type[Fact], dict[str, Any]] = {
    CoupVoidedFact: {"authorization": "eyJhbGciOiJFZERTQSJ9.e30.c2lnbmF0dXJl"},
    CoupCorrectedFact: {"authorization": "eyJhbGciOiJFZERTQSJ9.e30.c2lnbmF0dXJl"},
    ShoeShuffledFact: {"order": ["AS", "KD"], "salt": "ab" * 32},  # stored encrypted
}
"""What a round trip stores in a fact's private fields (the contract has no source for them)."""
SHAPED_FROM: dict[type[Fact], set[str]] = {CardsBurnedFact: {"burned_cards"}}
"""Fact fields published through a derivation, not by name (burned cards with positions)."""
DERIVED: dict[type[c.Message], set[str]] = {
    c.OpenBook: {"paytable", "limits", "currency"},  # the coup's terms
    c.CardDrawn: {"position", "card"},  # one per card of the draw
    c.CutCardReached: {"position"},
    c.BetAccepted: {"placed_at"},  # per line, beside the lines
    c.BetRejected: {"placed_at"},
    c.CoupSettled: {"bets", "house_result"},
    c.CoupSettlementCorrected: {"bets", "house_result"},
    c.BetRefunded: {"refunded"},  # the line's stake
    c.CoupRefunded: {"bets"},
}
"""Contract fields a hand-written (shaped) translation makes rather than reads by name."""
LINE_PRIVATE: dict[tuple[type[Any], type[c.Message]], set[str]] = {
    (AnswerLine, c.BetAccepted): {"reason_code", "message"},  # an accepted line has none
}
OID = UUID("5d0ab0a2-52d1-4b8e-8c55-2f9d5f0e0c01")
MAPPER = ServiceApplication(env={"PERSISTENCE_MODULE": "eventsourcing.popo"}).mapper
assert isinstance(MAPPER, FactMapper)
MAPPER.secret_keys = SecretKeys((("test-1", new_key()),), "test")  # the shoe's order, encrypted


def publications() -> Iterator[tuple[type[Any], Callable[[Any], list[c.Message]]]]:
    """(event class, its translation) for every published stored event."""
    for table in (shoe_messages, dealing_messages, settlement_messages):
        for event_class, translate in table.registry.items():
            if event_class is not object:
                yield event_class, translate
    yield IncidentLog.Raised, _Incidents(c.IncidentRaised, {})


class _Incidents(Publication):
    """What every relay publishes of a recorded incident (``with_incidents``)."""

    def __call__(self, event: Any) -> list[c.Message]:
        return list(with_incidents(lambda _: [])(event))


def fact_of(event_class: type[Any]) -> type[Fact]:
    for base in event_class.__mro__:
        if base.__module__.startswith("services.shared.facts.") and issubclass(base, Fact):
            return base
    raise AssertionError(f"{event_class.__qualname__} inherits no fact")


def contracts_of(translate: Any) -> tuple[type[c.Message], ...]:
    made: tuple[type[c.Message], ...] = translate.contracts
    return made


PUBLICATIONS = list(publications())
ONE_TO_ONE = [
    (event, translate)
    for event, translate in PUBLICATIONS
    if isinstance(translate, Publication) and not translate.derive
]


def test_every_published_fact_has_a_publication_that_names_its_contracts() -> None:
    published = {fact_of(event_class) for event_class, _ in PUBLICATIONS}
    # settlement's copy of dealing's OpenBook; an operator's close mark (the audit reads it);
    # a studio shoe's reads, requests and holds (a hold is published as its incident) and
    # the routing of a studio table's reads
    unpublished = {
        BookOpenedFact,
        OperatorClosedFact,
        ReadTakenFact,
        DrawRequestedFact,
        ShoeHeldFact,
        CoupClearedFact,
        CardsAcceptedFact,
        CorrectionWaitingFact,
        StudioTableStartedFact,
        ShoeAttachedFact,
        ReadWaitingFact,
    }
    facts = {*SHOE_FACTS, *DEALING_FACTS, *SETTLEMENT_FACTS, IncidentRaisedFact}
    assert published == facts - unpublished
    for event_class, translate in PUBLICATIONS:
        assert contracts_of(translate), event_class


@pytest.mark.parametrize(
    ("event_class", "translate"), PUBLICATIONS, ids=[e.__qualname__ for e, _ in PUBLICATIONS]
)
def test_contract_payload_fields_are_the_facts_fields(
    event_class: type[Any], translate: Any
) -> None:
    fact = fact_of(event_class)
    own = set(fact_fields(fact))
    lines = {name: set(record._fields) for name, record in line_fields(fact)}
    private = PRIVATE.get(fact, set())
    assert private <= own
    for contract in contracts_of(translate):
        payload = set(payload_fields(contract))
        derived = set(translate.derive) if isinstance(translate, Publication) else set()
        derived |= DERIVED.get(contract, set())
        sources = (
            own - private - set(lines)
            | derived
            | {name for fields in lines.values() for name in fields}
        )
        assert payload - sources <= OPTIONAL, (contract.__name__, payload - sources)
        assert not private & payload
        if isinstance(translate, Publication):  # every fact field is published
            published = own - private - SHAPED_FROM.get(fact, set())
            assert published <= payload, (contract.__name__, published - payload)


@pytest.mark.parametrize(
    ("record", "contract"),
    [
        (AnswerLine, c.BetAccepted),
        (AnswerLine, c.BetRejected),
        (SettledLine, c.BetSettled),
        (RefundLine, c.BetRefunded),
        (CorrectedLine, c.BetCorrected),
    ],
)
def test_every_line_field_is_a_field_of_its_contract(record: Any, contract: Any) -> None:
    private = LINE_PRIVATE.get((record, contract), set())
    assert set(record._fields) - private <= set(payload_fields(contract))


# -- round trips: a contract message -> its fact -> stored -> read -> published ----------
def _document(contract: type[c.Message]) -> st.SearchStrategy[Any]:
    schema = json.loads((SCHEMAS / f"{contract.__name__}.json").read_text(encoding="utf-8"))
    return from_schema(schema)


def _message(contract: type[c.Message], document: Any) -> c.Message:
    return c.decode(c.MESSAGE_TOPICS[contract.__name__], json.dumps(document).encode())


def _stored_and_read(event_class: type[Any], fact: Fact, at: datetime, version: int = 3) -> Any:
    """The domain event of ``fact``, through the services' mapper (stored JSON and back)."""
    extra = (
        {"originator_topic": "tests:Aggregate"} if issubclass(event_class, CanInitAggregate) else {}
    )
    event = event_class(
        originator_id=OID, originator_version=version, timestamp=at, **extra, **vars(fact)
    )
    return MAPPER.to_domain_event(MAPPER.to_stored_event(event))


def _as_published(message: c.Message, event_id: UUID, fact: type[Fact]) -> bytes:
    """What the relay publishes of ``message``'s fact: its id made from the stored event,
    and the envelope fields the fact does not hold left at their default."""
    unheld = {name: None for name in OPTIONAL if name not in fact_fields(fact)}
    update = {"event_id": event_id, "schema_version": 1, **unheld}
    return c.encode(message.model_copy(update=update))


SETTINGS = settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(
    ("event_class", "translate"), ONE_TO_ONE, ids=[e.__qualname__ for e, _ in ONE_TO_ONE]
)
@SETTINGS
@given(data=st.data())
def test_a_contract_message_round_trips_through_its_fact(
    event_class: type[Any], translate: Publication, data: st.DataObject
) -> None:
    message = _message(translate.contract, data.draw(_document(translate.contract)))
    fact = fact_of(event_class)
    given = {**dict.fromkeys(PRIVATE.get(fact, set())), **PRIVATE_VALUES.get(fact, {})}
    made = fact_from(fact, SimpleNamespace(**message.model_dump()), **given)
    event = _stored_and_read(event_class, made, message.occurred_at)
    for name, value in PRIVATE_VALUES.get(fact, {}).items():
        assert getattr(event, name) == value  # stored and read back, never published
    expected = _as_published(message, message_id(OID, 3, 0), fact)
    assert [c.encode(m) for m in translate(event)] == [expected]


@SETTINGS
@given(data=st.data())
def test_a_refused_command_round_trips_with_its_command_as_cause(data: st.DataObject) -> None:
    message = _message(c.CommandRejected, data.draw(_document(c.CommandRejected)))
    fact = fact_from(CommandRejectedFact, message)
    event = _stored_and_read(CommandRejections.CommandRejected, fact, message.occurred_at)
    expected = message.model_copy(
        update={
            "event_id": message_id(OID, 3, 0),
            "schema_version": 1,
            "causation_id": message.command_id,
            "correlation_id": None,
        }
    )
    assert [c.encode(m) for m in dealing_messages(event)] == [c.encode(expected)]


def _lines_of(contract: type[c.Message], data: st.DataObject, **same: Any) -> list[c.Message]:
    documents = data.draw(st.lists(_document(contract), min_size=1, max_size=4))
    return [
        _message(contract, document).model_copy(
            update={**same, "schema_version": 1, "causation_id": None, "correlation_id": None}
        )
        for document in documents
    ]


AT = datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=UTC)
OPERATORS = st.sampled_from([c.HOUSE, "acme"])
"""A fact about bets is one operator's: its messages say whose (the house's: left out)."""


@SETTINGS
@given(data=st.data())
def test_settled_bets_round_trip_through_their_lines(data: st.DataObject) -> None:
    operator = data.draw(OPERATORS)
    same = {"table_id": "t-1", "coup_id": "t-1.c1", "currency": "EUR", "operator": operator}
    bets = _lines_of(c.BetSettled, data, **same)
    staked, paid = sum(m.stake for m in bets), sum(m.returned for m in bets)  # type: ignore[attr-defined]
    assume(paid <= c.MAX_MINOR_UNITS)
    fact = CoupSettledFact(
        table_id="t-1",
        coup_id="t-1.c1",
        outcome="PLAYER",
        player_pair=False,
        banker_pair=False,
        lines=[line_from(SettledLine, m) for m in bets],
        staked=staked,
        paid=paid,
        currency="EUR",
        operator=operator,
    )
    event = _stored_and_read(BetBook.CoupSettled, fact, AT)
    ids = line_ids(event, len(bets) + 1)
    published = settlement_messages(event)
    expected = [
        c.encode(m.model_copy(update={"event_id": ids[i], "occurred_at": AT}))
        for i, m in enumerate(bets)
    ]
    assert [c.encode(m) for m in published[:-1]] == expected
    total = published[-1]
    assert isinstance(total, c.CoupSettled)
    assert (total.bets, total.staked, total.paid) == (len(bets), staked, paid)
    assert total.operator == operator


@SETTINGS
@given(data=st.data())
def test_refunded_bets_round_trip_through_their_lines(data: st.DataObject) -> None:
    operator = data.draw(OPERATORS)
    same = {"table_id": "t-1", "coup_id": "t-1.c1", "currency": "EUR", "operator": operator}
    bets = [
        m.model_copy(update={"refunded": m.stake})  # type: ignore[attr-defined]
        for m in _lines_of(c.BetRefunded, data, **same)
    ]
    refunded = sum(m.stake for m in bets)  # type: ignore[attr-defined]
    fact = CoupRefundedFact(
        table_id="t-1",
        coup_id="t-1.c1",
        supervisor_id="s-1",
        reason="misdeal",
        lines=[line_from(RefundLine, m) for m in bets],
        refunded=refunded,
        currency="EUR",
        operator=operator,
    )
    event = _stored_and_read(BetBook.CoupRefunded, fact, AT)
    ids = line_ids(event, len(bets) + 1)
    published = settlement_messages(event)
    expected = [
        c.encode(m.model_copy(update={"event_id": ids[i], "occurred_at": AT}))
        for i, m in enumerate(bets)
    ]
    assert [c.encode(m) for m in published[:-1]] == expected
    assert isinstance(published[-1], c.CoupRefunded) and published[-1].refunded == refunded


@SETTINGS
@given(data=st.data())
def test_answered_bets_round_trip_through_their_lines(data: st.DataObject) -> None:
    operator = data.draw(OPERATORS)
    same = {"table_id": "t-1", "coup_id": "t-1.c1", "operator": operator}
    accepted = _lines_of(c.BetAccepted, data, **same)
    refused = _lines_of(c.BetRejected, data, **same)
    answers = data.draw(st.permutations([*accepted, *refused]))
    lines = [
        AnswerLine(m.bet_id, m.bettor_id, m.bet_type, m.amount, m.currency, None, "")  # type: ignore[attr-defined]
        if isinstance(m, c.BetAccepted)
        else line_from(AnswerLine, m)
        for m in answers
    ]
    placed = [None if m.placed_at is None else m.placed_at.isoformat() for m in answers]  # type: ignore[attr-defined]
    fact = BetsAnsweredFact(
        table_id="t-1", coup_id="t-1.c1", lines=lines, placed_at=placed, operator=operator
    )
    event = _stored_and_read(BetBook.BetsAnswered, fact, AT)
    ids = line_ids(event, len(answers))
    expected = [
        c.encode(m.model_copy(update={"event_id": ids[i], "occurred_at": AT}))
        for i, m in enumerate(answers)
    ]
    assert [c.encode(m) for m in settlement_messages(event)] == expected


def test_the_contracts_name_the_rules_bet_types_paytables_and_reasons() -> None:
    """Every bet type, paytable and refusal reason of the rules engine is in the contracts."""
    from typing import get_args

    from services.shared.rules import PAYTABLES, BetType, RejectionReason

    assert set(get_args(c.BetTypeName)) == {bet.value for bet in BetType}
    assert {reason.value for reason in RejectionReason} <= set(get_args(c.RejectionCode))
    for name in PAYTABLES:
        assert f"`{name}`" in c.OpenTable.model_fields["paytable"].description


@SETTINGS
@given(data=st.data())
def test_corrected_bets_round_trip_through_their_lines(data: st.DataObject) -> None:
    operator = data.draw(OPERATORS)
    correction = UUID("0e7f3a52-8d4b-4c1e-9a63-2b5d7c9e1f08")
    same = {
        "table_id": "t-1",
        "coup_id": "t-1.c1",
        "correction_id": correction,
        "currency": "EUR",
        "operator": operator,
    }
    bets = _lines_of(c.BetCorrected, data, **same)
    difference = sum(m.difference for m in bets)  # type: ignore[attr-defined]
    assume(abs(difference) <= c.MAX_MINOR_UNITS)  # a coup's total is bounded as each line is
    fact = SettlementCorrectedFact(
        table_id="t-1",
        coup_id="t-1.c1",
        correction_id=correction,
        outcome="PLAYER",
        player_pair=False,
        banker_pair=False,
        lines=[line_from(CorrectedLine, m) for m in bets],
        difference=difference,
        staked=5000,
        paid=4000,
        currency="EUR",
        operator=operator,
    )
    event = _stored_and_read(BetBook.SettlementCorrected, fact, AT)
    ids = line_ids(event, len(bets) + 1)
    published = settlement_messages(event)
    expected = [
        c.encode(m.model_copy(update={"event_id": ids[i], "occurred_at": AT}))
        for i, m in enumerate(bets)
    ]
    assert [c.encode(m) for m in published[:-1]] == expected
    total = published[-1]
    assert isinstance(total, c.CoupSettlementCorrected)
    assert (total.bets, total.difference, total.house_result) == (len(bets), difference, 1000)
