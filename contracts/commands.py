"""Commands: table commands (to dealing), bets (to settlement), shoe commands (dealing to shoe)."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal

from pydantic import Field, PlainSerializer, PlainValidator, StringConstraints, WithJsonSchema

from contracts.envelope import (
    MAX_BETTING_WINDOW_MS,
    MAX_SHOE_CARDS,
    Authorization,
    BetId,
    BetLimitSpec,
    BetTypeName,
    CardCode,
    CardSource,
    CoupNumber,
    Currency,
    Identifier,
    PaytableName,
    TableMessage,
    Text,
    UtcDatetime,
)

AMOUNT_TEXT_CHARS = 40
"""The longest amount a PlaceBet may carry as text."""

MAX_AMOUNT_INPUT = 2**53 - 1
"""The largest integer a PlaceBet amount may be (exact in every JSON reader)."""


def _amount_input(value: object) -> int | str:
    """A PlaceBet amount as received: a whole JSON number within +-(2^53 - 1), or a short text."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 1e3 or 2500.0: JSON Schema counts them as integers too
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(
            "must be a whole number of minor units (a JSON integer) or a text of at most "
            f"{AMOUNT_TEXT_CHARS} characters"
        )
    if isinstance(value, int) and abs(value) > MAX_AMOUNT_INPUT:
        raise ValueError(f"must be within +-{MAX_AMOUNT_INPUT} (2^53 - 1)")
    if isinstance(value, str) and len(value) > AMOUNT_TEXT_CHARS:
        raise ValueError(f"a text amount has at most {AMOUNT_TEXT_CHARS} characters")
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:  # a lone surrogate ("\ud800"): no answer could quote it
            raise ValueError("a text amount must be valid Unicode (no lone surrogate)") from None
    return value


AmountInput = Annotated[
    int | str,
    PlainValidator(_amount_input),
    PlainSerializer(lambda value: value),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": -MAX_AMOUNT_INPUT, "maximum": MAX_AMOUNT_INPUT},
                {"type": "string", "maxLength": AMOUNT_TEXT_CHARS},
            ]
        }
    ),
]
"""A stake as the bettor's front end sent it: a JSON integer within +-(2^53 - 1), or a short
text. Deliberately lenient, so that every bad amount gets an answer (``INVALID_AMOUNT``) rather
than a dead letter; settlement parses it once (``rules.validation.parse_amount``)."""


def amount_for(value: int | Decimal | str) -> int | str:
    """How a front end writes a stake in a PlaceBet: a whole number as an integer, anything
    else (``Decimal("12.5")``, a text) as text, never a float."""
    if isinstance(value, Decimal):
        whole = value.is_finite() and value == value.to_integral_value()
        return int(value) if whole else str(value)
    return value


BetTypeInput = Annotated[str, StringConstraints(max_length=32)]
"""A bet type as sent (an unknown one is answered ``UNKNOWN_BET_TYPE``, one the table does not
offer ``BET_TYPE_NOT_OFFERED``)."""

CurrencyInput = Annotated[str, StringConstraints(max_length=16)]
"""A currency as sent (another than the table's is answered ``WRONG_CURRENCY``)."""


