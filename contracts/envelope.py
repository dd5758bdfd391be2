"""The envelope every message carries, and the constrained types messages share.

Every message on Kafka is a JSON object with a ``type`` discriminator (the class
name) and the envelope fields ``event_id``, ``schema_version``, ``occurred_at``,
``table_id``, ``causation_id`` and ``correlation_id``. Money is always an integer
number of minor units (cents); there are no floats anywhere in the contracts.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from uuid import UUID, SafeUUID, uuid4

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    StringConstraints,
    WithJsonSchema,
)
from pydantic_core import core_schema

_RFC3339 = re.compile(
    r"\d{4}-(?:0[1-9]|1[0-2])-\d{2}[Tt](?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?"
    r"(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)",
    re.ASCII,
)


def _rfc3339(value: object) -> object:
    """A datetime, or a text that is an RFC 3339 timestamp (what the schemas' ``date-time``
    means) read as one; nothing else (a number is not read as a Unix time)."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and _RFC3339.fullmatch(value) is not None:
        return datetime.fromisoformat(value.upper())  # ValueError for a day the month lacks
    raise ValueError("must be an RFC 3339 timestamp with a time zone (2026-12-01T10:00:00Z)")


_UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}", re.ASCII)


_new_uuid = UUID.__new__
_set = object.__setattr__
_UNKNOWN_SAFETY = SafeUUID.unknown  # read once: an enum member read from its class costs 1 us


def uuid_of_int(value: int) -> UUID:
    """``UUID(int=value)`` for a value known to fit 128 bits, without checking it again (a
    third of the cost: every message's id is read, and 10,000 made per busy coup)."""
    made = _new_uuid(UUID)
    _set(made, "int", value)
    _set(made, "is_safe", _UNKNOWN_SAFETY)
    return made


_NOT_A_UUID = "must be a UUID written 8-4-4-4-12 (6f1c4f6e-3b86-4b2e-9d7a-4b3f0e2a1c11)"


def _uuid(value: object) -> object:
    """A UUID, or its text in the hyphenated form (what the schemas' ``uuid`` means)."""
    if isinstance(value, UUID):
        return value
    if isinstance(value, str) and _UUID_TEXT.fullmatch(value) is not None:
        return uuid_of_int(int(value.replace("-", ""), 16))  # 32 hex digits: 128 bits
    raise ValueError(_NOT_A_UUID)


class _FromJson:
    """A type read from JSON by pydantic-core alone, by ``steps`` (a text's pattern, then its
    own parser): no Python call, where one costs about 1 us a field of every message. From
    Python, the type's own validators read it. The two must admit the same, as the same value,
    and refuse for the same reasons (:meth:`refused`): tests in tests/unit/contracts hold them
    so."""

    def __init__(self, *steps: core_schema.CoreSchema) -> None:
        self.json = core_schema.chain_schema(list(steps)) if len(steps) > 1 else steps[0]

    @staticmethod
    def refused(schema: core_schema.CoreSchema, why: str) -> core_schema.CoreSchema:
        """``schema``, its errors said as the Python validator says them (a ValueError)."""
        return core_schema.custom_error_schema(
            schema, "value_error", custom_error_context={"error": why}
        )

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> Any:
        return core_schema.json_or_python_schema(self.json, handler(source))


Uuid = Annotated[
    UUID,
    BeforeValidator(_uuid),
    _FromJson(
        _FromJson.refused(
            core_schema.chain_schema(
                [
                    core_schema.str_schema(pattern=f"^{_UUID_TEXT.pattern}$"),
                    core_schema.uuid_schema(strict=False),
                ]
            ),
            _NOT_A_UUID,
        )
    ),
    WithJsonSchema({"type": "string", "format": "uuid"}),
]
"""A UUID, written in JSON as its hyphenated text."""


def _to_utc(value: datetime) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+01:00: a year 0 in UTC
        raise ValueError(
            "must be a time UTC can hold, from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z"
        ) from None


