"""Simulated bettors: a crowd that bets on every coup, some of them badly.

Pure planning, no I/O: :class:`Crowd` turns "a coup is open" into a list of
:class:`PlannedBet` (what to send, and which answer to expect). ``wildness``
(0..1) is the chance that a bettor also tries one bad bet in a coup, each of a
kind from :class:`BetKind`: out of limits, Player and Banker from one bettor,
wrong currency, bad amounts, unknown bet types, bet types the table does not offer,
late bets (sent after betting closed) and repeated bet ids (same id again: the
original answer is expected). Valid bets are a main bet and, now and then, one of the
side bets the table's paytable offers.

Randomness is :class:`random.Random` with an optional seed: this is a
simulation, not a game of chance, so reproducibility beats unpredictability.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from enum import StrEnum
from typing import Final

MAIN_BET_TYPES: Final = ("player", "banker", "tie")
HALF: Final = Decimal("0.5")
UNKNOWN_BET_TYPES: Final = ("dragon", "egalite", "super6", "big_small")


class BetKind(StrEnum):
    """What a planned bet is meant to test, and so which answer to expect."""

    VALID = "valid"
    BELOW_MINIMUM = "below_minimum"
    ABOVE_MAXIMUM = "above_maximum"
    OPPOSING = "opposing"
    WRONG_CURRENCY = "wrong_currency"
    BAD_AMOUNT = "bad_amount"
    UNKNOWN_BET_TYPE = "unknown_bet_type"
    NOT_OFFERED = "not_offered"
    LATE = "late"
    REPEAT = "repeat"


EXPECTED_REASON: Final[Mapping[BetKind, str | None]] = {
    BetKind.VALID: None,
    BetKind.BELOW_MINIMUM: "BELOW_MINIMUM",
    BetKind.ABOVE_MAXIMUM: "ABOVE_MAXIMUM",
    BetKind.OPPOSING: "OPPOSING_BETS",
    BetKind.WRONG_CURRENCY: "WRONG_CURRENCY",
    BetKind.BAD_AMOUNT: "INVALID_AMOUNT",
    BetKind.UNKNOWN_BET_TYPE: "UNKNOWN_BET_TYPE",
    BetKind.NOT_OFFERED: "BET_TYPE_NOT_OFFERED",
    BetKind.LATE: "BETTING_CLOSED",
}
"""Rejection code expected per kind (None: accepted). A REPEAT expects the original's answer."""

WILD_KINDS: Final = (
    BetKind.BELOW_MINIMUM,
    BetKind.ABOVE_MAXIMUM,
    BetKind.OPPOSING,
    BetKind.WRONG_CURRENCY,
    BetKind.BAD_AMOUNT,
    BetKind.UNKNOWN_BET_TYPE,
    BetKind.NOT_OFFERED,
    BetKind.LATE,
    BetKind.REPEAT,
)


@dataclass(frozen=True, slots=True)
class Limit:
    minimum: int
    maximum: int


@dataclass(frozen=True, slots=True)
class TableTerms:
    """What bettors know of a table: its id, currency and limits per bet type (minor units):
    the bet types it offers."""

    table_id: str
    currency: str
    limits: Mapping[str, Limit]

    @property
    def side_bets(self) -> list[str]:
        return [bet_type for bet_type in self.limits if bet_type not in MAIN_BET_TYPES]


DEMO_LIMITS: Final[Mapping[str, Limit]] = {
    "player": Limit(100, 500_000),
    "banker": Limit(100, 500_000),
    "tie": Limit(100, 50_000),
    "player_pair": Limit(100, 25_000),
    "banker_pair": Limit(100, 25_000),
    "either_pair": Limit(100, 25_000),
    "perfect_pair": Limit(100, 10_000),
    "dragon_bonus_player": Limit(100, 25_000),
    "dragon_bonus_banker": Limit(100, 25_000),
    "big": Limit(100, 100_000),
    "small": Limit(100, 100_000),
    "super_6": Limit(100, 10_000),
    "dragon_7": Limit(100, 10_000),
    "panda_8": Limit(100, 10_000),
}
"""Demo limits of every bet type in minor units (1.00 to 5,000.00 on the main bets); a table
offers those of its paytable (:func:`demo_limits`)."""