class OpenTable(TableMessage):
    """Open a table with its settings (dealing then shuffles a shoe and opens betting)."""

    type: Literal["OpenTable"] = "OpenTable"
    decks: int = Field(default=6, ge=1, le=8, description="Decks in each shoe, 1 to 8.")
    paytable: PaytableName = Field(
        default="standard",
        description=(
            "Name of the paytable: `standard` (Banker 19:20, Tie 8:1), `tie-9-to-1`, "
            "`no-commission` (Banker 1:1, 1:2 on a winning 6) or `ez-baccarat` (Banker 1:1, a "
            "winning three-card 7 pushes). Each offers its own bet types (docs/integrating.md)."
        ),
    )
    limits: dict[BetTypeName, BetLimitSpec] = Field(
        description=(
            "Minimum and maximum stake per bet type; a bet type absent here is not offered. "
            "Every one must be a bet type of the paytable (else `INVALID_SETTINGS`)."
        )
    )
    currency: Currency = Field(description="The table's currency; bets in another are rejected.")
    betting_window_ms: int = Field(
        ge=0,
        le=MAX_BETTING_WINDOW_MS,
        description="How long betting stays open for each coup, in milliseconds (at most 1 hour).",
    )
    cut_card_from_end: int = Field(
        default=16,
        ge=0,
        le=MAX_SHOE_CARDS,
        description="How many cards from the end of the shoe the cut card is placed.",
    )
    card_source: CardSource = Field(
        default="rng",
        description=(
            "`rng`: a software shoe; `studio`: the cards the table's card-reading shoe reads "
            "(its dealer's shoe; `decks` and `cut_card_from_end` are then the dealer's: the "
            "device says where the cut card came out)."
        ),
    )


class CloseTable(TableMessage):
    """Close a table: no new coup starts; the shoe is closed and its order revealed."""

    type: Literal["CloseTable"] = "CloseTable"
    reason: Text = Field(
        default="", description="Why the table closes (free text, for the record)."
    )


class CloseBetting(TableMessage):
    """Close betting on a coup now, before its betting window runs out."""

    type: Literal["CloseBetting"] = "CloseBetting"
    coup_id: Identifier = Field(description="The coup whose betting closes.")


class VoidCoup(TableMessage):
    """Void a coup (a supervisor's signed decision): every bet on it is refunded.

    `authorization` is the decision signed with the supervisor's key (`punto-banco supervisor
    void` makes and sends it); without a valid one dealing answers `CommandRejected` and nothing
    changes.
    """

    type: Literal["VoidCoup"] = "VoidCoup"
    coup_id: Identifier = Field(description="The coup to void.")
    supervisor_id: Identifier | None = Field(
        default=None,
        description=(
            "The authorising supervisor (optional): when given it must be the `sub` of "
            "`authorization`, else the command is refused (`AUTHORIZATION_MISMATCH`)."
        ),
    )
    reason: Text = Field(
        default="", description="Why the coup is voided (recorded); the `reason` it signs."
    )
    authorization: Authorization | None = Field(
        default=None,
        description=(
            "The supervisor's decision: a JWT (RFC 7519) signed as a compact JWS (RFC 7515) "
            "with `EdDSA` (Ed25519, RFC 8037), header `typ` `pb-decision+jwt` and `kid` a key "
            "of dealing's supervisors keyring; its claims bind this command: `iss` = `sub` = "
            "the supervisor, `aud` `punto-banco:dealing`, `jti` = this command's `event_id`, "
            "`iat`, `exp` (at most one hour later), `ver` 1, `action` `void`, `table_id`, "
            "`coup_id` and `reason`. Without it: `SUPERVISOR_REQUIRED`."
        ),
    )


