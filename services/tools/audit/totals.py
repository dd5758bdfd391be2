"""Money totals per coup, shoe, table and day: staked, paid, house result, hold vs edge.

Amounts are integer minor units. ``paid`` is what went back to bettors
(stake + winnings on a win, the stake on a push). A voided coup's bets are
``refunded`` and count neither as staked nor paid. The realised hold is
house result / staked; the theoretical edge is the stake-weighted house edge of
the bets placed, from the exact odds of a full shoe (``services.shared.rules.odds``)
under the table's paytable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

from services.shared.rules.odds import full_shoe_odds
from services.shared.rules.paytable import BetType, get_paytable


@lru_cache(maxsize=32)
def house_edge(decks: int, paytable: str) -> dict[str, Fraction]:
    odds = full_shoe_odds(decks, get_paytable(paytable))
    return {bet.value: edge for bet, edge in odds.house_edge.items()}


def percent(value: Fraction | None, digits: int = 3) -> str | None:
    """``Fraction(1, 40)`` -> ``"2.500%"`` (None stays None)."""
    if value is None:
        return None
    scaled = round(value * 100 * 10**digits)
    sign = "-" if scaled < 0 else ""
    whole, part = divmod(abs(scaled), 10**digits)
    return f"{sign}{whole}.{part:0{digits}d}%"


@dataclass
class Tally:
    coups: int = 0
    voided: int = 0
    bets: int = 0
    staked: int = 0
    paid: int = 0
    refunded: int = 0
    expected: Fraction = field(default_factory=Fraction)
    """Expected house result of the bets placed (stake x house edge)."""

    @property
    def house_result(self) -> int:
        return self.staked - self.paid

    @property
    def hold(self) -> Fraction | None:
        return Fraction(self.house_result, self.staked) if self.staked else None

    @property
    def edge(self) -> Fraction | None:
        return self.expected / self.staked if self.staked else None

    def add(self, other: Tally) -> None:
        self.coups += other.coups
        self.voided += other.voided
        self.bets += other.bets
        self.staked += other.staked
        self.paid += other.paid
        self.refunded += other.refunded
        self.expected += other.expected

    def take(self, other: Tally) -> None:
        """Take another tally back out (a coup checked again)."""
        self.coups -= other.coups
        self.voided -= other.voided
        self.bets -= other.bets
        self.staked -= other.staked
        self.paid -= other.paid
        self.refunded -= other.refunded
        self.expected -= other.expected

    def to_json(self) -> dict[str, Any]:
        return {
            "coups": self.coups,
            "voided": self.voided,
            "bets": self.bets,
            "staked": self.staked,
            "paid": self.paid,
            "house_result": self.house_result,
            "refunded": self.refunded,
            "hold": percent(self.hold),
            "theoretical_edge": percent(self.edge),
        }


@dataclass
class Totals:
    """Tallies keyed per level; keys are strings ("table/coup", "table/shoe", ...)."""

    coups: dict[str, Tally] = field(default_factory=dict)
    shoes: dict[str, Tally] = field(default_factory=dict)
    tables: dict[str, Tally] = field(default_factory=dict)
    days: dict[str, Tally] = field(default_factory=dict)
    overall: Tally = field(default_factory=Tally)
    detail: bool = True
    """Keep a tally per coup and per shoe (False: per day and table only, for a history of
    any length: those two grow with it)."""
    last: Tally | None = field(default=None, repr=False, compare=False)
    """The tally :meth:`add_coup` added last."""

    def add_coup(
        self,
        *,
        table_id: str,
        shoe_id: str,
        coup_id: str,
        day: str,
        bets: int,
        staked_by_type: dict[str, int],
        paid: int,
        voided: bool,
        paytable: str,
        decks: int,
    ) -> None:
        tally = Tally(coups=1, voided=int(voided), bets=bets)
        by_type = staked_by_type
        stakes = sum(by_type.values())
        if voided:
            tally.refunded = stakes
        else:
            tally.staked = stakes
            tally.paid = paid
            edges = house_edge(decks, paytable)
            tally.expected = sum(
                (
                    amount * edges[bet_type]
                    for bet_type, amount in by_type.items()
                    if bet_type in edges
                ),
                Fraction(0),
            )
        self.last = tally
        if self.detail:
            self.coups[f"{table_id}/{coup_id}"] = tally
            self.shoes.setdefault(f"{table_id}/{shoe_id}", Tally()).add(tally)
        for level, key in ((self.tables, table_id), (self.days, day)):
            level.setdefault(key, Tally()).add(tally)
        self.overall.add(tally)

    def remove_coup(
        self, table_id: str, shoe_id: str, coup_id: str, day: str, tally: Tally | None = None
    ) -> None:
        """Take a coup's tally (``tally``, or the one kept per coup) back out of every level
        (it is checked again)."""
        tally = self.coups.pop(f"{table_id}/{coup_id}", None) or tally
        if tally is None:
            return
        for level, key in (
            (self.shoes, f"{table_id}/{shoe_id}"),
            (self.tables, table_id),
            (self.days, day),
        ):
            left = level.get(key)
            if left is not None:
                left.take(tally)
                if left.coups <= 0:
                    del level[key]
        self.overall.take(tally)

    def to_json(self) -> dict[str, Any]:
        return {
            "overall": self.overall.to_json(),
            "days": {k: v.to_json() for k, v in sorted(self.days.items())},
            "tables": {k: v.to_json() for k, v in sorted(self.tables.items())},
            "shoes": {k: v.to_json() for k, v in self.shoes.items()},
            "coups": {k: v.to_json() for k, v in self.coups.items()},
        }


BET_TYPES = tuple(bet.value for bet in BetType)