def demo_limits(offered: Iterable[str]) -> dict[str, Limit]:
    """The demo limits of the bet types ``offered`` (a paytable's)."""
    return {bet_type: DEMO_LIMITS[bet_type] for bet_type in offered}


@dataclass(frozen=True, slots=True)
class PlannedBet:
    """One PlaceBet to send, with the answer it should get.

    ``expected`` is the rejection code expected, or None when it should be accepted; ``late``
    bets are sent after betting closed; a REPEAT reuses an earlier bet's id and expectation.
    """

    bet_id: str
    table_id: str
    coup_id: str
    bettor_id: str
    bet_type: str
    amount: Decimal
    currency: str
    kind: BetKind
    expected: str | None
    late: bool = False


@dataclass(frozen=True, slots=True)
class CoupPlan:
    """The bets of one coup: ``open_bets`` in sending order while betting is open, then
    ``late_bets`` once it closed."""

    coup_id: str
    open_bets: tuple[PlannedBet, ...]
    late_bets: tuple[PlannedBet, ...]

    @property
    def all_bets(self) -> tuple[PlannedBet, ...]:
        return self.open_bets + self.late_bets


@dataclass
class Crowd:
    """``bettors`` simulated bettors at one table; ``wildness`` in 0..1.

    ``participation`` is the chance a bettor bets at all in a coup; ``side_bet_rate`` the chance
    of adding a side bet (one of the table's). ``unit`` rounds valid stakes (minor units) so they
    look like chips.
    """

    terms: TableTerms
    bettors: int = 20
    wildness: float = 0.1
    seed: int | None = None
    participation: float = 0.8
    side_bet_rate: float = 0.4
    unit: int = 100
    _rng: random.Random = field(init=False, repr=False)
    _run: str = field(init=False, repr=False)
    _counter: int = field(init=False, default=0, repr=False)

    def __post_init__(self) -> None:
        if self.bettors < 0:
            raise ValueError(f"bettors must be >= 0, got {self.bettors}")
        if not 0.0 <= self.wildness <= 1.0:
            raise ValueError(f"wildness must be between 0 and 1, got {self.wildness}")
        self._rng = random.Random(self.seed)
        self._run = uuid.UUID(int=self._rng.getrandbits(128)).hex[:8]

    def bettor_ids(self) -> list[str]:
        return [f"bettor-{index:04d}" for index in range(1, self.bettors + 1)]

    def plan_coup(self, coup_id: str) -> CoupPlan:
        """The bets of every bettor on ``coup_id``; bad ones mixed in per ``wildness``."""
        open_bets: list[PlannedBet] = []
        late_bets: list[PlannedBet] = []
        for bettor in self.bettor_ids():
            if self._rng.random() >= self.participation:
                continue
            own = self._valid_bets(coup_id, bettor)
            open_bets.extend(own)
            if self.wildness > 0 and self._rng.random() < self.wildness:
                kind = self._rng.choice(WILD_KINDS)
                bad = self.wild_bet(kind, coup_id, bettor, own)
                if bad is not None:
                    (late_bets if bad.late else open_bets).append(bad)
        return CoupPlan(coup_id, tuple(open_bets), tuple(late_bets))

    def wild_bet(
        self, kind: BetKind, coup_id: str, bettor: str, earlier: Sequence[PlannedBet] = ()
    ) -> PlannedBet | None:
        """One bad bet of ``kind`` from ``bettor`` (None if ``kind`` needs an earlier bet and
        there is none). Everything but the one fault is valid, so one reason applies."""
        terms = self.terms
        if kind is BetKind.REPEAT:
            if not earlier:
                return None
            original = self._rng.choice(list(earlier))
            return replace(original, kind=BetKind.REPEAT)
        if kind is BetKind.OPPOSING:
            sides = [bet for bet in earlier if bet.bet_type in ("player", "banker")]
            if not sides:
                return None
            other = "banker" if sides[0].bet_type == "player" else "player"
            return self._bet(coup_id, bettor, other, self._stake(other), kind)
        # A main bet that cannot oppose the bettor's own Player/Banker bet: one fault only.
        taken = {bet.bet_type for bet in earlier}
        bet_type = self._rng.choice(
            [t for t in MAIN_BET_TYPES if not {t, *taken} >= {"player", "banker"}]
        )
        limit = terms.limits[bet_type]
        if kind is BetKind.BELOW_MINIMUM:
            if limit.minimum <= 1:
                return None
            return self._bet(
                coup_id, bettor, bet_type, self._rng.randint(1, limit.minimum - 1), kind
            )
        if kind is BetKind.ABOVE_MAXIMUM:
            amount = limit.maximum + self._rng.choice((1, self.unit, limit.maximum))
            return self._bet(coup_id, bettor, bet_type, amount, kind)
        if kind is BetKind.WRONG_CURRENCY:
            currency = "USD" if terms.currency != "USD" else "EUR"
            return self._bet(coup_id, bettor, bet_type, self._stake(bet_type), kind, currency)
        if kind is BetKind.BAD_AMOUNT:
            bad = (Decimal(0), Decimal(-self._stake(bet_type)), Decimal(limit.minimum) + HALF)
            return self._bet(coup_id, bettor, bet_type, self._rng.choice(bad), kind)
        if kind is BetKind.UNKNOWN_BET_TYPE:
            name = self._rng.choice(UNKNOWN_BET_TYPES)
            return self._bet(coup_id, bettor, name, self._stake("player"), kind)
        if kind is BetKind.NOT_OFFERED:
            absent = [bet_type for bet_type in DEMO_LIMITS if bet_type not in terms.limits]
            if not absent:
                return None
            name = self._rng.choice(absent)
            return self._bet(coup_id, bettor, name, DEMO_LIMITS[name].minimum, kind)
        if kind is BetKind.LATE:
            # Not Player/Banker, so it cannot also be an opposing bet.
            return replace(self._bet(coup_id, bettor, "tie", self._stake("tie"), kind), late=True)
        raise ValueError(f"not a wild kind: {kind}")  # VALID

    def _valid_bets(self, coup_id: str, bettor: str) -> list[PlannedBet]:
        main = self._rng.choices(MAIN_BET_TYPES, weights=(45, 45, 10))[0]
        bets = [self._bet(coup_id, bettor, main, self._stake(main), BetKind.VALID)]
        sides = self.terms.side_bets
        if sides and self._rng.random() < self.side_bet_rate:
            side = self._rng.choice(sides)
            bets.append(self._bet(coup_id, bettor, side, self._stake(side), BetKind.VALID))
        return bets

    def _stake(self, bet_type: str) -> int:
        """A valid stake for ``bet_type``: mostly small, in whole units, within the limits."""
        limit = self.terms.limits[bet_type]
        low = max(1, -(-limit.minimum // self.unit))
        high = max(low, limit.maximum // self.unit)
        units = min(high, low * self._rng.choice((1, 1, 2, 5, 10, 25)))
        amount = units * self.unit
        return min(max(amount, limit.minimum), limit.maximum)

    def _bet(
        self,
        coup_id: str,
        bettor: str,
        bet_type: str,
        amount: int | Decimal,
        kind: BetKind,
        currency: str | None = None,
    ) -> PlannedBet:
        self._counter += 1
        return PlannedBet(
            bet_id=f"{self._run}-{self._counter}",
            table_id=self.terms.table_id,
            coup_id=coup_id,
            bettor_id=bettor,
            bet_type=bet_type,
            amount=Decimal(amount),
            currency=currency or self.terms.currency,
            kind=kind,
            expected=EXPECTED_REASON[kind],
        )