def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC (the default of every timestamp)."""
    return datetime.now(UTC)


UtcDatetime = Annotated[AwareDatetime, BeforeValidator(_rfc3339), AfterValidator(_to_utc)]
"""An ISO 8601 timestamp with a timezone (naive timestamps are refused), normalised to UTC."""

TableId = Annotated[
    str,
    StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$"),
]
"""A table's id: 1-64 characters of letters, digits, ``_ . : -``. Also the Kafka key."""

NO_CONTROL_CHARACTERS = r"^[^\x00-\x1f\x7f-\x9f]*$"
"""The schemas' pattern of an id: no control character (Unicode Cc: U+0000-U+001F, U+007F-U+009F).
A NUL cannot be stored in a PostgreSQL text column, a line feed or an escape forges log lines."""


_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f]")


_CONTROL_REFUSED = "must hold no control character (U+0000-U+001F, U+007F-U+009F)"


def _no_control_characters(value: str) -> str:
    if _CONTROL_CHARACTER.search(value) is not None:
        raise ValueError(_CONTROL_REFUSED)
    return value


def _no_control(longest: int) -> tuple[Any, ...]:
    """A text of 1 to ``longest`` characters, none of them a control character."""
    return (
        StringConstraints(min_length=1, max_length=longest),
        AfterValidator(_no_control_characters),
        _FromJson(
            core_schema.str_schema(min_length=1, max_length=longest),
            _FromJson.refused(
                core_schema.str_schema(pattern=NO_CONTROL_CHARACTERS), _CONTROL_REFUSED
            ),
        ),
        Field(json_schema_extra={"pattern": NO_CONTROL_CHARACTERS}),
    )


Identifier = Annotated[str, *_no_control(128)]
"""An opaque id chosen by the producer (coup, shoe, bettor, request...): 1-128 characters, no
control character."""

BetId = Annotated[str, *_no_control(64)]
"""A bet's id, chosen by the bettor's front end: 1-64 characters, no control character; the
idempotency key of a bet."""

CardCode = Annotated[str, StringConstraints(pattern=r"^(A|[2-9]|T|J|Q|K)[CDHS]$")]
"""A card as rank + suit: ranks A 2-9 T J Q K (T is the ten), suits C D H S. Example: ``9H``."""

Currency = Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]
"""An ISO 4217 currency code, three capital letters (``EUR``)."""

HexDigest = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
"""A SHA-256 digest as 64 lower-case hexadecimal characters."""

HexBytes = Annotated[str, StringConstraints(max_length=256, pattern=r"^(?:[0-9a-f]{2})+$")]
"""Bytes as lower-case hexadecimal (two characters per byte), at most 128 bytes."""

MAX_MINOR_UNITS = 2**53 - 1
"""The largest amount of money any message carries (9,007,199,254,740,991 minor units): it fits
a signed 64-bit integer and stays exact as a JavaScript number (IEEE 754 double)."""

MAX_STAKE = 10**14
"""The largest stake a table limit may allow, in minor units. A bet returns at most 251 times its
stake (a Perfect Pair on both hands pays 250 to 1): settlement refuses the stakes of a coup
beyond (2^53 - 1) / 251 (``ABOVE_MAXIMUM``), so every amount stays below
:data:`MAX_MINOR_UNITS`."""

MAX_COUNT = 10**9
"""The largest count (bets on a coup, coup number) any message carries."""

MAX_TEXT = 1000
"""The longest free text (a reason, a message for a person), in characters."""

MinorUnits = Annotated[int, Field(ge=0, le=MAX_MINOR_UNITS)]
"""An amount of money in integer minor units (cents), never negative, at most 2^53 - 1."""

SignedMinorUnits = Annotated[int, Field(ge=-MAX_MINOR_UNITS, le=MAX_MINOR_UNITS)]
"""A signed amount of money (a credit or a debit) in minor units, within +-(2^53 - 1)."""

Stake = Annotated[int, Field(ge=1, le=MAX_STAKE)]
"""A stake in minor units: 1 to 10^14."""

Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
"""A count of things (bets...): 0 to 10^9."""

CoupNumber = Annotated[int, Field(ge=1, le=MAX_COUNT)]
"""The number of a coup at its table, from 1."""

MAX_BETTING_WINDOW_MS = 3_600_000
"""The longest betting window a table may have: one hour."""

