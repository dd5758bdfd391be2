"""The envelope every message carries, and the constrained types messages share.

Every message on Kafka is a JSON object with a ``type`` discriminator (the class
name) and the envelope fields ``event_id``, ``schema_version``, ``occurred_at``,
``table_id``, ``causation_id`` and ``correlation_id``. Money is always an integer
number of minor units (cents); there are no floats anywhere in the contracts.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal
from uuid import UUID, uuid4

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints


def _to_utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC (the default of every timestamp)."""
    return datetime.now(UTC)


UtcDatetime = Annotated[AwareDatetime, AfterValidator(_to_utc)]
"""An ISO 8601 timestamp with a timezone (naive timestamps are refused), normalised to UTC."""

TableId = Annotated[
    str,
    StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$"),
]
"""A table's id: 1-64 characters of letters, digits, ``_ . : -``. Also the Kafka key."""

Identifier = Annotated[str, StringConstraints(min_length=1, max_length=128)]
"""An opaque id chosen by the producer (coup, shoe, bettor, request...): 1-128 characters."""

BetId = Annotated[str, StringConstraints(min_length=1, max_length=64)]
"""A bet's id, chosen by the bettor's front end: 1-64 characters; the idempotency key of a bet."""

CardCode = Annotated[str, StringConstraints(pattern=r"^(A|[2-9]|T|J|Q|K)[CDHS]$")]
"""A card as rank + suit: ranks A 2-9 T J Q K (T is the ten), suits C D H S. Example: ``9H``."""

Currency = Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]
"""An ISO 4217 currency code, three capital letters (``EUR``)."""

HexDigest = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
"""A SHA-256 digest as 64 lower-case hexadecimal characters."""

HexBytes = Annotated[str, StringConstraints(pattern=r"^(?:[0-9a-f]{2})+$")]
"""Bytes as lower-case hexadecimal (two characters per byte)."""

MinorUnits = Annotated[int, Field(ge=0)]
"""An amount of money in integer minor units (cents), never negative."""

BetTypeName = Literal["player", "banker", "tie", "player_pair", "banker_pair"]
"""A bet type (the values of the rules engine's ``BetType``)."""

OutcomeName = Literal["PLAYER", "BANKER", "TIE"]
"""The outcome of a coup."""

SideName = Literal["PLAYER", "BANKER"]
"""A side of the tableau: the Player (Punto) or the Banker (Banco) hand."""

BetResultName = Literal["WIN", "LOSE", "PUSH"]
"""How a bet ended: won, lost, or pushed (stake returned: Player/Banker on a tie)."""

RejectionCode = Literal[
    "NO_SUCH_TABLE",
    "NO_SUCH_COUP",
    "BETTING_CLOSED",
    "BELOW_MINIMUM",
    "ABOVE_MAXIMUM",
    "OPPOSING_BETS",
    "WRONG_CURRENCY",
    "INVALID_AMOUNT",
    "UNKNOWN_BET_TYPE",
    "TABLE_CLOSED",
    "DUPLICATE_BET_ID",
]
"""Why settlement refused a bet (``BetRejected.reason_code``).

The same strings as the rules engine's ``RejectionReason``, plus ``DUPLICATE_BET_ID``
(a bet id used again with different content; a resend with the same content is
answered with the original outcome instead).
"""

CommandRejectionCode = Literal[
    "SUPERVISOR_REQUIRED",
    "NO_SUCH_TABLE",
    "NO_SUCH_COUP",
    "TABLE_ALREADY_OPEN",
    "TABLE_CLOSED",
    "BETTING_CLOSED",
    "COUP_NOT_VOIDABLE",
    "INVALID_SETTINGS",
    "UNKNOWN_PAYTABLE",
]
"""Why the dealing service refused a table command (``CommandRejected.reason_code``)."""


WIRE_REQUIRED = ("type", "event_id", "occurred_at")
"""Envelope fields that default in Python but must be present in JSON on Kafka."""


class ContractModel(BaseModel):
    """Base of every contract model: immutable, and unknown fields are an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Message(ContractModel):
    """Base of every Kafka message: the discriminator and the envelope (without the table)."""

    type: str = Field(description="The message type: the class name, e.g. `PlaceBet`.")
    event_id: UUID = Field(
        default_factory=uuid4,
        description=(
            "Unique id of this message (for a command: the command id, echoed as "
            "`causation_id` and `CommandRejected.command_id` by whoever handles it)."
        ),
    )
    schema_version: int = Field(
        default=1, ge=1, description="Version of this message's schema; 1 for now."
    )
    occurred_at: UtcDatetime = Field(
        default_factory=utc_now,
        description="When the event happened (for a command: when it was issued), UTC ISO 8601.",
    )
    causation_id: UUID | None = Field(
        default=None, description="`event_id` of the message that caused this one, if any."
    )
    correlation_id: UUID | None = Field(
        default=None,
        description="Id shared by every message of one business flow (e.g. one coup), if any.",
    )


class TableMessage(Message):
    """A message about one table: ``table_id`` is also its Kafka key."""

    table_id: TableId = Field(
        description=(
            "The table this message is about (1-64 characters `[A-Za-z0-9_.:-]`); "
            "the Kafka key, so every message of a table stays in order."
        )
    )


class BetLimitSpec(ContractModel):
    """Table minimum and maximum stake of one bet type, in minor units."""

    minimum: int = Field(ge=1, description="Smallest stake accepted, in minor units.")
    maximum: int = Field(ge=1, description="Largest stake accepted, in minor units.")


class PositionedCard(ContractModel):
    """A card with its position in the shuffled order of the shoe."""

    position: int = Field(
        ge=0, description="0-based index of the card in the shuffled order (see `ShoeClosed`)."
    )
    card: CardCode = Field(description="The card, e.g. `9H`.")
