"""The BetBook aggregate: every bet on one coup, its settlement and its refund.

One aggregate per coup keeps a busy coup fast. The answers to the bets handled
in one transaction (a batch of PlaceBet from one Kafka fetch) are drafted one by
one (each sees the ones before it, e.g. for OPPOSING_BETS) and recorded as ONE
``BetsAnswered`` event with a line per bet, which the relay publishes as one
BetAccepted / BetRejected per line. Settling the coup is likewise ONE event
(``CoupSettled``, a line per bet: one BetSettled message each, then
CoupSettled), and a void one ``CoupRefunded`` event.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from functools import lru_cache
from typing import Any, NamedTuple
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from services.shared.rules.paytable import BetType, get_paytable
from services.shared.rules.settlement import settle_bet
from services.shared.rules.validation import (
    BetLimit,
    Rejection,
    RejectionReason,
    parse_amount,
    validate_bet,
)

Limits = dict[str, dict[str, int]]

MAX_BOOK_STAKE = (2**53 - 1) // 12
"""The most a coup's accepted stakes may add up to: a bet returns at most 12 times its stake,
so every total of the coup (staked, paid, the house's result) stays below 2^53, exact in every
wallet and in JavaScript."""


class BookStatus(StrEnum):
    BETTING = "BETTING"
    CLOSED = "CLOSED"  # betting closed, cards being dealt
    SETTLED = "SETTLED"
    VOIDED = "VOIDED"


class Bet(NamedTuple):
    bet_id: str
    bettor_id: str
    bet_type: str
    amount: int


class CoupFacts(NamedTuple):
    """What settling needs of a resolved coup (satisfies rules' CoupOutcomeLike)."""

    outcome: str
    player_pair: bool
    banker_pair: bool


@lru_cache(maxsize=4096)
def book_aggregate_id(table_id: str, coup_id: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"/punto-banco/settlement/books/{table_id}/{coup_id}")


# An answer line: [bet_id, bettor_id, bet_type, amount, currency, reason_code, message];
# accepted when reason_code is None (amount: int stake), else refused (amount as received).
# When each bet was placed is kept beside the lines (BetsAnswered.placed_at), so the
# lines keep the shape that readers of the store (e.g. the audit) know.
AnswerLine = list[Any]
# A settlement line: [bet_id, bettor_id, bet_type, result, stake, payout, returned]
SettlementLine = list[Any]
# A refund line: [bet_id, bettor_id, stake, adjustment]
RefundLine = list[Any]


class BetBook(Aggregate):
    """The bets of one coup."""

    class Opened(Aggregate.Created):
        """Dealing's OpenBook: betting on the coup starts, with these terms."""

        class_version = 2
        table_id: str
        coup_id: str
        paytable: str
        limits: Limits
        currency: str
        closes_at: datetime
        coup_number: int | None
        shoe_id: str | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state.update(coup_number=None, shoe_id=None)  # opened from BettingOpened, before

    class BettingClosed(Aggregate.Event):
        """Dealing closed betting at ``closed_at`` (its BettingClosed's ``occurred_at``).

        The book is closed from then on; the relay publishes it as ``BetsClosed``
        (the accepted ``bets`` and their ``staked`` total), which lets dealing deal.
        """

        class_version = 3
        closed_at: datetime | None
        table_id: str | None
        coup_id: str | None
        bets: int
        staked: int
        currency: str | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["closed_at"] = None  # recorded before the time was kept: closed for all

        @staticmethod
        def upcast_v2_v3(state: dict[str, Any]) -> None:
            # Recorded before BetsClosed existed: nothing to publish for it.
            state.update(table_id=None, coup_id=None, bets=0, staked=0, currency=None)

    class BetsAnswered(Aggregate.Event):
        """Answers to bets; ``placed_at[i]`` (ISO 8601 or None) is when line i's bet was placed."""

        class_version = 2
        table_id: str
        coup_id: str
        lines: list[AnswerLine]
        placed_at: list[str | None]

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["placed_at"] = [None] * len(state["lines"])  # recorded before it was kept

    class CardsDrawn(Aggregate.Event):
        """Cards the shoe drew for the coup (its CardDrawn): ``lines`` of [position, card,
        when the broker appended it (ISO 8601, or None)]."""

        lines: list[list[Any]]

    class CardsRefused(Aggregate.Event):
        """Cards taken before the book closed whose records the broker appended before the
        close mark: no genuine card leaves the shoe while bets are taken."""

        positions: list[int]

    class ResultClaimed(Aggregate.Event):
        """A CoupResolved whose cards the shoe has not all drawn yet (as far as settlement
        has read): checked, and settled or refused, when they come."""

        claim: dict[str, Any]

    class ClaimsDropped(Aggregate.Event):
        """Waiting claims refused (an incident each): their places in ``claims``."""

        indexes: list[int]

    class CoupSettled(Aggregate.Event):
        table_id: str
        coup_id: str
        outcome: str
        player_pair: bool
        banker_pair: bool
        lines: list[SettlementLine]
        staked: int
        paid: int
        currency: str

    class CoupRefunded(Aggregate.Event):
        table_id: str
        coup_id: str
        supervisor_id: str
        reason: str
        lines: list[RefundLine]
        refunded: int
        currency: str

    @staticmethod
    def create_id(table_id: str, coup_id: str, **_: Any) -> UUID:
        return book_aggregate_id(table_id, coup_id)

    @event(Opened)
    def __init__(
        self,
        table_id: str,
        coup_id: str,
        paytable: str,
        limits: Limits,
        currency: str,
        closes_at: datetime,
        coup_number: int | None = None,
        shoe_id: str | None = None,
    ) -> None:
        self.table_id = table_id
        self.coup_id = coup_id
        self.paytable = paytable
        self.limits = limits
        self.currency = currency
        self.closes_at = closes_at
        self.coup_number = coup_number
        self.shoe_id = shoe_id
        # the shoe's cards for the coup, by position: (card, when the broker appended it)
        self.drawn: dict[int, tuple[str, datetime | None]] = {}
        self.claims: list[dict[str, Any]] = []  # CoupResolved waiting for the shoe's cards
        self.staked = 0
        self.status = BookStatus.BETTING
        self.closed_at: datetime | None = None  # dealing's BettingClosed.occurred_at
        self.bets: dict[str, Bet] = {}
        self.bettor_types: dict[str, set[BetType]] = {}
        self.returned: dict[str, int] = {}
        self._draft: list[AnswerLine] = []
        self._draft_placed: list[str | None] = []

    # -- bets ----------------------------------------------------------------------
    def check(
        self,
        bettor_id: str,
        bet_type: str,
        amount: object,
        currency: str,
        placed_at: datetime,
    ) -> Rejection | None:
        """Why this bet cannot be accepted, or None (see rules.validation).

        ``placed_at`` is when the bet was placed: the Kafka broker's append time
        of the PlaceBet (never a time the client wrote). See :meth:`closed_for`.
        """
        closed = self.closed_for(placed_at)
        if closed is not None:
            return Rejection(
                RejectionReason.BETTING_CLOSED,
                f"betting on coup {self.coup_id} is closed ({closed}); "
                "wait for the next BettingOpened",
            )
        refused = validate_bet(
            bet_type,
            amount,
            self._bet_limits(),
            currency,
            self.currency,
            self.bettor_types.get(bettor_id, set()),
        )
        if refused is None and self.staked + (parse_amount(amount) or 0) > MAX_BOOK_STAKE:
            return Rejection(
                RejectionReason.ABOVE_MAXIMUM,
                f"the stakes on coup {self.coup_id} would exceed the house's limit of "
                f"{MAX_BOOK_STAKE} minor units for one coup",
            )
        return refused

    def closed_for(self, placed_at: datetime) -> str | None:
        """Why a bet placed at ``placed_at`` is too late for this coup, or None.

        A bet is in time if it was placed before the coup's ``closes_at`` and the book
        is still open here: once dealing's BettingClosed is applied (betting may close
        early) the book is closed and BetsClosed tells dealing it may deal, so every
        bet judged after that is too late, whenever it was placed. A bet placed too
        late is refused even before BettingClosed is applied.
        """
        if self.status is BookStatus.SETTLED:
            return "the coup is resolved and settled"
        if self.status is BookStatus.VOIDED:
            return "the coup was voided"
        if placed_at >= self.closes_at:
            return f"bet placed at {placed_at.isoformat()}, betting closed at " + (
                self.closes_at.isoformat()
            )
        if self.status is BookStatus.CLOSED:
            closed_at = "an unknown time" if self.closed_at is None else self.closed_at.isoformat()
            return (
                f"bet placed at {placed_at.isoformat()}, betting closed at {closed_at} "
                "and the book is closed (BetsClosed): the cards may be out"
            )
        return None

    def _bet_limits(self) -> dict[BetType, BetLimit]:
        parsed: dict[BetType, BetLimit] | None = getattr(self, "_parsed_limits", None)
        if parsed is None:
            parsed = {
                BetType(name): BetLimit(limit["minimum"], limit["maximum"])
                for name, limit in self.limits.items()
            }
            self._parsed_limits = parsed
        return parsed

    def draft_accept(
        self,
        bet_id: str,
        bettor_id: str,
        bet_type: str,
        amount: int,
        currency: str,
        placed_at: datetime | None = None,
    ) -> None:
        """Accept a bet; recorded with the others of this transaction by :meth:`flush`."""
        line: AnswerLine = [bet_id, bettor_id, bet_type, amount, currency, None, ""]
        self._take(line)
        self._draft.append(line)
        self._draft_placed.append(None if placed_at is None else placed_at.isoformat())

    def draft_reject(
        self,
        bet_id: str,
        bettor_id: str,
        bet_type: str,
        amount: str,
        currency: str,
        reason_code: str,
        message: str,
        placed_at: datetime | None = None,
    ) -> None:
        """Refuse a bet; recorded with the others of this transaction by :meth:`flush`."""
        self._draft.append([bet_id, bettor_id, bet_type, amount, currency, reason_code, message])
        self._draft_placed.append(None if placed_at is None else placed_at.isoformat())

    @property
    def has_draft(self) -> bool:
        return bool(self._draft)

    def flush(self) -> None:
        """Record the drafted answers as one BetsAnswered event."""
        if self._draft:
            lines, self._draft = self._draft, []
            placed, self._draft_placed = self._draft_placed, []
            self._answer(
                table_id=self.table_id, coup_id=self.coup_id, lines=lines, placed_at=placed
            )

    @event(BetsAnswered)
    def _answer(
        self, table_id: str, coup_id: str, lines: list[AnswerLine], placed_at: list[str | None]
    ) -> None:
        # Live, the accepted lines were taken when drafted; taking them again is harmless.
        for line in lines:
            if line[5] is None:
                self._take(line)

    def _take(self, line: AnswerLine) -> None:
        bet_id, bettor_id, bet_type, amount = line[0], line[1], line[2], line[3]
        if bet_id not in self.bets:
            self.staked += amount
        self.bets[bet_id] = Bet(bet_id, bettor_id, bet_type, amount)
        self.bettor_types.setdefault(bettor_id, set()).add(BetType(bet_type))

    def close_betting(self, closed_at: datetime) -> None:
        """Dealing closed betting at ``closed_at`` (its BettingClosed's ``occurred_at``)."""
        self.flush()
        self._close_betting(
            closed_at=closed_at,
            table_id=self.table_id,
            coup_id=self.coup_id,
            bets=len(self.bets),
            staked=sum(bet.amount for bet in self.bets.values()),
            currency=self.currency,
        )

    @event(BettingClosed)
    def _close_betting(
        self,
        closed_at: datetime | None,
        table_id: str | None,
        coup_id: str | None,
        bets: int,
        staked: int,
        currency: str | None,
    ) -> None:
        self.status = BookStatus.CLOSED
        self.closed_at = closed_at

    # -- the shoe's cards and dealing's claim ---------------------------------------
    def note_cards(
        self, cards: list[tuple[int, str, datetime | None]]
    ) -> list[tuple[int, str, str]]:
        """Record cards the shoe drew for the coup, each with when the broker appended it;
        the conflicts (position, had, new): a position seen before with another card (the
        first one stays)."""
        seen = {position: card for position, (card, _) in self.drawn.items()}
        fresh: list[list[Any]] = []
        conflicts: list[tuple[int, str, str]] = []
        for position, card, appended in cards:
            had = seen.get(position)
            if had is None:
                seen[position] = card
                fresh.append([position, card, None if appended is None else appended.isoformat()])
            elif had != card:
                conflicts.append((position, had, card))
        if fresh:
            self._cards_drawn(lines=fresh)
        return conflicts

    @event(CardsDrawn)
    def _cards_drawn(self, lines: list[list[Any]]) -> None:
        for position, card, appended in lines:
            when = None if appended is None else datetime.fromisoformat(appended)
            self.drawn[int(position)] = (card, when)

    def early_cards(self) -> list[int]:
        """Positions of cards appended before the book's close mark (none while open)."""
        if self.closed_at is None:
            return []
        closed_at = self.closed_at
        return sorted(
            position
            for position, (_, when) in self.drawn.items()
            if when is not None and when < closed_at
        )

    def refuse_cards(self, positions: list[int]) -> None:
        self._refuse_cards(positions=positions)

    @event(CardsRefused)
    def _refuse_cards(self, positions: list[int]) -> None:
        for position in positions:
            self.drawn.pop(position, None)

    @property
    def drawn_cards(self) -> list[str]:
        """The shoe's cards for the coup, in shoe order."""
        return [self.drawn[position][0] for position in sorted(self.drawn)]

    def claim_result(self, claim: dict[str, Any]) -> None:
        """Keep a claim until the shoe's cards for it are in."""
        self._claim(claim=claim)

    @event(ResultClaimed)
    def _claim(self, claim: dict[str, Any]) -> None:
        self.claims.append(claim)

    def drop_claims(self, indexes: list[int]) -> None:
        """Forget the waiting claims at ``indexes`` (refused)."""
        self._drop_claims(indexes=indexes)

    @event(ClaimsDropped)
    def _drop_claims(self, indexes: list[int]) -> None:
        dropped = set(indexes)
        self.claims = [claim for index, claim in enumerate(self.claims) if index not in dropped]

    def settled_facts(self) -> CoupFacts | None:
        """What the coup was settled on (None: not settled)."""
        facts: CoupFacts | None = getattr(self, "facts", None)
        return facts

    # -- settlement and refund -----------------------------------------------------
    def settle(self, coup: CoupFacts) -> None:
        """Settle every accepted bet against the coup: one event for the whole coup."""
        self.flush()
        paytable = get_paytable(self.paytable)
        lines: list[SettlementLine] = []
        staked = paid = 0
        for bet in self.bets.values():
            result = settle_bet(BetType(bet.bet_type), bet.amount, coup, paytable)
            lines.append(
                [
                    bet.bet_id,
                    bet.bettor_id,
                    bet.bet_type,
                    result.result.value,
                    result.stake,
                    result.payout,
                    result.returned,
                ]
            )
            staked += result.stake
            paid += result.returned
        self._settle(
            table_id=self.table_id,
            coup_id=self.coup_id,
            outcome=coup.outcome,
            player_pair=coup.player_pair,
            banker_pair=coup.banker_pair,
            lines=lines,
            staked=staked,
            paid=paid,
            currency=self.currency,
        )

    @event(CoupSettled)
    def _settle(
        self,
        table_id: str,
        coup_id: str,
        outcome: str,
        player_pair: bool,
        banker_pair: bool,
        lines: list[SettlementLine],
        staked: int,
        paid: int,
        currency: str,
    ) -> None:
        self.status = BookStatus.SETTLED
        self.returned = {line[0]: line[6] for line in lines}
        self.facts = CoupFacts(outcome, player_pair, banker_pair)
        self.claims = []

    def refund(self, supervisor_id: str, reason: str) -> None:
        """Refund every bet's stake; the adjustment is relative to what was already paid."""
        self.flush()
        lines: list[RefundLine] = []
        refunded = 0
        for bet in self.bets.values():
            paid = self.returned.get(bet.bet_id, 0) if self.status is BookStatus.SETTLED else 0
            adjustment = bet.amount - paid
            lines.append([bet.bet_id, bet.bettor_id, bet.amount, adjustment])
            refunded += bet.amount
        self._refund(
            table_id=self.table_id,
            coup_id=self.coup_id,
            supervisor_id=supervisor_id,
            reason=reason,
            lines=lines,
            refunded=refunded,
            currency=self.currency,
        )

    @event(CoupRefunded)
    def _refund(
        self,
        table_id: str,
        coup_id: str,
        supervisor_id: str,
        reason: str,
        lines: list[RefundLine],
        refunded: int,
        currency: str,
    ) -> None:
        self.status = BookStatus.VOIDED
        self.claims = []

    @property
    def bet_count(self) -> int:
        return len(self.bets)

    def settled_amounts(self) -> Mapping[str, int]:
        """bet id -> amount returned to the bettor (after settlement)."""
        return dict(self.returned)
