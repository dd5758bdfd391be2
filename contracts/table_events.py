"""Events of the dealing service: the tables' (topic `punto-banco.table-events`) and its answers
to refused table commands (`punto-banco.command-events`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from contracts.envelope import (
    MAX_BETTING_WINDOW_MS,
    MAX_SHOE_CARDS,
    BetLimitSpec,
    BetTypeName,
    CardCode,
    CardSource,
    CommandRejectionCode,
    CoupNumber,
    Currency,
    Identifier,
    OutcomeName,
    PaytableName,
    ShoePosition,
    SideName,
    TableMessage,
    Text,
    TypeName,
    UtcDatetime,
    Uuid,
)


class TableOpened(TableMessage):
    """A table opened with these settings."""

    type: Literal["TableOpened"] = "TableOpened"
    decks: int = Field(ge=1, le=8, description="Decks in each shoe.")
    paytable: PaytableName = Field(description="Name of the paytable in force.")
    limits: dict[BetTypeName, BetLimitSpec] = Field(
        description="Minimum and maximum stake per bet type offered, in minor units."
    )
    currency: Currency = Field(description="The table's currency.")
    betting_window_ms: int = Field(
        ge=0, le=MAX_BETTING_WINDOW_MS, description="Betting window of each coup, milliseconds."
    )
    cut_card_from_end: int = Field(
        ge=0, le=MAX_SHOE_CARDS, description="Cut card position, cards from the end."
    )
    card_source: CardSource = Field(
        default="rng",
        description="Where the cards come from: `rng` (software shoe) or `studio` (its device).",
    )


class TableClosed(TableMessage):
    """A table closed."""

    type: Literal["TableClosed"] = "TableClosed"
    reason: Text = Field(default="", description="Why it closed.")


class BettingOpened(TableMessage):
    """A new coup: bets on it are accepted until `closes_at` (or `BettingClosed`)."""

    type: Literal["BettingOpened"] = "BettingOpened"
    coup_id: Identifier = Field(description="The new coup; bets name it in `PlaceBet.coup_id`.")
    coup_number: CoupNumber = Field(description="Number of the coup at this table, from 1.")
    shoe_id: Identifier = Field(description="The shoe the coup is dealt from.")
    closes_at: UtcDatetime = Field(description="When betting closes, UTC.")
    last_of_shoe: bool = Field(description="True when the cut card is out: the shoe's last coup.")


class BettingClosed(TableMessage):
    """No more bets on the coup; dealing starts."""

    type: Literal["BettingClosed"] = "BettingClosed"
    coup_id: Identifier = Field(description="The coup.")


class CardDealt(TableMessage):
    """A card was dealt to a side of the tableau."""

    type: Literal["CardDealt"] = "CardDealt"
    coup_id: Identifier = Field(description="The coup.")
    shoe_id: Identifier = Field(description="The shoe the card came from.")
    side: SideName = Field(description="Who receives it: `PLAYER` or `BANKER`.")
    card: CardCode = Field(description="The card.")
    position: ShoePosition = Field(description="0-based position of the card in the shoe's order.")
    card_index_in_hand: int = Field(
        ge=1, le=3, description="1 or 2 for the first two cards, 3 for a third card."
    )


class CoupResolved(TableMessage):
    """The coup is complete: hands, totals and outcome (bets are settled from this)."""

    type: Literal["CoupResolved"] = "CoupResolved"
    coup_id: Identifier = Field(description="The coup.")
    coup_number: CoupNumber = Field(description="Number of the coup at this table.")
    shoe_id: Identifier = Field(description="The shoe.")
    player_cards: list[CardCode] = Field(
        min_length=2, max_length=3, description="The Player's cards in dealing order (2-3)."
    )
    banker_cards: list[CardCode] = Field(
        min_length=2, max_length=3, description="The Banker's cards in dealing order (2-3)."
    )
    player_total: int = Field(ge=0, le=9, description="The Player's total, 0-9.")
    banker_total: int = Field(ge=0, le=9, description="The Banker's total, 0-9.")
    outcome: OutcomeName = Field(description="`PLAYER`, `BANKER` or `TIE`.")
    natural: bool = Field(description="True if either side had 8 or 9 with two cards.")
    player_pair: bool = Field(description="The Player's first two cards are of the same rank.")
    banker_pair: bool = Field(description="The Banker's first two cards are of the same rank.")


class CoupVoided(TableMessage):
    """A supervisor voided the coup: every bet on it is refunded (even if already settled)."""

    type: Literal["CoupVoided"] = "CoupVoided"
    coup_id: Identifier = Field(description="The coup.")
    supervisor_id: Identifier = Field(
        description=(
            "The supervisor who authorised the void: the `sub` of the signed decision dealing "
            "verified (`VoidCoup.authorization`; voids recorded before decisions were signed: "
            "the `supervisor_id` the command named)."
        )
    )
    reason: Text = Field(default="", description="Why the coup was voided.")
    was_resolved: bool = Field(description="True if the coup had already been resolved.")


class CoupCorrected(TableMessage):
    """A supervisor corrected a resolved coup's result (`CorrectResult`, a studio table: its
    device misread a card): the coup's cards, totals and outcome are these from now on, and
    its bets are settled again on them, the differences paid (`BetCorrected`)."""

    type: Literal["CoupCorrected"] = "CoupCorrected"
    coup_id: Identifier = Field(description="The coup.")
    correction_id: Uuid = Field(
        description="The correction: the `event_id` of the `CorrectResult` (its decision's id)."
    )
    coup_number: CoupNumber = Field(description="Number of the coup at this table.")
    shoe_id: Identifier = Field(description="The shoe.")
    player_cards: list[CardCode] = Field(
        min_length=2, max_length=3, description="The Player's corrected cards in dealing order."
    )
    banker_cards: list[CardCode] = Field(
        min_length=2, max_length=3, description="The Banker's corrected cards in dealing order."
    )
    player_total: int = Field(ge=0, le=9, description="The Player's corrected total, 0-9.")
    banker_total: int = Field(ge=0, le=9, description="The Banker's corrected total, 0-9.")
    outcome: OutcomeName = Field(description="The corrected outcome.")
    natural: bool = Field(description="True if either side had 8 or 9 with two cards.")
    player_pair: bool = Field(description="The Player's first two cards are of the same rank.")
    banker_pair: bool = Field(description="The Banker's first two cards are of the same rank.")
    supervisor_id: Identifier = Field(
        description="The supervisor who decided it: the `sub` of the signed decision dealing "
        "verified (`CorrectResult.authorization`)."
    )
    reason: Text = Field(default="", description="Why the result was corrected.")


class CommandRejected(TableMessage):
    """Dealing refused a table command; nothing changed. On `punto-banco.command-events`,
    which only the senders of table commands read (on `table-events` before 2026-12)."""

    type: Literal["CommandRejected"] = "CommandRejected"
    command_id: Uuid = Field(description="`event_id` of the refused command.")
    command_type: TypeName = Field(description="Type of the refused command, e.g. `VoidCoup`.")
    reason_code: CommandRejectionCode = Field(description="Why, as a stable code.")
    message: Text = Field(description="Why, in words a person can act on.")


TableEvent = Annotated[
    TableOpened
    | TableClosed
    | BettingOpened
    | BettingClosed
    | CardDealt
    | CoupResolved
    | CoupVoided
    | CoupCorrected,
    Field(discriminator="type"),
]
"""A message on `punto-banco.table-events`."""
