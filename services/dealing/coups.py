"""The Coup aggregate: betting, the cards dealt by the tableau, the result, a void, the
corrections of a result found wrong after settlement.

Cards arrive one by one from the shoe (answers to ``DrawCards``); each goes to
the side :func:`services.shared.rules.tableau.next_side` names. When no side needs
another card the coup is resolved, and the result is cross-checked with
:func:`services.shared.rules.tableau.resolve_coup` over the same cards in dealing order.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from services.shared.facts.dealing import (
    BettingClosedFact,
    BettingOpenedFact,
    CardDealtFact,
    CardsRequestedFact,
    CoupCorrectedFact,
    CoupResolvedFact,
    CoupVoidedFact,
)
from services.shared.facts.topics import record, register_stored_topics
from services.shared.rules.cards import Card
from services.shared.rules.tableau import CoupResult, Side, next_side, resolve_coup

INITIAL_CARDS = 4


class CoupPhase(StrEnum):
    BETTING = "BETTING"
    DEALING = "DEALING"  # betting closed; cards asked for once settlement sent BetsClosed
    RESOLVED = "RESOLVED"
    VOIDED = "VOIDED"


class DealingError(RuntimeError):
    """The cards received contradict the tableau (a bug or a corrupted shoe)."""


def coup_aggregate_id(table_id: str, coup_id: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"/punto-banco/dealing/coups/{table_id}/{coup_id}")


class Coup(Aggregate):
    """One coup of a table."""

    class BettingOpened(BettingOpenedFact, Aggregate.Created):
        """A coup starts, with the table's terms in force (published as OpenBook in the bets'
        partition and as BettingOpened) and the lowest shoe position its first card may have."""

        TOPIC = BettingOpenedFact.STORED_TOPIC

    class BettingClosed(BettingClosedFact, Aggregate.Event):
        TOPIC = BettingClosedFact.STORED_TOPIC

        def apply(self, coup: Coup) -> None:
            coup.phase = CoupPhase.DEALING

    class CardsRequested(CardsRequestedFact, Aggregate.Event):
        """DrawCards sent to the shoe."""

        TOPIC = CardsRequestedFact.STORED_TOPIC

        def apply(self, coup: Coup) -> None:
            coup.requests += 1
            coup.pending_request = self.request_id
            coup.pending_count = self.count

    class CardDealt(CardDealtFact, Aggregate.Event):
        TOPIC = CardDealtFact.STORED_TOPIC

        def apply(self, coup: Coup) -> None:
            (coup.player if self.side == Side.PLAYER.value else coup.banker).append(self.card)
            coup.dealt.append(self.card)
            coup.positions.append(self.position)
            coup.pending_count -= 1
            if coup.pending_count == 0:
                coup.pending_request = None

    class Resolved(CoupResolvedFact, Aggregate.Event):
        TOPIC = CoupResolvedFact.STORED_TOPIC

        def apply(self, coup: Coup) -> None:
            coup.phase = CoupPhase.RESOLVED

    class Voided(CoupVoidedFact, Aggregate.Event):
        TOPIC = CoupVoidedFact.STORED_TOPIC

        def apply(self, coup: Coup) -> None:
            coup.phase = CoupPhase.VOIDED
            coup.pending_request = None
            coup.pending_count = 0
            coup.void_authorization = self.authorization

    class Corrected(CoupCorrectedFact, Aggregate.Event):
        TOPIC = CoupCorrectedFact.STORED_TOPIC

        def apply(self, coup: Coup) -> None:
            player, banker = self.player_cards, self.banker_cards
            order = [player[0], banker[0], player[1], banker[1], *player[2:], *banker[2:]]
            coup.corrected_cards = order
            coup.corrections = [*coup.corrections_made, self.correction_id]

    @staticmethod
    def create_id(table_id: str, coup_id: str, **_: Any) -> UUID:
        return coup_aggregate_id(table_id, coup_id)

    @event(BettingOpened)
    def __init__(
        self,
        table_id: str,
        coup_id: str,
        coup_number: int,
        shoe_id: str,
        closes_at: datetime,
        last_of_shoe: bool,
        terms: dict[str, Any] | None = None,
        first_position: int | None = None,
    ) -> None:
        self.table_id = table_id
        self.coup_id = coup_id
        self.coup_number = coup_number
        self.shoe_id = shoe_id
        self.closes_at = closes_at
        self.last_of_shoe = last_of_shoe
        self.first_position = first_position
        self.phase = CoupPhase.BETTING
        self.player: list[str] = []
        self.banker: list[str] = []
        self.dealt: list[str] = []  # in dealing order, beside their shoe positions
        self.positions: list[int] = []
        self.requests = 0
        self.pending_request: str | None = None
        self.pending_count = 0
        self.void_authorization: str | None = None  # the supervisor's signed decision
        self.corrected_cards: list[str] | None = None  # the latest corrected result's cards
        self.corrections: list[UUID] = []  # the decisions that corrected its result

    # -- queries -------------------------------------------------------------------
    @property
    def is_finished(self) -> bool:
        return self.phase in (CoupPhase.RESOLVED, CoupPhase.VOIDED)

    def expects(self, request_id: str, position: int) -> bool:
        """True when a card for this request and position is still awaited."""
        return (
            self.phase is CoupPhase.DEALING
            and request_id == self.pending_request
            and self.pending_count > 0
            and position not in self.positions
            and self.why_unexpected(request_id, position, "") is None
        )

    def next_position(self) -> int | None:
        """The shoe position the next card must have (None: any, as far as known).

        The shoe hands out its cards in order and only to this coup while it is dealt, so
        after the first card each one is at the position after the last; the first one is
        at or after ``first_position`` (a voided coup before may have taken cards)."""
        if self.positions:
            return self.positions[-1] + 1
        return None

    def why_unexpected(self, request_id: str, position: int, card: str) -> str | None:
        """Why a card from the shoe is not one this coup awaits (None: it is awaited, or a
        copy of one already dealt, or the coup is over)."""
        if self.phase in (CoupPhase.VOIDED, CoupPhase.RESOLVED):
            return None  # late news for a finished coup: nothing to do
        if position in self.positions:
            had = self._card_at(position)
            return None if had == card else f"position {position} was dealt as {had}, not {card}"
        if self.phase is not CoupPhase.DEALING or request_id != self.pending_request:
            return f"no card was asked for by request {request_id}"
        expected = self.next_position()
        if expected is not None and position != expected:
            return f"the next card of the coup is at position {expected}, not {position}"
        floor = getattr(self, "first_position", None)
        if expected is None and floor is not None and position < floor:
            return f"position {position} was dealt before this coup (its cards start at {floor})"
        return None

    @property
    def result_cards(self) -> list[str]:
        """The cards of its result, in dealing order: the latest correction's, else dealt."""
        corrected: list[str] | None = self.__dict__.get("corrected_cards")
        return list(self.dealt) if corrected is None else list(corrected)

    @property
    def corrections_made(self) -> list[UUID]:
        """The ids of the decisions that corrected its result, in order."""
        made: list[UUID] = self.__dict__.get("corrections", [])
        return made

    def _card_at(self, position: int) -> str:
        return self.dealt[self.positions.index(position)]

    def next_side(self) -> Side | None:
        return next_side(_cards(self.player), _cards(self.banker))

    def result(self) -> CoupResult:
        """The result from the cards in dealing order (complete coups only)."""
        return resolve_coup([Card.parse(code) for code in self.dealt])

    # -- commands ------------------------------------------------------------------
    def close_betting(self) -> None:
        record(self, self.BettingClosed, BettingClosedFact(self.table_id, self.coup_id))

    def request_cards(self, count: int) -> None:
        """Ask the shoe for cards. The request id ends with 64 random bits: only who reads
        shoe-commands can answer it (a card for an unknown request is refused)."""
        requested = CardsRequestedFact(
            table_id=self.table_id,
            coup_id=self.coup_id,
            shoe_id=self.shoe_id,
            request_id=f"{self.coup_id}.draw-{self.requests + 1}.{secrets.token_hex(8)}",
            count=count,
        )
        record(self, self.CardsRequested, requested)

    def deal(self, card: str, position: int) -> None:
        """Give ``card`` to the side the tableau names; then ask for more or resolve."""
        side = self.next_side()
        if side is None:
            raise DealingError(f"coup {self.coup_id} is complete; card {card} is one too many")
        hand = self.player if side is Side.PLAYER else self.banker
        dealt = CardDealtFact(
            table_id=self.table_id,
            coup_id=self.coup_id,
            shoe_id=self.shoe_id,
            side=side.value,
            card=card,
            position=position,
            card_index_in_hand=len(hand) + 1,
        )
        record(self, self.CardDealt, dealt)
        if self.pending_count == 0:
            if self.next_side() is None:
                self.resolve()
            else:
                self.request_cards(1)

    def resolve(self) -> None:
        result = self.result()
        if [c.code for c in result.player] != self.player or [
            c.code for c in result.banker
        ] != self.banker:
            raise DealingError(
                f"coup {self.coup_id}: dealt Player {self.player} Banker {self.banker}, "
                f"but the tableau gives Player {result.player} Banker {result.banker}"
            )
        resolved = CoupResolvedFact(
            table_id=self.table_id,
            coup_id=self.coup_id,
            coup_number=self.coup_number,
            shoe_id=self.shoe_id,
            player_cards=list(self.player),
            banker_cards=list(self.banker),
            player_total=result.player_total,
            banker_total=result.banker_total,
            outcome=result.outcome.value,
            natural=result.natural,
            player_pair=result.player_pair,
            banker_pair=result.banker_pair,
        )
        record(self, self.Resolved, resolved)

    def void(self, supervisor_id: str, reason: str, authorization: str) -> None:
        """Void the coup on a supervisor's decision (``authorization``: the signed token the
        Application verified; ``supervisor_id`` is its subject)."""
        voided = CoupVoidedFact(
            table_id=self.table_id,
            coup_id=self.coup_id,
            supervisor_id=supervisor_id,
            reason=reason,
            was_resolved=self.phase is CoupPhase.RESOLVED,
            authorization=authorization,
        )
        record(self, self.Voided, voided)

    def correct_result(
        self,
        correction_id: UUID,
        cards: list[str],
        supervisor_id: str,
        reason: str,
        authorization: str,
    ) -> None:
        """Its result is the one ``cards`` (a whole coup, in dealing order) make, on a
        supervisor's decision (``authorization``, verified by the Application; its id is
        ``correction_id``)."""
        result = resolve_coup([Card.parse(code) for code in cards])
        corrected = CoupCorrectedFact(
            table_id=self.table_id,
            coup_id=self.coup_id,
            correction_id=correction_id,
            coup_number=self.coup_number,
            shoe_id=self.shoe_id,
            player_cards=[card.code for card in result.player],
            banker_cards=[card.code for card in result.banker],
            player_total=result.player_total,
            banker_total=result.banker_total,
            outcome=result.outcome.value,
            natural=result.natural,
            player_pair=result.player_pair,
            banker_pair=result.banker_pair,
            supervisor_id=supervisor_id,
            reason=reason,
            authorization=authorization,
        )
        record(self, self.Corrected, corrected)


def _cards(codes: list[str]) -> list[Card]:
    return [Card.parse(code) for code in codes]


register_stored_topics(Coup)
