"""Paytables as data: the bet types each offers, what each case of a bet pays, and rounding.

A bet settles on one of its *cases* (:data:`CASES`, which ``settlement.bet_case`` reads off the
cards: a Banker win on a 6, a Dragon Bonus win by 9...) or loses. A paytable gives, for every
bet type it offers, the net win per unit staked of each case as an exact fraction; 0 is a push
(the stake comes back). Where stake x odds is not a whole number of minor units the paytable's
rounding rule applies (default: round down, in the house's favour).

The four paytables: ``standard`` (Banker 19:20, Tie 8:1, the Russian seed), ``tie-9-to-1``
(Tie 9:1, the Arabic seed), ``no-commission`` (Banker 1:1 but 1:2 on a winning 6, with Super 6)
and ``ez-baccarat`` (Banker 1:1 but a winning three-card 7 pushes, with Dragon 7 and Panda 8).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from math import ceil
from types import MappingProxyType
from typing import Final


class BetType(StrEnum):
    """Every bet type; a paytable offers some of them."""

    PLAYER = "player"
    BANKER = "banker"
    TIE = "tie"
    PLAYER_PAIR = "player_pair"
    BANKER_PAIR = "banker_pair"
    EITHER_PAIR = "either_pair"
    PERFECT_PAIR = "perfect_pair"
    DRAGON_BONUS_PLAYER = "dragon_bonus_player"
    DRAGON_BONUS_BANKER = "dragon_bonus_banker"
    BIG = "big"
    SMALL = "small"
    SUPER_6 = "super_6"
    DRAGON_7 = "dragon_7"
    PANDA_8 = "panda_8"


WIN: Final = "win"
MARGINS: Final = (9, 8, 7, 6, 5, 4)
"""The winning margins of a Dragon Bonus without a natural, by case ``by_<margin>``."""

CASES: Final[Mapping[BetType, tuple[str, ...]]] = MappingProxyType(
    {
        BetType.PLAYER: (WIN, "tie"),
        BetType.BANKER: (WIN, "six", "three_card_seven", "tie"),
        BetType.TIE: (WIN,),
        BetType.PLAYER_PAIR: (WIN,),
        BetType.BANKER_PAIR: (WIN,),
        BetType.EITHER_PAIR: (WIN,),
        BetType.PERFECT_PAIR: ("one", "both"),
        **{
            bet: ("natural_win", "natural_tie", *(f"by_{margin}" for margin in MARGINS))
            for bet in (BetType.DRAGON_BONUS_PLAYER, BetType.DRAGON_BONUS_BANKER)
        },
        BetType.BIG: (WIN,),
        BetType.SMALL: (WIN,),
        BetType.SUPER_6: (WIN,),
        BetType.DRAGON_7: (WIN,),
        BetType.PANDA_8: (WIN,),
    }
)
"""The cases on which each bet type does not lose (see ``settlement.bet_case``): ``win`` its
one winning case; Player and Banker ``tie``; Banker ``six`` (it wins with a total of 6) and
``three_card_seven`` (it wins with a three-card 7), else ``win``; Perfect Pair ``one`` or
``both`` hands; Dragon Bonus ``natural_win``, ``natural_tie`` and ``by_9`` ... ``by_4``."""


CASE_NAMES: Final[Mapping[str, str]] = MappingProxyType(
    {
        WIN: "win",
        "tie": "tie",
        "six": "win on a 6",
        "three_card_seven": "win on a three-card 7",
        "one": "one hand",
        "both": "both hands",
        "natural_win": "natural",
        "natural_tie": "natural tie",
        **{f"by_{margin}": f"by {margin}" for margin in MARGINS},
    }
)
"""Each case in words (for the CLI, recall and the dashboard)."""


def ratio(odds: Fraction) -> str:
    """Odds as people say them: ``8 to 1``, ``19 to 20``, ``0.54 to 1``; 0 is ``push``."""
    if not odds:
        return "push"
    if odds.denominator <= 20:
        return f"{odds.numerator} to {odds.denominator}"
    return f"{float(odds):g} to 1"


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


Pays = Mapping[str, Fraction]
"""A bet type's odds per case (net win per unit staked; 0 pushes)."""


@dataclass(frozen=True)
class Paytable:
    """A named paytable: the odds of every case of each bet type it offers, and a rounding."""

    name: str
    pays: Mapping[BetType, Pays]
    rounding: Rounding = Rounding.DOWN
    description: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.pays:
            raise ValueError(f"paytable {self.name!r} offers no bet type")
        frozen = {}
        for bet, pays in self.pays.items():
            bet = BetType(bet)
            if set(pays) != set(CASES[bet]):
                raise ValueError(
                    f"paytable {self.name!r}: {bet} needs odds for exactly its cases "
                    f"{', '.join(CASES[bet])}, not {', '.join(pays) or 'none'}"
                )
            if any(odds < 0 for odds in pays.values()) or not any(pays.values()):
                raise ValueError(f"paytable {self.name!r}: {bet} needs odds >= 0, one above 0")
            frozen[bet] = MappingProxyType({case: Fraction(pays[case]) for case in CASES[bet]})
        object.__setattr__(self, "pays", MappingProxyType(frozen))

    def __hash__(self) -> int:
        cases = tuple((bet, tuple(pays.items())) for bet, pays in self.pays.items())
        return hash((self.name, cases, self.rounding))

    @property
    def offered(self) -> tuple[BetType, ...]:
        """The bet types of this paytable, in :class:`BetType` order."""
        return tuple(bet for bet in BetType if bet in self.pays)

    def win_amount(self, stake: int, odds: Fraction) -> int:
        """Net win, in minor units, of ``stake`` at ``odds`` (rounded by the rule)."""
        return round_amount(stake * odds, self.rounding)

    def describe(self, bet_type: BetType) -> str:
        """What ``bet_type`` pays, in words: ``19 to 20``; ``1 to 1, win on a 6 1 to 2``;
        ``one hand 25 to 1, both hands 250 to 1`` (a tie's push goes without saying)."""
        pays = self.pays[bet_type]
        main = pays.get(WIN)
        parts = [] if main is None else [ratio(main)]
        for case, odds in pays.items():
            if odds != main and case != "tie":
                parts.append(f"{CASE_NAMES[case]} {ratio(odds)}")
        return ", ".join(parts)

    def largest_return(self, bet_type: BetType | None = None) -> Fraction:
        """The most one bet (of ``bet_type``, else of any type) returns per unit staked, stake
        included, under this paytable."""
        chosen = self.pays.values() if bet_type is None else [self.pays[BetType(bet_type)]]
        return 1 + max(odds for pays in chosen for odds in pays.values())


