"""The shoe's stored facts (``services.shoe.domain.Shoe``), published on shoe-events."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar
from uuid import UUID

from services.shared.facts.base import Fact

Encrypted = dict[str, str]
"""An encrypted field's envelope: ``{"scheme": "jwe-dir-a256gcm/v1", "kid": ..., "jwe": ...}``
(``services.shared.platform.security.encryption``)."""


@dataclass(frozen=True)
class ShoeShuffledFact(Fact):
    """A shoe shuffled and committed to. Published as ``ShoeShuffled`` without ``order`` and
    ``salt``, which are stored encrypted until the shoe closes (``ShoeClosed`` reveals them).

    Stored (version 2): ``order`` and ``salt`` null and ``encrypted`` their ciphertext, bound
    to the table, the shoe and the aggregate; read without the key they stay None. The shoe
    service's mapper decrypts them (in its memory the event holds them, and ``encrypted`` the
    envelope it was stored with). Version 1 stored them in plain text (``encrypted`` None).
    """

    STORED_TOPIC: ClassVar[str] = "services.shoe.domain:Shoe.Shuffled"
    class_version: ClassVar[int] = 2
    ENCRYPTED: ClassVar[tuple[str, ...]] = ("order", "salt")
    ENCRYPTION_BINDS: ClassVar[tuple[str, ...]] = ("table_id", "shoe_id")
    table_id: str
    shoe_id: str
    decks: int
    card_count: int
    order: list[str] | None
    salt: str | None
    encrypted: Encrypted | None
    commitment: str
    commitment_scheme: str
    cut_card_index: int
    causation_id: UUID | None
    correlation_id: UUID | None

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        # Recorded in plain text, before the order and salt were encrypted at rest.
        state.update(card_count=len(state["order"]), encrypted=None)


@dataclass(frozen=True)
class CardsBurnedFact(Fact):
    """The first card shown and as many burned (``CardsBurned``: positions from 1)."""

    STORED_TOPIC: ClassVar[str] = "services.shoe.domain:Shoe.CardsBurned"
    table_id: str
    shoe_id: str
    shown_card: str
    burned_cards: list[str]
    next_position: int
    causation_id: UUID | None
    correlation_id: UUID | None


@dataclass(frozen=True)
class CardsDrawnFact(Fact):
    """Cards handed out for a coup: one ``CardDrawn`` each (positions from
    ``first_position``), and ``CutCardReached`` before the first card behind the cut card."""

    STORED_TOPIC: ClassVar[str] = "services.shoe.domain:Shoe.CardsDrawn"
    table_id: str
    shoe_id: str
    coup_id: str
    request_id: str
    first_position: int
    cards: list[str]
    cut_card_position: int | None
    causation_id: UUID | None
    correlation_id: UUID | None


@dataclass(frozen=True)
class ShoeRevealedFact(Fact):
    """The shoe closed: its order and salt revealed (``ShoeClosed``)."""

    STORED_TOPIC: ClassVar[str] = "services.shoe.domain:Shoe.Closed"
    table_id: str
    shoe_id: str
    order: list[str]
    salt: str
    commitment: str
    cards_dealt: int
    causation_id: UUID | None
    correlation_id: UUID | None


@dataclass(frozen=True)
class StudioShoeOpenedFact(Fact):
    """A studio table's shoe, dealt from its device's reads (``StudioShoeOpened``); the
    device's reads are taken after ``after_seq`` (None: from the first)."""

    STORED_TOPIC: ClassVar[str] = "services.shoe.studio:StudioShoe.Opened"
    table_id: str
    shoe_id: str
    decks: int
    card_count: int
    after_seq: int | None
    causation_id: UUID | None
    correlation_id: UUID | None


@dataclass(frozen=True)
class ReadTakenFact(Fact):
    """One ``StudioRead`` of the table's device, taken by its shoe (not published): a card
    at ``position``, a signal or a button (``position`` None), or a read kept while the shoe
    is held (``held``). ``waited_ms``: of a card read after ``UNREADABLE``, the time since."""

    STORED_TOPIC: ClassVar[str] = "services.shoe.studio:StudioShoe.ReadTaken"
    table_id: str
    shoe_id: str
    device: str
    seq: int
    what: str
    card: str | None
    button: str | None
    last_seq: int | None
    read_at: datetime
    position: int | None
    held: bool
    waited_ms: int | None


@dataclass(frozen=True)
class DrawRequestedFact(Fact):
    """Dealing's ``DrawCards`` for a studio shoe: served card by card as the device reads
    them (each served card is a ``CardsDrawn``)."""

    STORED_TOPIC: ClassVar[str] = "services.shoe.studio:StudioShoe.DrawRequested"
    table_id: str
    shoe_id: str
    coup_id: str
    request_id: str
    count: int
    causation_id: UUID | None
    correlation_id: UUID | None


