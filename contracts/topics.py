"""Kafka topics, which message types travel on each, and the partition-key rule.

Every message about a table is keyed by its table id (UTF-8), so Kafka keeps
each table's messages in order.

Operators (B2B): one table may serve several operators' bettors. Each operator has its own
bet-commands topic (:func:`bet_commands_topic`) that only its gateway may write, and its own
bet-events topic (:func:`bet_events_topic`) that only its gateway (and the house's readers)
may read: a bet's operator is the topic it came by, never a field it claims. The default
operator :data:`HOUSE` keeps the original names (``punto-banco.bet-commands`` and
``punto-banco.bet-events``), so a deployment with one operator is unchanged. An operator's
topic is the base topic's name, a dot and the operator (``punto-banco.bet-events.acme``);
the mappings below (``TOPIC_UNIONS``, ``TOPIC_MESSAGES``, ``TOPIC_OWNERS``) answer for it as
for its base topic.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from types import MappingProxyType, UnionType
from typing import Annotated, Any, TypeVar, cast, get_args

from pydantic import Field

from contracts.bet_events import BetEvent, BookEvent
from contracts.commands import BetCommand, ShoeCommand, TableCommand
from contracts.dead_letter import DeadLetter, MessageQuarantined
from contracts.envelope import Message, TableMessage
from contracts.incidents import IncidentRaised
from contracts.seals import SealAnchored
from contracts.shoe_events import ShoeEvent
from contracts.studio import StudioRead
from contracts.table_events import CommandRejected, TableEvent

TABLE_COMMANDS = "punto-banco.table-commands"
"""OpenTable, CloseTable, CloseBetting, VoidCoup: to dealing."""
BET_COMMANDS = "punto-banco.bet-commands"
"""PlaceBet: to settlement; and dealing's OpenBook / CloseBook, which mark in the table's
partition where betting on each coup opens and closes."""
SHOE_COMMANDS = "punto-banco.shoe-commands"
"""ShuffleShoe, DrawCards, CloseShoe: dealing to shoe."""
SHOE_EVENTS = "punto-banco.shoe-events"
"""The shoe service's events."""
TABLE_EVENTS = "punto-banco.table-events"
"""The dealing service's events."""
COMMAND_EVENTS = "punto-banco.command-events"
"""Dealing's answers to refused table commands (CommandRejected, whose texts may name a
supervisor's key): read by the senders of table commands (operator, supervisor) and the
house's readers, never by a bettors' gateway. They travelled on TABLE_EVENTS before 2026-12
(:data:`FORMER_TOPIC_MESSAGES`)."""
BET_EVENTS = "punto-banco.bet-events"
"""The settlement service's events about bets (answers, settlements, refunds): the busy one."""
BOOK_EVENTS = "punto-banco.book-events"
"""Settlement's bet books closing (BetsClosed, one per coup): dealing deals a coup's cards
only after it, and need not read the bets' flood on BET_EVENTS to find it."""
DEAD_LETTERS = "punto-banco.dead-letters"
"""Messages a service could not decode or handle (DeadLetter), or publish (MessageQuarantined)."""
INCIDENTS = "punto-banco.incidents"
"""Facts a service refused to believe (IncidentRaised): an operator should look."""
SEALS = "punto-banco.seals"
"""Every service's seal anchors (SealAnchored), keyed by the service's name and signed with its
key; kept forever. Each service writes its own key: the auditor counts a record only when the
key's service signed it (no ``TOPIC_OWNERS`` entry: one topic, three writers)."""
STUDIO_READS = "punto-banco.studio-reads"
"""A studio table's device reads (StudioRead), written by the device bridge, keyed by table id:
for the shoe service (it does not read them yet: docs/studio.md)."""


def _members(union: Any) -> tuple[type[Message], ...]:
    """The model classes of an ``Annotated[A | B, Field(discriminator=...)]`` alias."""
    inner = get_args(union)[0]
    if isinstance(inner, UnionType):
        return tuple(get_args(inner))
    return (inner,)


HOUSE = "house"
"""The default operator: its topics are the original, unsuffixed ones."""

OPERATOR_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
"""An operator's name: a lower case letter, then up to 31 lower case letters, digits, _ or -."""

OPERATOR_TOPICS = (BET_COMMANDS, BET_EVENTS)
"""The base topics every operator has its own of."""


def check_operator(name: str) -> str:
    """``name`` if it is an operator's name (:data:`OPERATOR_NAME`), else ValueError."""
    if not OPERATOR_NAME.fullmatch(name):
        raise ValueError(
            f"operator name {name!r} must be a lower case letter followed by at most 31 "
            "lower case letters, digits, _ or -"
        )
    return name


