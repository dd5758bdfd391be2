"""Pure checks of a bet before it is accepted, each failure with a reason code and a message.

The reason codes are shared with the ``BetRejected``/``CommandRejected``
messages. ``validate_bet`` checks what a bet says on its own and against the
table: a known bet type (``UNKNOWN_BET_TYPE``), offered at the table
(``BET_TYPE_NOT_OFFERED``: the table's limits name the bet types it offers), a
positive whole amount of minor units, the table's currency, the table's minimum
and maximum for that bet type, and no Player and Banker from one bettor in one
coup (side bets combine freely).
``validate_stake`` makes the same checks of an amount parsed already (by
:func:`parse_amount`, once, where the bet enters a service). The remaining
codes (no such table or coup, betting or table closed, the coup's book full) are for the
services, which know the table's state.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import StrEnum

from services.shared.rules.paytable import BetType

MAX_AMOUNT_DIGITS = 30
"""Amounts with more digits than this are rejected before any conversion."""


class RejectionReason(StrEnum):
    """Why a bet or command was rejected."""

    NO_SUCH_TABLE = "NO_SUCH_TABLE"
    NO_SUCH_COUP = "NO_SUCH_COUP"
    BETTING_CLOSED = "BETTING_CLOSED"
    BELOW_MINIMUM = "BELOW_MINIMUM"
    ABOVE_MAXIMUM = "ABOVE_MAXIMUM"
    OPPOSING_BETS = "OPPOSING_BETS"
    WRONG_CURRENCY = "WRONG_CURRENCY"
    INVALID_AMOUNT = "INVALID_AMOUNT"
    UNKNOWN_BET_TYPE = "UNKNOWN_BET_TYPE"
    BET_TYPE_NOT_OFFERED = "BET_TYPE_NOT_OFFERED"
    TABLE_CLOSED = "TABLE_CLOSED"
    BOOK_FULL = "BOOK_FULL"


@dataclass(frozen=True)
class Rejection:
    """A rejected bet: the reason code and a message a person can act on."""

    reason: RejectionReason
    message: str


@dataclass(frozen=True)
class BetLimit:
    """Table minimum and maximum of one bet type, in minor units, both inclusive."""

    minimum: int
    maximum: int

    def __post_init__(self) -> None:
        if not 1 <= self.minimum <= self.maximum:
            raise ValueError(
                f"a bet limit needs 1 <= minimum <= maximum, not {self.minimum}..{self.maximum}"
            )


_OPPOSITE = {BetType.PLAYER: BetType.BANKER, BetType.BANKER: BetType.PLAYER}


_BET_TYPES = {kind.value: kind for kind in BetType}
"""Each BetType by its name: a dict lookup, where ``BetType(name)`` costs 1 us (4 us when
it raises), for every bet."""


def parse_bet_type(bet_type: object) -> BetType | None:
    """The BetType named by ``bet_type`` ("player", "banker", ...), or None."""
    if isinstance(bet_type, BetType):
        return bet_type
    return _BET_TYPES.get(bet_type) if isinstance(bet_type, str) else None


def parse_amount(amount: object) -> int | None:
    """A positive whole number of minor units from ``amount``, or None.

    Accepts ``int`` and ``Decimal`` or ASCII ``str`` with no fractional part
    (``Decimal("100.00")`` is 100). Rejects bool, float, fractions, zero,
    negatives, NaN, infinities and numbers of more than MAX_AMOUNT_DIGITS digits.
    """
    if isinstance(amount, bool):
        return None
    if isinstance(amount, int):
        return amount if amount > 0 else None
    if isinstance(amount, str):
        if not amount.isascii():
            return None  # Decimal reads other scripts' digits too (Arabic-Indic...): ASCII only
        try:
            amount = Decimal(amount.strip())
        except InvalidOperation:
            return None
    if not isinstance(amount, Decimal) or not amount.is_finite():
        return None
    if amount.adjusted() >= MAX_AMOUNT_DIGITS:
        return None  # far beyond any limit; converting "1e999999999" would take ages
    if amount != amount.to_integral_value() or amount <= 0:
        return None
    return int(amount)


def _shorten(value: object, limit: int = 40) -> str:
    """``value`` as received, for a message: quoted with its escapes when it holds a character
    that is not printable (a NUL would not fit a PostgreSQL text column)."""
    text = str(value)
    text = text if text.isprintable() else repr(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def validate_bet(
    bet_type: str,
    amount: object,
    limits: Mapping[BetType, BetLimit],
    currency: str,
    table_currency: str,
    bettor_bet_types: Collection[BetType],
) -> Rejection | None:
    """None if the bet may be accepted, else the first :class:`Rejection` that applies.

    ``bettor_bet_types`` are the types of the bets this bettor already has
    accepted in this coup. Checks run in the order: bet type, amount,
    currency, minimum/maximum, opposing Player/Banker bets.
    """
    return validate_stake(
        bet_type, parse_amount(amount), amount, limits, currency, table_currency, bettor_bet_types
    )


def validate_stake(
    bet_type: str,
    stake: int | None,
    amount: object,
    limits: Mapping[BetType, BetLimit],
    currency: str,
    table_currency: str,
    bettor_bet_types: Collection[BetType],
) -> Rejection | None:
    """:func:`validate_bet` of an amount parsed already: ``stake`` is
    ``parse_amount(amount)`` (None: not a valid amount); ``amount`` as received is only
    quoted in the message that refuses it."""
    kind = parse_bet_type(bet_type)
    if kind is None:
        known = ", ".join(bet.value for bet in BetType)
        return Rejection(
            RejectionReason.UNKNOWN_BET_TYPE, f"unknown bet type {bet_type!r} (known: {known})"
        )
    limit = limits.get(kind)
    if limit is None:
        offered = ", ".join(bet.value for bet in BetType if bet in limits) or "none"
        return Rejection(
            RejectionReason.BET_TYPE_NOT_OFFERED,
            f"bet type {kind.value!r} is not offered at this table (offered: {offered})",
        )
    if stake is None:
        return Rejection(
            RejectionReason.INVALID_AMOUNT,
            f"amount {_shorten(amount)} is not a positive whole number of minor units",
        )
    if currency != table_currency:
        return Rejection(
            RejectionReason.WRONG_CURRENCY,
            f"currency {currency!r} is not the table's currency {table_currency!r}",
        )
    if stake < limit.minimum:
        return Rejection(
            RejectionReason.BELOW_MINIMUM,
            f"{kind.value} bet of {stake} is below the table minimum of {limit.minimum}",
        )
    if stake > limit.maximum:
        return Rejection(
            RejectionReason.ABOVE_MAXIMUM,
            f"{kind.value} bet of {stake} is above the table maximum of {limit.maximum}",
        )
    opposite = _OPPOSITE.get(kind)
    if opposite is not None and opposite in bettor_bet_types:
        return Rejection(
            RejectionReason.OPPOSING_BETS,
            f"this bettor already bet {opposite.value} in this coup; "
            f"Player and Banker may not both be bet by one bettor",
        )
    return None
