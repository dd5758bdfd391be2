"""The tableau: who draws a third card, and a coup resolved from cards in shoe order.

Cards leave the shoe Player, Banker, Player, Banker. A natural (8 or 9 on
either side's first two cards) ends the coup. Otherwise the Player draws on
0-5 and stands on 6-7; then the Banker draws on 0-5 if the Player stood, or,
if the Player drew, by the Banker's total and the value ``v`` of the Player's
third card: 0-2 always; 3 unless v = 8; 4 if v in 2-7; 5 if v in 4-7;
6 if v in 6-7; 7 never. Higher total wins; equal totals are a tie.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, TypeVar

from services.shared.rules.cards import RANK_VALUES, Card

T = TypeVar("T")


class Side(StrEnum):
    """The two hands of a coup."""

    PLAYER = "PLAYER"
    BANKER = "BANKER"


class Outcome(StrEnum):
    """Who won a coup."""

    PLAYER = "PLAYER"
    BANKER = "BANKER"
    TIE = "TIE"


class NotEnoughCards(ValueError):
    """The cards given end before the coup does.

    ``needed`` is how many more cards the coup needs; when ``exact`` is False
    that is a minimum (how many more depends on the cards still to come).
    """

    def __init__(self, needed: int, exact: bool = True, have: int | None = None) -> None:
        self.needed = needed
        self.exact = exact
        self.have = have
        plural = "card" if needed == 1 else "cards"
        amount = f"{needed}" if exact else f"at least {needed}"
        got = "" if have is None else f" (got {have})"
        super().__init__(f"the coup needs {amount} more {plural}{got}")


# Banker's draw table when the Player drew, indexed [banker_total][player_third_value].
_BANKER_DRAWS: Final[tuple[frozenset[int], ...]] = (
    frozenset(range(10)),  # 0
    frozenset(range(10)),  # 1
    frozenset(range(10)),  # 2
    frozenset(range(10)) - {8},  # 3
    frozenset(range(2, 8)),  # 4
    frozenset(range(4, 8)),  # 5
    frozenset({6, 7}),  # 6
    frozenset(),  # 7
)
BANKER_DRAW_TABLE: Final[tuple[tuple[bool, ...], ...]] = tuple(
    tuple(v in _BANKER_DRAWS[total] for v in range(10)) for total in range(8)
)
"""``BANKER_DRAW_TABLE[banker_total][player_third_value]`` for banker totals 0-7."""


def is_natural(total: int) -> bool:
    """A two-card total of 8 or 9."""
    return total >= 8


def player_draws(player_total: int) -> bool:
    """Whether the Player, with this two-card total and no natural on the table, draws."""
    _check_total(player_total)
    return player_total <= 5


def banker_draws(banker_total: int, player_third: int | None) -> bool:
    """Whether the Banker, with this two-card total and no natural on the table, draws.

    ``player_third`` is the VALUE (0-9) of the Player's third card, or None if
    the Player stood.
    """
    _check_total(banker_total)
    if player_third is None:
        return banker_total <= 5
    if not 0 <= player_third <= 9:
        raise ValueError(f"a card value is 0 to 9, not {player_third}")
    if banker_total >= 8:
        return False
    return BANKER_DRAW_TABLE[banker_total][player_third]


def _check_total(total: int) -> None:
    if not 0 <= total <= 9:
        raise ValueError(f"a hand total is 0 to 9, not {total}")


def _total(cards: Sequence[Card]) -> int:
    return sum(RANK_VALUES[card.rank] for card in cards) % 10


def dealing_order(player: Sequence[T], banker: Sequence[T]) -> list[T]:
    """A coup's cards (or codes) back in the order they left the shoe from its two hands:
    P, B, P, B, then the Player's third card, then the Banker's."""
    return [*player[:1], *banker[:1], *player[1:2], *banker[1:2], *player[2:], *banker[2:]]


def next_side(player: Sequence[Card], banker: Sequence[Card]) -> Side | None:
    """Who gets the next card of a coup dealt card by card; None when the coup is complete.

    The first four cards go Player, Banker, Player, Banker; then the third
    cards by the tableau. Raises ValueError for hands no coup can produce.
    """
    p, b = len(player), len(banker)
    if p < 2 or b < 2:
        if p == b and p < 2:
            return Side.PLAYER
        if p == b + 1:
            return Side.BANKER
        raise ValueError(f"hands of {p} and {b} cards cannot occur in a coup")
    if p > 3 or b > 3:
        raise ValueError(f"hands of {p} and {b} cards cannot occur in a coup")
    player_total, banker_total = _total(player[:2]), _total(banker[:2])
    natural = player_total >= 8 or banker_total >= 8
    player_drew = not natural and player_total <= 5
    if p != 2 + player_drew:
        if p == 2 and b == 2:
            return Side.PLAYER
        raise ValueError(f"hands of {p} and {b} cards cannot occur in a coup")
    third = RANK_VALUES[player[2].rank] if player_drew else None
    banker_drew = not natural and banker_draws(banker_total, third)
    if b == 2 and banker_drew:
        return Side.BANKER
    if b != 2 + banker_drew:
        raise ValueError(f"hands of {p} and {b} cards cannot occur in a coup")
    return None


@dataclass(frozen=True)
class CoupResult:
    """A resolved coup: each side's cards and total, the outcome and the side bets' facts.

    ``sequence`` lists the cards in dealing order with the side each went to;
    ``cards_used`` is how many cards of the shoe the coup took (4 to 6).
    """

    player: tuple[Card, ...]
    banker: tuple[Card, ...]
    player_total: int
    banker_total: int
    outcome: Outcome
    natural: bool
    player_pair: bool
    banker_pair: bool
    cards_used: int
    sequence: tuple[tuple[Side, Card], ...]


def resolve_coup(cards: Sequence[Card]) -> CoupResult:
    """Resolve one coup from ``cards`` in the order they leave the shoe; extra cards are unused.

    Raises :class:`NotEnoughCards` (with ``needed``) if the cards end first.
    """
    have = len(cards)
    if have < 4:
        raise NotEnoughCards(4 - have, exact=False, have=have)
    p1, b1, p2, b2 = cards[0], cards[1], cards[2], cards[3]
    values = RANK_VALUES
    player_total = (values[p1.rank] + values[p2.rank]) % 10
    banker_total = (values[b1.rank] + values[b2.rank]) % 10
    player: tuple[Card, ...] = (p1, p2)
    banker: tuple[Card, ...] = (b1, b2)
    sequence: list[tuple[Side, Card]] = [
        (Side.PLAYER, p1),
        (Side.BANKER, b1),
        (Side.PLAYER, p2),
        (Side.BANKER, b2),
    ]
    natural = player_total >= 8 or banker_total >= 8
    used = 4
    if not natural:
        third: int | None = None
        if player_total <= 5:
            if have < 5:
                exact = banker_total <= 2 or banker_total == 7
                raise NotEnoughCards(2 if banker_total <= 2 else 1, exact=exact, have=have)
            card = cards[4]
            third = values[card.rank]
            player += (card,)
            sequence.append((Side.PLAYER, card))
            player_total = (player_total + third) % 10
            used = 5
        if banker_draws(banker_total, third):
            if have <= used:
                raise NotEnoughCards(1, exact=True, have=have)
            card = cards[used]
            banker += (card,)
            sequence.append((Side.BANKER, card))
            banker_total = (banker_total + values[card.rank]) % 10
            used += 1
    if player_total > banker_total:
        outcome = Outcome.PLAYER
    elif banker_total > player_total:
        outcome = Outcome.BANKER
    else:
        outcome = Outcome.TIE
    return CoupResult(
        player=player,
        banker=banker,
        player_total=player_total,
        banker_total=banker_total,
        outcome=outcome,
        natural=natural,
        player_pair=p1.rank == p2.rank,
        banker_pair=b1.rank == b2.rank,
        cards_used=used,
        sequence=tuple(sequence),
    )
