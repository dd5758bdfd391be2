"""Paytables as data: what each bet pays and how a fractional win is rounded.

Odds are the net win per unit staked, as exact fractions: Player 1, Banker
19/20 (a 5 % commission), Tie 8 (``standard``, the Russian seed) or 9
(``tie-9-to-1``, the Arabic seed), each pair 11. Where stake x odds is not a
whole number of minor units the paytable's rounding rule applies (default:
round down, in the house's favour).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from types import MappingProxyType
from typing import Final


class BetType(StrEnum):
    """The five bets of the table."""

    PLAYER = "player"
    BANKER = "banker"
    TIE = "tie"
    PLAYER_PAIR = "player_pair"
    BANKER_PAIR = "banker_pair"


class Rounding(StrEnum):
    """How a win that is not a whole minor unit is rounded."""

    DOWN = "down"
    HALF_UP = "half_up"
    UP = "up"


class UnknownPaytable(KeyError, ValueError):
    """No paytable has this name; ``name`` holds it."""

    def __init__(self, name: str) -> None:
        self.name = name
        known = ", ".join(sorted(PAYTABLES))
        self.message = f"unknown paytable {name!r} (known: {known})"
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


def round_amount(amount: Fraction, rounding: Rounding) -> int:
    """Round a non-negative exact amount to a whole minor unit by ``rounding``."""
    if rounding is Rounding.DOWN:
        return amount.numerator // amount.denominator
    if rounding is Rounding.UP:
        return -(-amount.numerator // amount.denominator)
    return (2 * amount.numerator + amount.denominator) // (2 * amount.denominator)


@dataclass(frozen=True)
class Paytable:
    """A named set of odds (net win per unit staked) for every bet type, and a rounding rule."""

    name: str
    odds: Mapping[BetType, Fraction]
    rounding: Rounding = Rounding.DOWN
    description: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        missing = [bet.value for bet in BetType if bet not in self.odds]
        if missing:
            raise ValueError(f"paytable {self.name!r} has no odds for {', '.join(missing)}")
        for bet, odds in self.odds.items():
            if odds <= 0:
                raise ValueError(f"paytable {self.name!r}: odds for {bet} must be positive")
        object.__setattr__(self, "odds", MappingProxyType(dict(self.odds)))

    def __hash__(self) -> int:
        return hash((self.name, tuple(sorted(self.odds.items())), self.rounding))

    def win_amount(self, bet_type: BetType, stake: int) -> int:
        """Net win, in minor units, of a winning ``stake`` on ``bet_type`` (rounded by the rule)."""
        return round_amount(stake * self.odds[bet_type], self.rounding)


def _paytable(name: str, tie: int, description: str) -> Paytable:
    return Paytable(
        name=name,
        odds={
            BetType.PLAYER: Fraction(1),
            BetType.BANKER: Fraction(19, 20),
            BetType.TIE: Fraction(tie),
            BetType.PLAYER_PAIR: Fraction(11),
            BetType.BANKER_PAIR: Fraction(11),
        },
        description=description,
    )


STANDARD: Final = _paytable("standard", 8, "Tie pays 8 to 1 (Russian seed; the default)")
TIE_9_TO_1: Final = _paytable("tie-9-to-1", 9, "Tie pays 9 to 1 (Arabic seed)")
DEFAULT_PAYTABLE: Final = STANDARD.name

PAYTABLES: Final[Mapping[str, Paytable]] = MappingProxyType(
    {table.name: table for table in (STANDARD, TIE_9_TO_1)}
)


def get_paytable(name: str) -> Paytable:
    """The named paytable; raises :class:`UnknownPaytable` if there is none."""
    try:
        return PAYTABLES[name]
    except KeyError:
        raise UnknownPaytable(name) from None