class PlaceBet(TableMessage):
    """Place a bet on a coup. Idempotent by `bet_id`.

    `bet_type`, `amount` and `currency` are deliberately lenient (within their bounds): a bad
    value is answered with `BetRejected` (UNKNOWN_BET_TYPE, BET_TYPE_NOT_OFFERED, INVALID_AMOUNT,
    WRONG_CURRENCY),
    not refused as malformed. A message the schema refuses (an oversized field, a float
    amount...) whose `bet_id` can be read is answered too, with the code of its first wrong
    field; only one without a readable `bet_id` is a dead letter, without an answer. Keyed by
    its `table_id` and partitioned with murmur2, or refused WRONG_KEY / WRONG_PARTITION.

    Whether the bet was in time is judged by when the Kafka broker appended it to the
    bet-commands topic (LogAppendTime), never by `occurred_at` (informational only).
    """

    type: Literal["PlaceBet"] = "PlaceBet"
    bet_id: BetId = Field(
        description=(
            "Id of the bet, 1-64 characters (no control character), chosen by the sender: the "
            "idempotency key (a resend is answered like the first; reuse with other content is "
            "rejected)."
        )
    )
    coup_id: Identifier = Field(description="The coup bet on (from `BettingOpened`).")
    bettor_id: Identifier = Field(
        description="Who bets (one bettor cannot back both Player and Banker in a coup)."
    )
    bet_type: BetTypeInput = Field(
        description=(
            "One of `player`, `banker`, `tie`, `player_pair`, `banker_pair`, `either_pair`, "
            "`perfect_pair`, `dragon_bonus_player`, `dragon_bonus_banker`, `big`, `small`, "
            "`super_6`, `dragon_7`, `panda_8`: one the table offers (its limits name them), "
            "else `BET_TYPE_NOT_OFFERED`. One bettor may not back both Player and Banker in a "
            "coup; side bets combine freely."
        )
    )
    amount: AmountInput = Field(
        description=(
            "Stake in integer minor units (cents): a JSON integer (within +-(2^53 - 1)), or a "
            "text of at most 40 "
            'characters (`"2500"`). Settlement answers anything that is not a positive whole '
            "number with `INVALID_AMOUNT`, and a stake outside the table's limits with "
            "`BELOW_MINIMUM` / `ABOVE_MAXIMUM`. Non-integer JSON numbers are refused as malformed "
            "(money is never a float)."
        )
    )
    currency: CurrencyInput = Field(
        description="Currency of the stake (ISO 4217); must be the table's."
    )


class OpenBook(TableMessage):
    """Dealing opens a coup's bet book (on `punto-banco.bet-commands`, in the table's partition).

    Sent by the dealing service, never by a bettor: it marks, in the same Kafka partition as
    the table's bets, where betting on the coup starts. A `PlaceBet` for the coup appended
    before it is answered `NO_SUCH_COUP`. It carries the terms in force for the coup.
    """

    type: Literal["OpenBook"] = "OpenBook"
    coup_id: Identifier = Field(description="The coup whose book opens.")
    coup_number: CoupNumber = Field(description="Number of the coup at its table.")
    shoe_id: Identifier = Field(description="The shoe the coup is dealt from.")
    closes_at: UtcDatetime = Field(description="When betting closes at the latest, UTC.")
    paytable: PaytableName = Field(description="The paytable in force.")
    limits: dict[BetTypeName, BetLimitSpec] = Field(
        description="Minimum and maximum stake per bet type offered, in minor units."
    )
    currency: Currency = Field(description="The table's currency.")


class CloseBook(TableMessage):
    """Dealing closes a coup's bet book (on `punto-banco.bet-commands`, in the table's partition).

    Sent by the dealing service when betting ends (the window ran out or `CloseBetting`): every
    `PlaceBet` appended after it in the partition is answered `BETTING_CLOSED`, every one
    appended before it is judged as on time. Settlement then publishes `BetsClosed`.
    """

    type: Literal["CloseBook"] = "CloseBook"
    coup_id: Identifier = Field(description="The coup whose book closes.")