MAX_SHOE_CARDS = 8 * 52
"""Cards in the largest shoe (8 decks)."""

ShoePosition = Annotated[int, Field(ge=0, le=MAX_SHOE_CARDS)]
"""A 0-based position in a shoe's shuffled order (the largest shoe holds 416 cards; 416 itself
means "behind the last card", e.g. a cut card at the very end)."""

Text = Annotated[str, StringConstraints(max_length=MAX_TEXT)]
"""Free text for people (a reason, an explanation): at most 1,000 characters."""

TypeName = Annotated[str, StringConstraints(min_length=1, max_length=64)]
"""The name of a message type (``VoidCoup``...)."""

PaytableName = Annotated[str, StringConstraints(min_length=1, max_length=64)]
"""The name of a paytable (``standard``, ``tie-9-to-1``, ``no-commission``, ``ez-baccarat``)."""

SchemaVersion = Annotated[int, Field(ge=1, le=1000)]

BetTypeName = Literal[
    "player",
    "banker",
    "tie",
    "player_pair",
    "banker_pair",
    "either_pair",
    "perfect_pair",
    "dragon_bonus_player",
    "dragon_bonus_banker",
    "big",
    "small",
    "super_6",
    "dragon_7",
    "panda_8",
]
"""A bet type (the values of the rules engine's ``BetType``); each paytable offers some of
them (docs/integrating.md)."""

OutcomeName = Literal["PLAYER", "BANKER", "TIE"]
"""The outcome of a coup."""

CardSource = Literal["rng", "studio"]
"""Where a table's cards come from: `rng`, a software shoe (CSPRNG shuffle, commitment,
reveal); `studio`, the card-reading shoe of a live table, read by the device bridge
(docs/studio.md)."""


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
    "BET_TYPE_NOT_OFFERED",
    "TABLE_CLOSED",
    "BOOK_FULL",
    "DUPLICATE_BET_ID",
    "INVALID_BETTOR_ID",
    "INVALID_ENVELOPE",
    "WRONG_KEY",
    "WRONG_PARTITION",
]
"""Why settlement refused a bet (``BetRejected.reason_code``).

The same strings as the rules engine's ``RejectionReason``, plus ``DUPLICATE_BET_ID``
(a bet id used again with different content; a resend with the same content is
answered with the original outcome instead). A PlaceBet the schema refuses but whose
``bet_id`` can be read is answered with the code of its first wrong field: ``NO_SUCH_TABLE``
(``table_id``), ``NO_SUCH_COUP`` (``coup_id``), ``INVALID_BETTOR_ID``, ``UNKNOWN_BET_TYPE``,
``INVALID_AMOUNT``, ``WRONG_CURRENCY``, ``INVALID_ENVELOPE`` (an envelope field, or one the
contract does not know). :data:`MISPLACED` codes: the record is not where its table's history
is (the same codes as a ``CommandRejected``'s).
"""

MISPLACED = frozenset({"WRONG_KEY", "WRONG_PARTITION"})
"""Why a command was refused where it was read, not for what it says: its key is not its
``table_id`` (``WRONG_KEY``), or its partition is not the table's, murmur2 of the table id
modulo the partition count (``WRONG_PARTITION``). Nothing is recorded of it but the answer:
its bet id or command id stays free, to be sent again keyed by table id with murmur2."""

NON_BINDING = frozenset({"NO_SUCH_TABLE", "NO_SUCH_COUP", "INVALID_ENVELOPE", *MISPLACED})
"""The ``BetRejected`` codes that leave the bet id free (nothing of the bet's content was
judged): the same bet sent again is judged afresh. Every other answer uses the id up."""