@dataclass(frozen=True)
class ShoeHeldFact(Fact):
    """A studio shoe stopped dealing (an incident ``STUDIO_HOLD``): no card leaves it until
    a supervisor's signed decision. ``reason`` is a ``HoldReason``; ``seq`` the read that
    caused it."""

    STORED_TOPIC: ClassVar[str] = "services.shoe.studio:StudioShoe.Held"
    table_id: str
    shoe_id: str
    reason: str
    detail: str
    seq: int | None


@dataclass(frozen=True)
class CoupClearedFact(Fact):
    """A voided coup put aside (``ClearCoup``): its requests dropped, the cards read for it
    and not handed out skipped (the next card is at ``next_position``), a hold lifted: at
    once, or (``until_confirm``) at the dealer's next CONFIRM, the coup's last reads (still
    being read when the void came) kept until then, not dealt."""

    STORED_TOPIC: ClassVar[str] = "services.shoe.studio:StudioShoe.CoupCleared"
    table_id: str
    shoe_id: str
    coup_id: str
    reason: str
    next_position: int
    lifted: str | None  # the reason of the hold lifted, if the shoe was held
    until_confirm: bool
    causation_id: UUID | None
    correlation_id: UUID | None


@dataclass(frozen=True)
class CorrectionWaitingFact(Fact):
    """A supervisor's cards for a held coup (``AcceptCards``) whose dealer has not confirmed
    it yet: taken at the coup's CONFIRM (its last cards are still being read)."""

    STORED_TOPIC: ClassVar[str] = "services.shoe.studio:StudioShoe.CorrectionWaiting"
    table_id: str
    shoe_id: str
    coup_id: str
    cards: list[str]
    reason: str
    causation_id: UUID | None
    correlation_id: UUID | None


@dataclass(frozen=True)
class CardsAcceptedFact(Fact):
    """A held coup's cards as a supervisor decided them (``AcceptCards``): the ones not read
    (``cards``) taken from ``first_position`` on, the hold lifted, the coup confirmed."""

    STORED_TOPIC: ClassVar[str] = "services.shoe.studio:StudioShoe.CardsAccepted"
    table_id: str
    shoe_id: str
    coup_id: str
    cards: list[str]
    first_position: int
    lifted: str
    reason: str
    causation_id: UUID | None
    correlation_id: UUID | None


@dataclass(frozen=True)
class StudioShoeClosedFact(Fact):
    """A studio shoe finished: every card read, by position (``StudioShoeClosed``)."""

    STORED_TOPIC: ClassVar[str] = "services.shoe.studio:StudioShoe.Closed"
    table_id: str
    shoe_id: str
    cards: list[str]
    cards_dealt: int
    causation_id: UUID | None
    correlation_id: UUID | None


@dataclass(frozen=True)
class StudioTableStartedFact(Fact):
    """The first studio shoe of a table (its reads are routed to the table's current shoe)."""

    STORED_TOPIC: ClassVar[str] = "services.shoe.studio:StudioTable.Started"
    table_id: str


@dataclass(frozen=True)
class ShoeAttachedFact(Fact):
    """The table's reads go to ``shoe_id`` from now on."""

    STORED_TOPIC: ClassVar[str] = "services.shoe.studio:StudioTable.ShoeAttached"
    table_id: str
    shoe_id: str


@dataclass(frozen=True)
class ReadWaitingFact(Fact):
    """A read of the table's device with no shoe to take it (before the table's next studio
    shoe opens, or after its shoe went out): the next shoe takes it first."""

    STORED_TOPIC: ClassVar[str] = "services.shoe.studio:StudioTable.ReadWaiting"
    table_id: str
    device: str
    seq: int
    what: str
    card: str | None
    button: str | None
    last_seq: int | None
    read_at: datetime


STUDIO_SHARED_TOPICS: dict[str, type[Fact]] = {
    "services.shoe.studio:StudioShoe.CardsBurned": CardsBurnedFact,
    "services.shoe.studio:StudioShoe.CardsDrawn": CardsDrawnFact,
}
"""A studio shoe records the software shoe's burn and draws (the same facts, published the
same way) under stored topics of its own: stored topic -> its fact."""

SHOE_FACTS: tuple[type[Fact], ...] = (
    ShoeShuffledFact,
    CardsBurnedFact,
    CardsDrawnFact,
    ShoeRevealedFact,
    StudioShoeOpenedFact,
    ReadTakenFact,
    DrawRequestedFact,
    ShoeHeldFact,
    CoupClearedFact,
    CorrectionWaitingFact,
    CardsAcceptedFact,
    StudioShoeClosedFact,
    StudioTableStartedFact,
    ShoeAttachedFact,
    ReadWaitingFact,
)