def _side_bets(*extra: BetType) -> dict[BetType, Pays]:
    """The side bets' odds (the same at every table that offers them), these and ``extra``."""
    dragon_bonus = {
        "natural_win": Fraction(1),
        "natural_tie": Fraction(0),
        **{
            f"by_{margin}": Fraction(pays)
            for margin, pays in zip(MARGINS, (30, 10, 6, 4, 2, 1), strict=True)
        },
    }
    every: dict[BetType, Pays] = {
        BetType.PLAYER_PAIR: {WIN: Fraction(11)},
        BetType.BANKER_PAIR: {WIN: Fraction(11)},
        BetType.EITHER_PAIR: {WIN: Fraction(5)},
        BetType.PERFECT_PAIR: {"one": Fraction(25), "both": Fraction(250)},
        BetType.DRAGON_BONUS_PLAYER: dragon_bonus,
        BetType.DRAGON_BONUS_BANKER: dragon_bonus,
        BetType.BIG: {WIN: Fraction(54, 100)},
        BetType.SMALL: {WIN: Fraction(3, 2)},
        BetType.SUPER_6: {WIN: Fraction(12)},
        BetType.DRAGON_7: {WIN: Fraction(40)},
        BetType.PANDA_8: {WIN: Fraction(25)},
    }
    common = (
        BetType.PLAYER_PAIR,
        BetType.BANKER_PAIR,
        BetType.EITHER_PAIR,
        BetType.PERFECT_PAIR,
        BetType.DRAGON_BONUS_PLAYER,
        BetType.DRAGON_BONUS_BANKER,
    )
    return {bet: every[bet] for bet in (*common, *extra)}


def _paytable(
    name: str, banker: Pays, tie: int, side: dict[BetType, Pays], description: str
) -> Paytable:
    return Paytable(
        name=name,
        pays={
            BetType.PLAYER: {WIN: Fraction(1), "tie": Fraction(0)},
            BetType.BANKER: {**banker, "tie": Fraction(0)},
            BetType.TIE: {WIN: Fraction(tie)},
            **side,
        },
        description=description,
    )


_COMMISSION = dict.fromkeys((WIN, "six", "three_card_seven"), Fraction(19, 20))
STANDARD: Final = _paytable(
    "standard",
    _COMMISSION,
    8,
    _side_bets(BetType.BIG, BetType.SMALL),
    "Banker 19 to 20, Tie 8 to 1 (Russian seed; the default)",
)
TIE_9_TO_1: Final = _paytable(
    "tie-9-to-1",
    _COMMISSION,
    9,
    _side_bets(BetType.BIG, BetType.SMALL),
    "Banker 19 to 20, Tie 9 to 1 (Arabic seed)",
)
NO_COMMISSION: Final = _paytable(
    "no-commission",
    {WIN: Fraction(1), "six": Fraction(1, 2), "three_card_seven": Fraction(1)},
    8,
    _side_bets(BetType.BIG, BetType.SMALL, BetType.SUPER_6),
    "Banker 1 to 1 but 1 to 2 when it wins with a 6, Tie 8 to 1; Super 6",
)
EZ_BACCARAT: Final = _paytable(
    "ez-baccarat",
    {WIN: Fraction(1), "six": Fraction(1), "three_card_seven": Fraction(0)},
    8,
    _side_bets(BetType.DRAGON_7, BetType.PANDA_8),
    "Banker 1 to 1 but a winning three-card 7 pushes, Tie 8 to 1; Dragon 7 and Panda 8",
)
DEFAULT_PAYTABLE: Final = STANDARD.name

PAYTABLES: Final[Mapping[str, Paytable]] = MappingProxyType(
    {table.name: table for table in (STANDARD, TIE_9_TO_1, NO_COMMISSION, EZ_BACCARAT)}
)

MAX_RETURN: Final = max(ceil(table.largest_return()) for table in PAYTABLES.values())
"""The most one bet returns per unit staked at any table: 251 (Perfect Pair on both hands)."""


def get_paytable(name: str) -> Paytable:
    """The named paytable; raises :class:`UnknownPaytable` if there is none."""
    try:
        return PAYTABLES[name]
    except KeyError:
        raise UnknownPaytable(name) from None
