"""Playing cards: ranks, suits, baccarat values and hand totals.

A card is identified by a two-character code, rank then suit: ``"9H"``, ``"TD"``
(T is the ten), ``"KS"``. Ranks are ``A 2-9 T J Q K``; suits ``C D H S``. Suits
never matter for totals: an ace counts 1, two to nine their face value, and
ten, jack, queen and king count 0. A hand's total is the sum modulo 10.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

RANKS: Final = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "T", "J", "Q", "K")
SUITS: Final = ("C", "D", "H", "S")

RANK_VALUES: Final[dict[str, int]] = {
    rank: (index + 1 if index < 9 else 0) for index, rank in enumerate(RANKS)
}
"""Baccarat value of each rank: A=1, 2..9 face value, T/J/Q/K=0."""


class CardParseError(ValueError):
    """A token that is not a card; ``token`` holds the text as it was given."""

    def __init__(self, token: str, reason: str = "") -> None:
        self.token = token
        detail = f": {reason}" if reason else ""
        super().__init__(
            f"{token!r} is not a card{detail} "
            "(expected rank A 2-9 T/10 J Q K then suit C D H S, for example 9H, TD, 10S)"
        )


@dataclass(frozen=True, slots=True, order=True)
class Card:
    """One playing card. Build from a code with :meth:`Card.parse`."""

    rank: str
    suit: str

    def __post_init__(self) -> None:
        if self.rank not in RANK_VALUES:
            raise CardParseError(f"{self.rank}{self.suit}", f"unknown rank {self.rank!r}")
        if self.suit not in SUITS:
            raise CardParseError(f"{self.rank}{self.suit}", f"unknown suit {self.suit!r}")

    @property
    def value(self) -> int:
        """Baccarat value: A=1, 2-9 face value, T/J/Q/K=0."""
        return RANK_VALUES[self.rank]

    @property
    def code(self) -> str:
        """Two-character code, rank then suit: ``"9H"``, ``"TD"``."""
        return self.rank + self.suit

    def __str__(self) -> str:
        return self.rank + self.suit

    @classmethod
    def parse(cls, token: str) -> Card:
        """Read ``"9H"``, ``"TD"``, ``"10D"`` or lower case ``"th"``.

        Raises :class:`CardParseError` naming the token when it is not a card.
        """
        if not isinstance(token, str):
            raise CardParseError(repr(token), "not text")
        text = token.strip().upper()
        if len(text) < 2:
            raise CardParseError(token, "too short")
        rank, suit = text[:-1], text[-1]
        if rank == "10":
            rank = "T"
        if rank not in RANK_VALUES:
            raise CardParseError(token, f"unknown rank {rank!r}")
        if suit not in SUITS:
            raise CardParseError(token, f"unknown suit {suit!r}")
        return _CARDS[rank + suit]


_CARDS: Final[dict[str, Card]] = {rank + suit: Card(rank, suit) for suit in SUITS for rank in RANKS}
ALL_CARDS: Final[tuple[Card, ...]] = tuple(_CARDS.values())
"""The 52 cards of one deck, suit by suit (clubs, diamonds, hearts, spades), A to K."""


def parse_cards(tokens: Iterable[str]) -> list[Card]:
    """Parse every token with :meth:`Card.parse`; the first bad token raises."""
    return [Card.parse(token) for token in tokens]


def hand_total(cards: Iterable[Card]) -> int:
    """Total of a hand: the sum of its card values modulo 10."""
    return sum(RANK_VALUES[card.rank] for card in cards) % 10
