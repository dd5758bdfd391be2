"""The shoe: composition, secure shuffle, commitment to the order, burn and cut card.

Shuffle
    Fisher-Yates (Durstenfeld) over ``secrets.randbelow``: for ``i`` from the
    last index down to 1, swap position ``i`` with a uniformly chosen position
    ``j`` in ``0..i``. Every order of the cards is equally likely and the
    generator is the operating system's CSPRNG; nothing here seeds a
    predictable generator. Tests may pass their own ``randbelow``.

Commitment scheme (``COMMITMENT_SCHEME = "sha256(salt|order)/v1"``)
    ``encode_order(order)`` is the card codes of the whole shoe (``"9H"``,
    ``"TD"``: rank ``A 2-9 T J Q K`` then suit ``C D H S``, upper case, ten as
    ``T``), from its first card (the one shown for the burn) to its last,
    joined by ``","`` with no spaces, encoded as ASCII. The commitment is the
    lower-case hex SHA-256 digest of::

        salt + b"|" + encode_order(order)

    where ``salt`` is 32 random bytes (``new_salt()``), kept secret until the
    shoe closes. At the shuffle only the commitment is published; at the end
    the order and the salt (hex) are revealed and anyone can recompute it, for
    example ``sha256(bytes.fromhex(salt) + b"|" + ",".join(order).encode())``.

Burn and cut card
    After the shuffle the first card is shown and ``burn_count(shown)`` cards
    are burned (its value, a 0-value card burns 10): ``burn(order)``. The cut
    card sits ``cut_card_from_end`` cards from the end; ``cut_card_index``
    gives the position of the first card behind it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from services.shared.rules.cards import ALL_CARDS, Card

DEFAULT_DECKS: Final = 6
MIN_DECKS: Final = 1
MAX_DECKS: Final = 8
CARDS_PER_DECK: Final = 52
SALT_BYTES: Final = 32
COMMITMENT_SCHEME: Final = "sha256(salt|order)/v1"


def check_decks(decks: int) -> int:
    """Return ``decks`` if it is a whole number from 1 to 8, else raise ValueError."""
    if isinstance(decks, bool) or not isinstance(decks, int) or not MIN_DECKS <= decks <= MAX_DECKS:
        raise ValueError(
            f"decks must be a whole number from {MIN_DECKS} to {MAX_DECKS}, not {decks!r}"
        )
    return decks


def composition(decks: int) -> list[Card]:
    """The unshuffled shoe of ``decks`` decks: deck after deck, each clubs to spades, A to K."""
    check_decks(decks)
    return list(ALL_CARDS) * decks


def shuffle(
    cards: Sequence[Card], randbelow: Callable[[int], int] = secrets.randbelow
) -> list[Card]:
    """A uniformly random permutation of ``cards`` (Fisher-Yates over ``secrets.randbelow``).

    ``randbelow(n)`` must return an integer in ``0..n-1``; the parameter exists
    for tests only, production code uses the default.
    """
    order = list(cards)
    for i in range(len(order) - 1, 0, -1):
        j = randbelow(i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def new_salt() -> bytes:
    """32 fresh random bytes from ``secrets``, the salt of one shoe's commitment."""
    return secrets.token_bytes(SALT_BYTES)


def encode_order(order: Iterable[Card]) -> bytes:
    """Canonical encoding of a shoe order: card codes joined by ``","``, ASCII."""
    return ",".join(card.code for card in order).encode("ascii")


def commitment(order: Iterable[Card], salt: bytes) -> str:
    """Hex SHA-256 of ``salt + b"|" + encode_order(order)`` (scheme in the module docstring)."""
    return hashlib.sha256(salt + b"|" + encode_order(order)).hexdigest()


def verify_commitment(order: Iterable[Card], salt: bytes, commitment: str) -> bool:
    """True when ``commitment`` (hex) is the commitment of this order and salt."""
    given = commitment.strip().lower()
    if not given.isascii():
        return False
    return hmac.compare_digest(_commitment_of(order, salt), given)


_commitment_of = commitment


def burn_count(shown: Card) -> int:
    """How many cards to burn after showing ``shown``: its value, or 10 for a 0-value card."""
    return shown.value or 10


@dataclass(frozen=True)
class Burn:
    """The burn at the start of a shoe.

    ``shown`` is the card at position 0, ``burned`` the cards at positions
    1..n after it, ``next_position`` where the first coup starts (n + 1).
    """

    shown: Card
    burned: tuple[Card, ...]
    next_position: int


def burn(order: Sequence[Card]) -> Burn:
    """Show the first card of ``order`` and burn ``burn_count(shown)`` cards after it."""
    if not order:
        raise ValueError("an empty shoe has no card to show")
    shown = order[0]
    count = burn_count(shown)
    if len(order) < 1 + count:
        raise ValueError(f"the shoe holds {len(order)} cards, too few to burn {count}")
    return Burn(shown=shown, burned=tuple(order[1 : 1 + count]), next_position=1 + count)


def cut_card_index(card_count: int, cut_card_from_end: int) -> int:
    """Index (0-based) of the first card behind the cut card.

    The cut card sits ``cut_card_from_end`` cards from the end of a shoe of
    ``card_count`` cards, so cards at this index and after it are behind it.
    Drawing the card at this index brings the cut card out.
    """
    if card_count < 0:
        raise ValueError(f"card_count must not be negative, not {card_count}")
    if not 0 <= cut_card_from_end <= card_count:
        raise ValueError(
            f"the cut card must sit 0 to {card_count} cards from the end, not {cut_card_from_end}"
        )
    return card_count - cut_card_from_end
