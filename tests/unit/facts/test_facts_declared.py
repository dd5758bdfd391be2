"""The fact records declare what the services store today: topics, fields, versions.

Each published fact is declared once in ``services.shared.facts``; these tests hold the
declarations to the domain events that record them and to the topics their rows carry.
"""

from __future__ import annotations

import copy
import dataclasses
import typing
from typing import Any

import pytest
from eventsourcing.domain import CanMutateAggregate
from eventsourcing.utils import get_topic, resolve_topic

from services.dealing.domain import CommandRejections, Coup, Table
from services.settlement.domain import BetBook, BetDesk, TableTerms
from services.shared.facts import Fact, fact_fields, line_fields
from services.shared.facts.dealing import DEALING_FACTS
from services.shared.facts.incidents import IncidentRaisedFact
from services.shared.facts.legacy import LEGACY_FACTS, DeskBetHeldFact
from services.shared.facts.settlement import SETTLEMENT_FACTS
from services.shared.facts.shoe import SHOE_FACTS, STUDIO_SHARED_TOPICS
from services.shared.facts.unread import UNREAD
from services.shared.platform.store.incidents import IncidentLog
from services.shoe.domain import Shoe
from services.shoe.studio import StudioShoe, StudioTable

AGGREGATES = (
    Shoe,
    StudioShoe,
    StudioTable,
    Table,
    Coup,
    CommandRejections,
    BetBook,
    BetDesk,
    TableTerms,
    IncidentLog,
)
FACTS: tuple[type[Fact], ...] = (
    *SHOE_FACTS,
    *DEALING_FACTS,
    *SETTLEMENT_FACTS,
    IncidentRaisedFact,
    *LEGACY_FACTS,
)
RETIRED = {
    "services.settlement.books:BetBook.BetAccepted",
    "services.settlement.books:BetBook.BetRejected",
}
"""Facts of old stores no class writes or replays any more (the read side reads them)."""
ORIGINATOR_FIELDS = {"originator_id", "originator_version", "timestamp", "originator_topic"}


def stored_event_classes() -> dict[str, type[Any]]:
    """Every event class the services store, by the topic its rows carry."""
    found: dict[str, type[Any]] = {}
    for aggregate in AGGREGATES:
        for name, value in vars(aggregate).items():
            if isinstance(value, type) and issubclass(value, CanMutateAggregate):
                if name in ("Event", "Created"):
                    continue  # eventsourcing's own bases, never recorded here
                found[get_topic(value)] = value
    return found


def event_of(fact: type[Fact]) -> type[Any]:
    return typing.cast(type[Any], resolve_topic(fact.STORED_TOPIC))


def event_fields(event: type[Any]) -> list[str]:
    return [f.name for f in dataclasses.fields(event) if f.name not in ORIGINATOR_FIELDS]


def test_every_stored_topic_is_declared_once() -> None:
    topics = [fact.STORED_TOPIC for fact in FACTS]
    assert len(topics) == len(set(topics))


def test_no_fact_has_a_topic_of_its_own() -> None:
    """A fact with ``TOPIC`` would be registered under the stored topic by ``get_topic``."""
    for fact in FACTS:
        assert "TOPIC" not in vars(fact), fact


@pytest.mark.parametrize("fact", [f for f in FACTS if f.STORED_TOPIC not in RETIRED])
def test_each_fact_is_stored_under_its_topic_by_its_domain_event(fact: type[Fact]) -> None:
    event = event_of(fact)
    assert get_topic(event) == fact.STORED_TOPIC
    assert getattr(event, "class_version", 1) == fact.class_version


@pytest.mark.parametrize("fact", [f for f in FACTS if f.STORED_TOPIC not in RETIRED])
def test_each_fact_has_its_domain_events_fields_and_types(fact: type[Fact]) -> None:
    event = event_of(fact)
    assert issubclass(event, fact)  # the domain event inherits its fact
    assert list(fact_fields(fact)) == event_fields(event) == list(fact_fields(event))
    fact_hints = typing.get_type_hints(fact)
    event_hints = typing.get_type_hints(event)
    for name in fact_fields(fact):
        assert fact_hints[name] == event_hints[name], name


@pytest.mark.parametrize("fact", [f for f in FACTS if f.class_version > 1])
def test_each_facts_upcasters_do_what_its_domain_events_do(fact: type[Fact]) -> None:
    event = event_of(fact)
    state: dict[str, Any] = {"lines": [["b1"], ["b2"]], "order": ["AS", "2H"], "timestamp": "t"}
    for version in range(1, fact.class_version):
        name = f"upcast_v{version}_v{version + 1}"
        by_fact, by_event = copy.deepcopy(state), copy.deepcopy(state)
        getattr(fact, name)(by_fact)
        getattr(event, name)(by_event)
        assert by_fact == by_event, name
        state = by_fact


def test_the_line_records_are_the_batch_fields() -> None:
    typed = {fact.__name__: [name for name, _ in line_fields(fact)] for fact in FACTS}
    assert {name: fields for name, fields in typed.items() if fields} == {
        "BetsAnsweredFact": ["lines"],
        "CoupSettledFact": ["lines"],
        "CoupRefundedFact": ["lines"],
        "SettlementCorrectedFact": ["lines"],
        "DeskRefusedFact": ["lines"],
    }


@pytest.mark.parametrize("topic", STUDIO_SHARED_TOPICS)
def test_a_fact_stored_under_a_studio_topic_too_is_its_events(topic: str) -> None:
    fact, event = STUDIO_SHARED_TOPICS[topic], resolve_topic(topic)
    assert get_topic(event) == topic
    assert issubclass(event, fact)
    assert list(fact_fields(fact)) == event_fields(event)


def test_every_stored_event_is_a_fact_or_declared_unread() -> None:
    declared = {fact.STORED_TOPIC for fact in FACTS} | set(UNREAD) | set(STUDIO_SHARED_TOPICS)
    stored = set(stored_event_classes())
    assert sorted(stored - declared) == []
    assert sorted(set(UNREAD) - stored) == []


def test_the_held_bet_of_old_stores_is_still_the_desks_event() -> None:
    assert get_topic(BetDesk.BetHeld) == DeskBetHeldFact.STORED_TOPIC
