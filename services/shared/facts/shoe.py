"""The shoe's stored facts (``services.shoe.domain.Shoe``), published on shoe-events."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar
from uuid import UUID

from services.shared.facts.base import Fact


@dataclass(frozen=True)
class ShoeShuffledFact(Fact):
    """A shoe shuffled and committed to. Published as ``ShoeShuffled`` without ``order`` and
    ``salt`` (kept in the private store until the shoe closes; ``card_count`` is
    ``len(order)``)."""

    STORED_TOPIC: ClassVar[str] = "services.shoe.domain:Shoe.Shuffled"
    table_id: str
    shoe_id: str
    decks: int
    order: list[str]
    salt: str
    commitment: str
    commitment_scheme: str
    cut_card_index: int
    causation_id: UUID | None
    correlation_id: UUID | None


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


SHOE_FACTS: tuple[type[Fact], ...] = (
    ShoeShuffledFact,
    CardsBurnedFact,
    CardsDrawnFact,
    ShoeRevealedFact,
)
