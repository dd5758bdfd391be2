"""Commands: table commands (to dealing), bets (to settlement), shoe commands (dealing to shoe)."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints, field_serializer

from contracts.envelope import (
    BetId,
    BetLimitSpec,
    BetTypeName,
    Currency,
    Identifier,
    TableMessage,
)

PaytableName = Annotated[str, StringConstraints(min_length=1, max_length=64)]

_MAX_AMOUNT_EXPONENT = 38


def _sane_magnitude(value: Decimal) -> Decimal:
    # Settlement turns the amount into an int; refuse absurd magnitudes (1e39 and up)
    # here so that a crafted number cannot make that conversion explode.
    if value.adjusted() > _MAX_AMOUNT_EXPONENT:
        raise ValueError(f"amount magnitude must be below 1e{_MAX_AMOUNT_EXPONENT + 1}")
    return value


LenientAmount = Annotated[
    Decimal, Field(strict=False, allow_inf_nan=False), AfterValidator(_sane_magnitude)
]


class OpenTable(TableMessage):
    """Open a table with its settings (dealing then shuffles a shoe and opens betting)."""

    type: Literal["OpenTable"] = "OpenTable"
    decks: int = Field(default=6, ge=1, le=8, description="Decks in each shoe, 1 to 8.")
    paytable: PaytableName = Field(
        default="standard",
        description="Name of the paytable: `standard` (Tie 8:1) or `tie-9-to-1`.",
    )
    limits: dict[BetTypeName, BetLimitSpec] = Field(
        description="Minimum and maximum stake per bet type; a bet type absent here is not offered."
    )
    currency: Currency = Field(description="The table's currency; bets in another are rejected.")
    betting_window_ms: int = Field(
        ge=0, description="How long betting stays open for each coup, in milliseconds."
    )
    cut_card_from_end: int = Field(
        default=16,
        ge=0,
        le=416,
        description="How many cards from the end of the shoe the cut card is placed.",
    )


class CloseTable(TableMessage):
    """Close a table: no new coup starts; the shoe is closed and its order revealed."""

    type: Literal["CloseTable"] = "CloseTable"
    reason: str = Field(default="", description="Why the table closes (free text, for the record).")


class CloseBetting(TableMessage):
    """Close betting on a coup now, before its betting window runs out."""

    type: Literal["CloseBetting"] = "CloseBetting"
    coup_id: Identifier = Field(description="The coup whose betting closes.")


class VoidCoup(TableMessage):
    """Void a coup (a supervisor's decision): every bet on it is refunded."""

    type: Literal["VoidCoup"] = "VoidCoup"
    coup_id: Identifier = Field(description="The coup to void.")
    supervisor_id: Identifier | None = Field(
        default=None,
        description="The authorising supervisor; without one dealing answers `CommandRejected`.",
    )
    reason: str = Field(default="", description="Why the coup is voided (recorded).")


class PlaceBet(TableMessage):
    """Place a bet on a coup. Idempotent by `bet_id`.

    `bet_type`, `amount` and `currency` are deliberately lenient: a bad value is
    answered with `BetRejected` (UNKNOWN_BET_TYPE, INVALID_AMOUNT, WRONG_CURRENCY),
    not refused as malformed.

    Whether the bet was in time is judged by when the Kafka broker appended it to the
    bet-commands topic (LogAppendTime), never by `occurred_at` (informational only).
    """

    type: Literal["PlaceBet"] = "PlaceBet"
    bet_id: BetId = Field(
        description=(
            "Id of the bet, 1-64 characters, chosen by the sender: the idempotency key "
            "(a resend is answered like the first; reuse with other content is rejected)."
        )
    )
    coup_id: Identifier = Field(description="The coup bet on (from `BettingOpened`).")
    bettor_id: Identifier = Field(
        description="Who bets (one bettor cannot back both Player and Banker in a coup)."
    )
    bet_type: str = Field(
        description="One of `player`, `banker`, `tie`, `player_pair`, `banker_pair`."
    )
    amount: LenientAmount = Field(
        description=(
            "Stake in integer minor units (cents). Any JSON number or numeric string is "
            "accepted here; settlement rejects a non-positive or fractional amount."
        )
    )
    currency: str = Field(description="Currency of the stake (ISO 4217); must be the table's.")

    @field_serializer("amount")
    def _serialize_amount(self, amount: Decimal) -> int | str:
        if amount == amount.to_integral_value():
            return int(amount)
        return str(amount)


class ShuffleShoe(TableMessage):
    """Shuffle a new shoe for a table (dealing to shoe)."""

    type: Literal["ShuffleShoe"] = "ShuffleShoe"
    shoe_id: Identifier = Field(description="Id of the new shoe, chosen by dealing.")
    decks: int = Field(ge=1, le=8, description="Decks in the shoe, 1 to 8.")
    cut_card_from_end: int = Field(
        ge=0, le=416, description="How many cards from the end the cut card is placed."
    )


class DrawCards(TableMessage):
    """Draw the next cards of a shoe for a coup (dealing to shoe). Idempotent by `request_id`."""

    type: Literal["DrawCards"] = "DrawCards"
    shoe_id: Identifier = Field(description="The shoe to draw from.")
    coup_id: Identifier = Field(description="The coup the cards are for.")
    request_id: Identifier = Field(
        description="Id of this request; a repeated request draws nothing new."
    )
    count: int = Field(ge=1, le=6, description="How many cards to draw, 1 to 6.")


class CloseShoe(TableMessage):
    """Close a shoe and reveal its order and salt (dealing to shoe)."""

    type: Literal["CloseShoe"] = "CloseShoe"
    shoe_id: Identifier = Field(description="The shoe to close.")


TableCommand = Annotated[
    OpenTable | CloseTable | CloseBetting | VoidCoup, Field(discriminator="type")
]
"""A message on `punto-banco.table-commands`."""

BetCommand = Annotated[PlaceBet, Field(discriminator="type")]
"""A message on `punto-banco.bet-commands`."""

ShoeCommand = Annotated[ShuffleShoe | DrawCards | CloseShoe, Field(discriminator="type")]
"""A message on `punto-banco.shoe-commands`."""