CommandRejectionCode = Literal[
    "SUPERVISOR_REQUIRED",
    "NO_SUCH_TABLE",
    "NO_SUCH_COUP",
    "TABLE_ALREADY_OPEN",
    "TABLE_CLOSED",
    "BETTING_CLOSED",
    "COUP_NOT_VOIDABLE",
    "COUP_NOT_CORRECTABLE",
    "RESULT_NOT_CORRECTABLE",
    "INVALID_SETTINGS",
    "UNKNOWN_PAYTABLE",
    "AUTHORIZATION_MALFORMED",
    "UNKNOWN_SUPERVISOR_KEY",
    "SUPERVISOR_KEY_RETIRED",
    "BAD_SIGNATURE",
    "AUTHORIZATION_EXPIRED",
    "AUTHORIZATION_MISMATCH",
    "AUTHORIZATION_REPLAYED",
    "VOID_WINDOW_PASSED",
    "WRONG_KEY",
    "WRONG_PARTITION",
]
"""Why the dealing service refused a table command (``CommandRejected.reason_code``).

A void is a supervisor's signed decision (``VoidCoup.authorization``): ``SUPERVISOR_REQUIRED``
without one; ``AUTHORIZATION_MALFORMED`` when it is not a decision token of the scheme;
``UNKNOWN_SUPERVISOR_KEY`` / ``SUPERVISOR_KEY_RETIRED`` when its key id is not in dealing's
supervisors keyring, or was rotated out; ``BAD_SIGNATURE`` when that key did not sign it;
``AUTHORIZATION_EXPIRED`` outside its validity; ``AUTHORIZATION_MISMATCH`` when what it
signs is not this command (table, coup, reason, command id, supervisor); ``AUTHORIZATION_REPLAYED``
when its id was used already; ``VOID_WINDOW_PASSED`` for a coup older than the void window;
``COUP_NOT_VOIDABLE`` for a coup voided already; ``COUP_NOT_CORRECTABLE`` for a correction
(``CorrectCoup``) of a coup that is not a studio table's coup being dealt, or whose cards are
not a whole coup that begins with the cards it was dealt; ``RESULT_NOT_CORRECTABLE`` for a
correction of a result (``CorrectResult``) of a coup that is not a studio table's, not resolved,
past the void window, or whose cards are not a whole coup other than its cards; :data:`MISPLACED`
codes for a command not keyed by its table id or not in its table's partition."""

MAX_AUTHORIZATION = 12_288
"""The longest decision token (``VoidCoup.authorization``), in characters: the longest token
the bounds of a void allow (a 1,000-character reason and a 128-character coup id of characters
JSON escapes as ``\u0000``) is about 9,800."""

Authorization = Annotated[
    str,
    StringConstraints(
        min_length=5,
        max_length=MAX_AUTHORIZATION,
        pattern=r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$",
    ),
]
"""A supervisor's signed decision: a JWT (RFC 7519) in JWS compact serialization (RFC 7515),
``EdDSA`` over Ed25519 (RFC 8037): three base64url parts separated by dots."""


WIRE_REQUIRED = ("type", "event_id", "occurred_at")
"""Envelope fields that default in Python but must be present in JSON on Kafka."""


class ContractModel(BaseModel):
    """Base of every contract model: immutable, and unknown fields are an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Message(ContractModel):
    """Base of every Kafka message: the discriminator and the envelope (without the table)."""

    type: str = Field(description="The message type: the class name, e.g. `PlaceBet`.")
    event_id: Uuid = Field(
        default_factory=uuid4,
        description=(
            "Unique id of this message (for a command: the command id, echoed as "
            "`causation_id` and `CommandRejected.command_id` by whoever handles it)."
        ),
    )
    schema_version: SchemaVersion = Field(
        default=1, description="Version of this message's schema; 1 for now."
    )
    occurred_at: UtcDatetime = Field(
        default_factory=utc_now,
        description="When the event happened (for a command: when it was issued), UTC ISO 8601.",
    )
    causation_id: Uuid | None = Field(
        default=None, description="`event_id` of the message that caused this one, if any."
    )
    correlation_id: Uuid | None = Field(
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
    """Table minimum and maximum stake of one bet type, in minor units (1 to 10^14)."""

    minimum: Stake = Field(description="Smallest stake accepted, in minor units.")
    maximum: Stake = Field(description="Largest stake accepted, in minor units.")


class PositionedCard(ContractModel):
    """A card with its position in the shuffled order of the shoe."""

    position: ShoePosition = Field(
        description="0-based index of the card in the shuffled order (see `ShoeClosed`)."
    )
    card: CardCode = Field(description="The card, e.g. `9H`.")
