"""The shoe aggregate: shuffle, burn, draw, cut card and reveal.

A ``Shoe`` is created by its shuffle. The ``Shuffled`` event holds the full
shuffled ``order`` and the secret ``salt``, so a restarted service rebuilds the
shoe and continues dealing; the shoe service's mapper stores them encrypted
(``ShoeShuffledFact.ENCRYPTED``: a backup, a replica or the auditor's role reads
only ciphertext) and decrypts them on replay. What leaves the service is decided
by ``messages.py``: ``ShoeShuffled`` carries only the commitment; the order and
salt are published once, in ``ShoeClosed``, so anyone can verify the commitment
against every card drawn.

Positions are 0-based indexes into the shuffled order. After the shuffle the
first card is shown and ``burn_count(shown)`` cards after it are burned, so
dealing starts at ``1 + burn_count(shown)``. The cut card sits before
``cut_card_index``; it "comes out" when a draw reaches that position (or when
the shoe runs out before it).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate, event

from services.shared.facts.shoe import (
    CardsBurnedFact,
    CardsDrawnFact,
    ShoeRevealedFact,
    ShoeShuffledFact,
)
from services.shared.facts.topics import record, register_stored_topics
from services.shared.rules import shoe as rules
from services.shared.rules.cards import Card

SHOE_NAMESPACE = UUID("3b0b7a8e-56f4-4d5e-9d55-6a5a3f8e2c11")


class ShoeError(Exception):
    """A command the shoe cannot carry out (a bug or a misbehaving caller)."""


class ShoeIsClosed(ShoeError):
    pass


class ShoeExhausted(ShoeError):
    pass


class NotBurned(ShoeError):
    pass


def shoe_uuid(table_id: str, shoe_id: str) -> UUID:
    """The aggregate id of a table's shoe (stable: a repeated ShuffleShoe finds it)."""
    return uuid5(SHOE_NAMESPACE, f"{table_id}/{shoe_id}")


