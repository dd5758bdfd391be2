"""Events of the shoe service (topic `punto-banco.shoe-events`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from contracts.envelope import (
    MAX_SHOE_CARDS,
    CardCode,
    HexBytes,
    HexDigest,
    Identifier,
    PositionedCard,
    ShoePosition,
    TableMessage,
)

SchemeName = Annotated[str, StringConstraints(min_length=1, max_length=64)]


class ShoeShuffled(TableMessage):
    """A new shoe was shuffled; its order is committed to but kept secret until `ShoeClosed`."""

    type: Literal["ShoeShuffled"] = "ShoeShuffled"
    shoe_id: Identifier = Field(description="The shoe.")
    decks: int = Field(ge=1, le=8, description="Decks in the shoe.")
    card_count: int = Field(ge=1, le=MAX_SHOE_CARDS, description="Cards in the shoe (52 per deck).")
    commitment: HexDigest = Field(
        description="SHA-256 commitment to the shuffled order and a secret salt (hex)."
    )
    commitment_scheme: SchemeName = Field(
        description=(
            "How the commitment is computed, so anyone can verify it from `ShoeClosed`'s "
            "order and salt (the rules engine documents the exact scheme)."
        )
    )
    cut_card_index: ShoePosition = Field(
        description="0-based position of the first card behind the cut card."
    )


class CardsBurned(TableMessage):
    """The burn: the first card was shown and that many cards were burned (0-value burns 10)."""

    type: Literal["CardsBurned"] = "CardsBurned"
    shoe_id: Identifier = Field(description="The shoe.")
    shown_card: CardCode = Field(description="The card shown face up; its value sets the burn.")
    burned: list[PositionedCard] = Field(
        max_length=10, description="The burned cards, each with its position in the shuffled order."
    )
    next_position: ShoePosition = Field(description="Position of the next card to be dealt.")


class CardDrawn(TableMessage):
    """One card left the shoe for a coup (answer to `DrawCards`, one event per card)."""

    type: Literal["CardDrawn"] = "CardDrawn"
    shoe_id: Identifier = Field(description="The shoe.")
    coup_id: Identifier = Field(description="The coup the card is for.")
    request_id: Identifier = Field(description="The `DrawCards.request_id` this answers.")
    position: ShoePosition = Field(
        description="0-based position of the card in the shuffled order."
    )
    card: CardCode = Field(description="The card.")


class CutCardReached(TableMessage):
    """The cut card came out: the current coup is finished and one more is played."""

    type: Literal["CutCardReached"] = "CutCardReached"
    shoe_id: Identifier = Field(description="The shoe.")
    coup_id: Identifier = Field(description="The coup during which the cut card came out.")
    position: ShoePosition = Field(description="Position of the cut card (first card behind it).")


class ShoeClosed(TableMessage):
    """The shoe is finished; its full order and salt are revealed to verify the commitment."""

    type: Literal["ShoeClosed"] = "ShoeClosed"
    shoe_id: Identifier = Field(description="The shoe.")
    order: list[CardCode] = Field(
        max_length=MAX_SHOE_CARDS,
        description="The complete shuffled order, first card first.",
    )
    salt: HexBytes = Field(description="The secret salt of the commitment, hex.")
    commitment: HexDigest = Field(description="The commitment published in `ShoeShuffled`.")
    cards_dealt: ShoePosition = Field(description="How many cards left the shoe (burn included).")


class StudioShoeOpened(TableMessage):
    """A studio table's shoe: its cards will be what the table's device reads (no shuffle here,
    so no commitment: the studio audit checks the reads instead, docs/studio.md)."""

    type: Literal["StudioShoeOpened"] = "StudioShoeOpened"
    shoe_id: Identifier = Field(description="The shoe.")
    decks: int = Field(ge=1, le=8, description="Decks in the dealer's shoe.")
    card_count: int = Field(ge=1, le=MAX_SHOE_CARDS, description="Cards in it (52 per deck).")


class StudioShoeClosed(TableMessage):
    """A studio shoe is finished: every card its device read, by position (the burn first)."""

    type: Literal["StudioShoeClosed"] = "StudioShoeClosed"
    shoe_id: Identifier = Field(description="The shoe.")
    cards: list[CardCode] = Field(
        max_length=MAX_SHOE_CARDS, description="The cards read, position 0 (the shown card) first."
    )
    cards_dealt: ShoePosition = Field(description="How many cards left the shoe (burn included).")


ShoeEvent = Annotated[
    ShoeShuffled
    | CardsBurned
    | CardDrawn
    | CutCardReached
    | ShoeClosed
    | StudioShoeOpened
    | StudioShoeClosed,
    Field(discriminator="type"),
]
"""A message on `punto-banco.shoe-events`."""