def operator_topic(base: str, operator: str) -> str:
    """The operator's own topic of ``base`` (one of :data:`OPERATOR_TOPICS`)."""
    if base not in OPERATOR_TOPICS:
        raise ValueError(f"{base} is not a topic operators have their own of")
    return base if operator == HOUSE else f"{base}.{check_operator(operator)}"


def bet_commands_topic(operator: str) -> str:
    """Where ``operator``'s gateway writes its bettors' PlaceBet (and dealing its marks)."""
    return operator_topic(BET_COMMANDS, operator)


def bet_events_topic(operator: str) -> str:
    """Where settlement answers and settles ``operator``'s bets."""
    return operator_topic(BET_EVENTS, operator)


def topic_operator(topic: str) -> tuple[str, str] | None:
    """(base topic, operator) of an operator's topic (logical name), else None."""
    for base in OPERATOR_TOPICS:
        if topic == base:
            return base, HOUSE
        if topic.startswith(base + ".") and OPERATOR_NAME.fullmatch(topic[len(base) + 1 :]):
            return base, topic[len(base) + 1 :]
    return None


def base_topic(topic: str) -> str:
    """The base topic of an operator's topic; any other topic itself."""
    found = topic_operator(topic)
    return topic if found is None else found[0]


_base_of = lru_cache(maxsize=4096)(base_topic)


def operator_topics(operators: Iterable[str]) -> tuple[str, ...]:
    """Every operator's own topics (each base topic, operator by operator)."""
    return tuple(operator_topic(base, op) for base in OPERATOR_TOPICS for op in operators)


V = TypeVar("V")


_MISSING: Any = object()


class _TopicMap(Mapping[str, V]):
    """A read-only topic -> value mapping that answers an operator's topic as its base.

    Iterating it gives the base topics only. Lookups are on the consumers' path (a record's
    topic owner): a miss costs a cached name lookup, no exception."""

    def __init__(self, values: Mapping[str, V]) -> None:
        self._values = MappingProxyType(dict(values))

    def get(self, topic: str, default: Any = None) -> Any:
        found = self._values.get(topic, _MISSING)
        if found is _MISSING:
            found = self._values.get(_base_of(topic), _MISSING)
        return default if found is _MISSING else found

    def __getitem__(self, topic: str) -> V:
        found = self.get(topic, _MISSING)
        if found is _MISSING:
            raise KeyError(topic)
        return cast(V, found)

    def __contains__(self, topic: object) -> bool:
        return isinstance(topic, str) and self.get(topic, _MISSING) is not _MISSING

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"TopicMap({dict(self._values)!r})"


TOPIC_UNIONS: Mapping[str, Any] = _TopicMap(
    {
        TABLE_COMMANDS: TableCommand,
        BET_COMMANDS: BetCommand,
        SHOE_COMMANDS: ShoeCommand,
        SHOE_EVENTS: ShoeEvent,
        TABLE_EVENTS: TableEvent,
        COMMAND_EVENTS: CommandRejected,
        BET_EVENTS: BetEvent,
        BOOK_EVENTS: BookEvent,
        DEAD_LETTERS: Annotated[DeadLetter | MessageQuarantined, Field(discriminator="type")],
        INCIDENTS: IncidentRaised,
        SEALS: SealAnchored,
        STUDIO_READS: StudioRead,
    }
)
"""Topic -> the (discriminated union) type of its messages, e.g. for a FastStream subscriber."""

TOPIC_MESSAGES: Mapping[str, tuple[type[Message], ...]] = _TopicMap(
    {
        topic: (union,) if isinstance(union, type) else _members(union)
        for topic, union in TOPIC_UNIONS.items()
    }
)
"""Topic -> the message classes allowed on it."""

FORMER_TOPIC_MESSAGES: Mapping[str, tuple[type[Message], ...]] = MappingProxyType(
    {TABLE_EVENTS: (CommandRejected,)}
)
"""Topic -> message classes it carried before they moved: still decoded there (the records
published before), never published there again."""

MESSAGE_TYPES: Mapping[str, type[Message]] = MappingProxyType(
    {model.__name__: model for models in TOPIC_MESSAGES.values() for model in models}
)
"""Message type name (the ``type`` field) -> its class."""