class Shoe(Aggregate):
    """One shuffled shoe of a table."""

    class Shuffled(ShoeShuffledFact, Aggregate.Created):
        TOPIC = ShoeShuffledFact.STORED_TOPIC

    class CardsBurned(CardsBurnedFact, Aggregate.Event):
        TOPIC = CardsBurnedFact.STORED_TOPIC

        def apply(self, shoe: Shoe) -> None:
            shoe.burned = True
            shoe.next_position = self.next_position

    class CardsDrawn(CardsDrawnFact, Aggregate.Event):
        TOPIC = CardsDrawnFact.STORED_TOPIC

        def apply(self, shoe: Shoe) -> None:
            shoe.requests[self.request_id] = (self.first_position, len(self.cards))
            shoe.next_position = self.first_position + len(self.cards)
            if self.cut_card_position is not None:
                shoe.cut_card_reached = True

    class Closed(ShoeRevealedFact, Aggregate.Event):
        TOPIC = ShoeRevealedFact.STORED_TOPIC

        def apply(self, shoe: Shoe) -> None:
            shoe.closed = True

    @staticmethod
    def create_id(table_id: str, shoe_id: str) -> UUID:
        return shoe_uuid(table_id, shoe_id)

    @event(Shuffled)
    def __init__(
        self,
        table_id: str,
        shoe_id: str,
        decks: int,
        card_count: int,
        order: list[str] | None,
        salt: str | None,
        encrypted: dict[str, str] | None,  # how the mapper stored order and salt
        commitment: str,
        commitment_scheme: str,
        cut_card_index: int,
        causation_id: UUID | None,
        correlation_id: UUID | None,
    ) -> None:
        if order is None or salt is None or len(order) != card_count:
            raise ShoeError(
                f"shoe {shoe_id} of table {table_id} has no readable order and salt "
                "(not decrypted): it cannot be dealt from"
            )
        self.table_id = table_id
        self.shoe_id = shoe_id
        self.decks = decks
        self.order = list(order)
        self.salt = salt
        self.commitment = commitment
        self.cut_card_index = cut_card_index
        self.next_position = 0
        self.burned = False
        self.cut_card_reached = False
        self.closed = False
        self.requests: dict[str, tuple[int, int]] = {}  # request_id -> (first position, count)

    # -- commands -----------------------------------------------------------------
    @classmethod
    def shuffle(
        cls,
        table_id: str,
        shoe_id: str,
        decks: int,
        cut_card_from_end: int,
        *,
        randbelow: Callable[[int], int] = secrets.randbelow,
        salt: bytes | None = None,
        causation_id: UUID | None = None,
        correlation_id: UUID | None = None,
    ) -> Shoe:
        """Shuffle a new shoe with the CSPRNG and commit to its order."""
        order = rules.shuffle(rules.composition(decks), randbelow)
        secret = rules.new_salt() if salt is None else salt
        cut_card_from_end = min(max(cut_card_from_end, 0), len(order))
        return cls(
            table_id=table_id,
            shoe_id=shoe_id,
            decks=decks,
            card_count=len(order),
            order=[card.code for card in order],
            salt=secret.hex(),
            encrypted=None,
            commitment=rules.commitment(order, secret),
            commitment_scheme=rules.COMMITMENT_SCHEME,
            cut_card_index=rules.cut_card_index(len(order), cut_card_from_end),
            causation_id=causation_id,
            correlation_id=correlation_id,
        )

    def burn(self, *, causation_id: UUID | None = None, correlation_id: UUID | None = None) -> None:
        """Show the first card and burn as many as its value (10 for a 0-value card)."""
        if self.burned:
            return
        count = min(rules.burn_count(Card.parse(self.order[0])), len(self.order) - 1)
        burned = CardsBurnedFact(
            table_id=self.table_id,
            shoe_id=self.shoe_id,
            shown_card=self.order[0],
            burned_cards=self.order[1 : 1 + count],
            next_position=1 + count,
            causation_id=causation_id,
            correlation_id=correlation_id,
        )
        record(self, self.CardsBurned, burned)

    def draw(
        self,
        coup_id: str,
        request_id: str,
        count: int,
        *,
        causation_id: UUID | None = None,
        correlation_id: UUID | None = None,
    ) -> bool:
        """Hand out the next ``count`` cards for a coup; False for a repeated request."""
        if request_id in self.requests:
            return False
        if self.closed:
            raise ShoeIsClosed(f"shoe {self.shoe_id} of table {self.table_id} is closed")
        if not self.burned:
            raise NotBurned(f"shoe {self.shoe_id} of table {self.table_id} was not burned yet")
        if count < 1:
            raise ShoeError(f"cannot draw {count} cards")
        first = self.next_position
        available = len(self.order) - first
        if available <= 0:
            raise ShoeExhausted(f"shoe {self.shoe_id} of table {self.table_id} has no cards left")
        count = min(count, available)
        end = first + count
        cut: int | None = None
        if not self.cut_card_reached and (self.cut_card_index < end or end >= len(self.order)):
            cut = self.cut_card_index
        drawn = CardsDrawnFact(
            table_id=self.table_id,
            shoe_id=self.shoe_id,
            coup_id=coup_id,
            request_id=request_id,
            first_position=first,
            cards=self.order[first:end],
            cut_card_position=cut,
            causation_id=causation_id,
            correlation_id=correlation_id,
        )
        record(self, self.CardsDrawn, drawn)
        return True

    def close(
        self, *, causation_id: UUID | None = None, correlation_id: UUID | None = None
    ) -> bool:
        """Close the shoe and reveal its order and salt; False if it was closed already."""
        if self.closed:
            return False
        revealed = ShoeRevealedFact(
            table_id=self.table_id,
            shoe_id=self.shoe_id,
            order=self.order,
            salt=self.salt,
            commitment=self.commitment,
            cards_dealt=self.next_position,
            causation_id=causation_id,
            correlation_id=correlation_id,
        )
        record(self, self.Closed, revealed)
        return True

    # -- queries ------------------------------------------------------------------
    @property
    def cards_left(self) -> int:
        return len(self.order) - self.next_position

    def verify(self) -> bool:
        """True when the stored order and salt match the commitment."""
        return rules.verify_commitment(
            [Card.parse(code) for code in self.order], bytes.fromhex(self.salt), self.commitment
        )


register_stored_topics(Shoe)
