"""No blind spot: every event class the services can store is read, or declared unread (why).

A class renamed or moved keeps its stored topic (the facts' ``STORED_TOPIC``); a new event
class must be given a reader or a line in ``services.shared.facts.unread`` saying why no
reader needs it. The read side spells no class path: its readers are keyed by the facts.
"""

from __future__ import annotations

from collections.abc import Iterator

from eventsourcing.domain import Aggregate, CanMutateAggregate
from eventsourcing.utils import get_topic

from contracts import BOOK_EVENTS, SHOE_EVENTS, TABLE_EVENTS, topic_for
from services.dealing.coups import Coup
from services.dealing.messages import to_messages as dealing_messages
from services.dealing.rejections import CommandRejections
from services.dealing.tables import Table
from services.settlement.books import BetBook
from services.settlement.desk import BetDesk
from services.settlement.messages import to_messages as settlement_messages
from services.settlement.terms import TableTerms
from services.shared.facts.legacy import LEGACY_FACTS, DeskBetHeldFact
from services.shared.facts.unread import UNREAD
from services.shared.platform.relay import without_seals
from services.shared.platform.store.incidents import IncidentLog
from services.shared.platform.store.sealing import SEAL_TOPICS, SealLedger
from services.shoe.domain import Shoe
from services.shoe.messages import to_messages as shoe_messages
from services.shoe.studio import StudioShoe, StudioTable
from services.tools.history.from_store import StoreFeed
from services.tools.history.views import History
from tests.unit.audit.helpers import play_history, play_studio

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
    SealLedger,
)
PUBLISH = {"shoe": shoe_messages, "dealing": dealing_messages, "settlement": settlement_messages}
READ_TOPICS = (SHOE_EVENTS, TABLE_EVENTS, BOOK_EVENTS, "punto-banco.bet-events")
"""The event topics the read side follows (the others carry commands, letters, incidents)."""


NOT_FOR_THE_READ_SIDE = {
    get_topic(Coup.CardsRequested): "published as a command (DrawCards): the draws say it all",
    get_topic(Table.ShoeRequested): "published as a command (ShuffleShoe): the shuffle says it",
    get_topic(Table.ShoeFinished): "published as a command (CloseShoe): the reveal says it",
    get_topic(CommandRejections.CommandRejected): "a refused table command: changed nothing",
    DeskBetHeldFact.STORED_TOPIC: "a held bet (older stores): its answer is read when given",
}
"""Stored facts no view is made of, and why (published as commands, or answered later)."""


def stored_event_classes() -> Iterator[type]:
    """Every event class the services can store (the three domains, incidents, seals):
    not eventsourcing's bases ``Event`` and ``Created`` (an aggregate created by a named
    event never stores a plain ``Created``)."""
    for aggregate in AGGREGATES:
        events = [
            value
            for value in vars(aggregate).values()
            if isinstance(value, type) and issubclass(value, CanMutateAggregate)
        ]
        named_creation = any(
            issubclass(e, Aggregate.Created) and e.__name__ != "Created" for e in events
        )
        for value in events:
            if value.__name__ == "Event" or (value.__name__ == "Created" and named_creation):
                continue
            yield value


def readers() -> dict[str, object]:
    return dict(StoreFeed(History()).readers)


def test_every_stored_topic_is_read_or_declared_unread() -> None:
    known = set(readers()) | set(UNREAD) | set(SEAL_TOPICS) | set(NOT_FOR_THE_READ_SIDE)
    stored = {get_topic(cls) for cls in stored_event_classes()}
    missing = sorted(stored - known)
    assert not missing, f"{missing}: give it a fact and a reader, or list it in facts.unread"
    assert set(UNREAD).isdisjoint(readers()), "a topic is either read or declared unread"
    assert set(NOT_FOR_THE_READ_SIDE).isdisjoint(readers())


def test_every_retired_fact_of_older_stores_is_still_read() -> None:
    retired = {fact.STORED_TOPIC for fact in LEGACY_FACTS} - set(NOT_FOR_THE_READ_SIDE)
    assert retired and retired <= set(readers())


def test_every_fact_published_on_an_event_topic_is_read() -> None:
    """A stored fact whose messages reach the event topics the read side follows is read
    from the stores too (else the audit would not see what the dashboard shows)."""
    read = readers()
    published: set[str] = set()
    for played in (play_history(coups=12, tables=1, seal=True), play_studio()):
        for service, app in played.system.apps.items():
            publish = without_seals(PUBLISH[service])
            for notification in app.recorder.select_notifications(1, 100_000):
                event = app.mapper.to_domain_event(notification)
                if any(topic_for(m) in READ_TOPICS for m in publish(event)):
                    published.add(notification.topic)
    assert published, "the played history published events"
    assert sorted(published - set(read)) == []
    assert get_topic(BetBook.CoupSettled) in published
    assert get_topic(StudioShoe.CardsDrawn) in published