MESSAGE_TOPICS: Mapping[str, str] = MappingProxyType(
    {model.__name__: topic for topic, models in TOPIC_MESSAGES.items() for model in models}
)
"""Message type name -> the one topic it travels on (the house's, for a bet event: see
:func:`topic_for`)."""

MARKERS: frozenset[str] = frozenset({"OpenBook", "CloseBook"})
"""Dealing's marks: written to EVERY operator's bet-commands topic (see :func:`topic_for`)."""


EXTERNAL = "external"
"""The sender of a message that comes from outside the services (a bettor's gateway, an
operator or a supervisor): nothing about its sender can be taken from the message."""

MESSAGE_SOURCES: Mapping[str, str] = MappingProxyType(
    {
        **{
            name: EXTERNAL
            for name in (
                "OpenTable",
                "CloseTable",
                "CloseBetting",
                "VoidCoup",
                "CorrectCoup",
                "CorrectResult",
            )
        },
        "PlaceBet": EXTERNAL,
        **{name: "dealing" for name in ("OpenBook", "CloseBook")},
        **{model.__name__: "dealing" for model in TOPIC_MESSAGES[SHOE_COMMANDS]},
        **{model.__name__: "dealing" for model in TOPIC_MESSAGES[TABLE_EVENTS]},
        **{model.__name__: "dealing" for model in TOPIC_MESSAGES[COMMAND_EVENTS]},
        **{model.__name__: "shoe" for model in TOPIC_MESSAGES[SHOE_EVENTS]},
        **{model.__name__: "settlement" for model in TOPIC_MESSAGES[BET_EVENTS]},
        **{model.__name__: "settlement" for model in TOPIC_MESSAGES[BOOK_EVENTS]},
        "StudioRead": "studio-bridge",
    }
)
"""Message type -> the one service allowed to send it, or :data:`EXTERNAL`.

Dead letters, quarantine records, incidents and seal anchors are written by every service and
are not listed: no service acts on them."""

TOPIC_OWNERS: Mapping[str, str] = _TopicMap(
    {
        SHOE_COMMANDS: "dealing",
        TABLE_EVENTS: "dealing",
        COMMAND_EVENTS: "dealing",
        SHOE_EVENTS: "shoe",
        BET_EVENTS: "settlement",
        BOOK_EVENTS: "settlement",
        STUDIO_READS: "studio-bridge",
    }
)
"""Topic -> the one service whose outbox relay writes it (and nobody else). The relay's
headers (``pb-source``, ``pb-notification-id``...) mean something only on these topics;
on the others (commands from outside, where the broker lets clients write) they are
ignored and records are tracked by their Kafka offset."""


def topic_for(message: Message | type[Message]) -> str:
    """The topic a message (or message class) is published on.

    A bet event goes to its ``operator``'s bet-events topic (a class: the house's). Dealing's
    marks (:data:`MARKERS`) go to every operator's bet-commands topic: this is the house's;
    :func:`topics_for` gives them all."""
    name = message.__name__ if isinstance(message, type) else type(message).__name__
    try:
        topic = MESSAGE_TOPICS[name]
    except KeyError:
        raise ValueError(f"{name} is not a registered message type") from None
    if topic == BET_EVENTS and not isinstance(message, type):
        return bet_events_topic(getattr(message, "operator", HOUSE))
    return topic


def topics_for(message: Message | type[Message], operators: Iterable[str]) -> tuple[str, ...]:
    """Every topic a message is published on in a deployment serving ``operators``: a mark
    (:data:`MARKERS`) on each operator's bet-commands topic, any other message on one. A
    ``PlaceBet`` goes to the bet-commands topic of the operator its publisher serves (a
    gateway serves one: ``operators`` is its own)."""
    name = message.__name__ if isinstance(message, type) else type(message).__name__
    if name in MARKERS or name == "PlaceBet":
        return tuple(bet_commands_topic(operator) for operator in operators)
    return (topic_for(message),)


def partition_key(message: Message) -> bytes:
    """The Kafka key of a message: its table id, UTF-8.

    A dead letter with no known table falls back to its original key, else ``b""``; a seal
    anchor's key is its service's name.
    """
    if isinstance(message, TableMessage):
        return message.table_id.encode("utf-8")
    if isinstance(message, DeadLetter):
        if message.table_id is not None:
            return message.table_id.encode("utf-8")
        return (message.key or "").encode("utf-8")
    if isinstance(message, SealAnchored):
        return message.service.encode("utf-8")
    if isinstance(message, MessageQuarantined | IncidentRaised):
        return (message.table_id or "").encode("utf-8")
    raise TypeError(f"{type(message).__name__} has no partition key")