class ShuffleShoe(TableMessage):
    """Shuffle a new shoe for a table (dealing to shoe)."""

    type: Literal["ShuffleShoe"] = "ShuffleShoe"
    shoe_id: Identifier = Field(description="Id of the new shoe, chosen by dealing.")
    decks: int = Field(ge=1, le=8, description="Decks in the shoe, 1 to 8.")
    cut_card_from_end: int = Field(
        ge=0, le=MAX_SHOE_CARDS, description="How many cards from the end the cut card is placed."
    )
    card_source: CardSource = Field(
        default="rng",
        description="`rng`: shuffle a software shoe; `studio`: take the table device's reads.",
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


class CorrectCoup(TableMessage):
    """Correct a held coup of a studio table (a supervisor's signed decision): its cards are
    these, so its shoe deals them and deals on (docs/studio.md).

    `authorization` as `VoidCoup`'s, with `action` `correct` and the claim `cards` equal to
    `cards`. Refused (`COUP_NOT_CORRECTABLE`) unless the coup is the current coup of a studio
    table, being dealt, and `cards` is a whole coup that begins with the cards dealt to it.
    """

    type: Literal["CorrectCoup"] = "CorrectCoup"
    coup_id: Identifier = Field(description="The coup to correct.")
    cards: list[CardCode] = Field(
        min_length=4, max_length=6, description="All the coup's cards, in the order dealt."
    )
    supervisor_id: Identifier | None = Field(
        default=None, description="The authorising supervisor (optional), as in `VoidCoup`."
    )
    reason: Text = Field(default="", description="Why (recorded); the `reason` it signs.")
    authorization: Authorization | None = Field(
        default=None,
        description="The supervisor's decision (as `VoidCoup.authorization`, `action` "
        "`correct`, claim `cards`). Without it: `SUPERVISOR_REQUIRED`.",
    )


class CorrectResult(TableMessage):
    """Correct the result of a studio table's coup resolved and settled on a card its device
    misread (a supervisor's signed decision, docs/studio.md): the coup's cards are these, its
    bets are settled again on them and the differences paid (`CoupCorrected`, `BetCorrected`).

    `authorization` as `VoidCoup`'s, with `action` `correct-result` and the claim `cards` equal
    to `cards`. Refused (`RESULT_NOT_CORRECTABLE`) unless the table is a studio table, the coup
    resolved (not voided) within the void window, and `cards` is a whole coup by the tableau
    other than its cards now. A coup may be corrected again (each time against its latest
    result).
    """

    type: Literal["CorrectResult"] = "CorrectResult"
    coup_id: Identifier = Field(description="The coup to correct.")
    cards: list[CardCode] = Field(
        min_length=4, max_length=6, description="All the coup's cards, in the order dealt."
    )
    supervisor_id: Identifier | None = Field(
        default=None, description="The authorising supervisor (optional), as in `VoidCoup`."
    )
    reason: Text = Field(default="", description="Why (recorded); the `reason` it signs.")
    authorization: Authorization | None = Field(
        default=None,
        description="The supervisor's decision (as `VoidCoup.authorization`, `action` "
        "`correct-result`, claim `cards`). Without it: `SUPERVISOR_REQUIRED`.",
    )


TableCommand = Annotated[
    OpenTable | CloseTable | CloseBetting | VoidCoup | CorrectCoup | CorrectResult,
    Field(discriminator="type"),
]
"""A message on `punto-banco.table-commands`."""

BetCommand = Annotated[PlaceBet | OpenBook | CloseBook, Field(discriminator="type")]
"""A message on `punto-banco.bet-commands`: bets, and dealing's marks of where each coup's
betting opens and closes (in the same partition as the table's bets, so the broker's order
decides which bets were in time)."""


class ClearCoup(TableMessage):
    """A studio table's coup ended without its cards (a supervisor voided it): its shoe owes
    the coup nothing more, puts aside the cards read for it and, if it was held, deals on
    (dealing to shoe; docs/studio.md)."""

    type: Literal["ClearCoup"] = "ClearCoup"
    shoe_id: Identifier = Field(description="The studio shoe.")
    coup_id: Identifier = Field(description="The coup voided.")
    reason: Text = Field(default="", description="Why (the void's reason, for the record).")


class AcceptCards(TableMessage):
    """A held studio coup's cards as a supervisor decided them (`CorrectCoup`, verified by
    dealing): its shoe takes the ones it has not read, deals them and deals on (dealing to
    shoe)."""

    type: Literal["AcceptCards"] = "AcceptCards"
    shoe_id: Identifier = Field(description="The studio shoe.")
    coup_id: Identifier = Field(description="The coup corrected.")
    cards: list[CardCode] = Field(
        min_length=4, max_length=6, description="All the coup's cards, in the order dealt."
    )
    reason: Text = Field(default="", description="Why (the correction's reason).")


ShoeCommand = Annotated[
    ShuffleShoe | DrawCards | CloseShoe | ClearCoup | AcceptCards, Field(discriminator="type")
]
"""A message on `punto-banco.shoe-commands`."""
