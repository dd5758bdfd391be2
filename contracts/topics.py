"""Kafka topics, which message types travel on each, and the partition-key rule.

Every message about a table is keyed by its table id (UTF-8), so Kafka keeps
each table's messages in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType, UnionType
from typing import Annotated, Any, get_args

from pydantic import Field

from contracts.bet_events import BetEvent, BookEvent
from contracts.commands import BetCommand, ShoeCommand, TableCommand
from contracts.dead_letter import DeadLetter, MessageQuarantined
from contracts.envelope import Message, TableMessage
from contracts.incidents import IncidentRaised
from contracts.seals import SealAnchored
from contracts.shoe_events import ShoeEvent
from contracts.table_events import TableEvent

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


def _members(union: Any) -> tuple[type[Message], ...]:
    """The model classes of an ``Annotated[A | B, Field(discriminator=...)]`` alias."""
    inner = get_args(union)[0]
    if isinstance(inner, UnionType):
        return tuple(get_args(inner))
    return (inner,)


TOPIC_UNIONS: Mapping[str, Any] = MappingProxyType(
    {
        TABLE_COMMANDS: TableCommand,
        BET_COMMANDS: BetCommand,
        SHOE_COMMANDS: ShoeCommand,
        SHOE_EVENTS: ShoeEvent,
        TABLE_EVENTS: TableEvent,
        BET_EVENTS: BetEvent,
        BOOK_EVENTS: BookEvent,
        DEAD_LETTERS: Annotated[DeadLetter | MessageQuarantined, Field(discriminator="type")],
        INCIDENTS: IncidentRaised,
        SEALS: SealAnchored,
    }
)
"""Topic -> the (discriminated union) type of its messages, e.g. for a FastStream subscriber."""

TOPIC_MESSAGES: Mapping[str, tuple[type[Message], ...]] = MappingProxyType(
    {
        topic: (union,) if isinstance(union, type) else _members(union)
        for topic, union in TOPIC_UNIONS.items()
    }
)
"""Topic -> the message classes allowed on it."""

MESSAGE_TYPES: Mapping[str, type[Message]] = MappingProxyType(
    {model.__name__: model for models in TOPIC_MESSAGES.values() for model in models}
)
"""Message type name (the ``type`` field) -> its class."""

MESSAGE_TOPICS: Mapping[str, str] = MappingProxyType(
    {model.__name__: topic for topic, models in TOPIC_MESSAGES.items() for model in models}
)
"""Message type name -> the one topic it travels on."""


EXTERNAL = "external"
"""The sender of a message that comes from outside the services (a bettor's gateway, an
operator or a supervisor): nothing about its sender can be taken from the message."""

MESSAGE_SOURCES: Mapping[str, str] = MappingProxyType(
    {
        **{name: EXTERNAL for name in ("OpenTable", "CloseTable", "CloseBetting", "VoidCoup")},
        "PlaceBet": EXTERNAL,
        **{name: "dealing" for name in ("OpenBook", "CloseBook")},
        **{model.__name__: "dealing" for model in TOPIC_MESSAGES[SHOE_COMMANDS]},
        **{model.__name__: "dealing" for model in TOPIC_MESSAGES[TABLE_EVENTS]},
        **{model.__name__: "shoe" for model in TOPIC_MESSAGES[SHOE_EVENTS]},
        **{model.__name__: "settlement" for model in TOPIC_MESSAGES[BET_EVENTS]},
        **{model.__name__: "settlement" for model in TOPIC_MESSAGES[BOOK_EVENTS]},
    }
)
"""Message type -> the one service allowed to send it, or :data:`EXTERNAL`.

Dead letters, quarantine records, incidents and seal anchors are written by every service and
are not listed: no service acts on them."""

TOPIC_OWNERS: Mapping[str, str] = MappingProxyType(
    {
        SHOE_COMMANDS: "dealing",
        TABLE_EVENTS: "dealing",
        SHOE_EVENTS: "shoe",
        BET_EVENTS: "settlement",
        BOOK_EVENTS: "settlement",
    }
)
"""Topic -> the one service whose outbox relay writes it (and nobody else). The relay's
headers (``pb-source``, ``pb-notification-id``...) mean something only on these topics;
on the others (commands from outside, where the broker lets clients write) they are
ignored and records are tracked by their Kafka offset."""


def topic_for(message: Message | type[Message]) -> str:
    """The topic a message (or message class) is published on."""
    name = message.__name__ if isinstance(message, type) else type(message).__name__
    try:
        return MESSAGE_TOPICS[name]
    except KeyError:
        raise ValueError(f"{name} is not a registered message type") from None


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
