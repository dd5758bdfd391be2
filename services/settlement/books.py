"""The BetBook aggregate: every bet on one coup, its settlement and its refund.

One aggregate per coup keeps a busy coup fast. The answers to the bets handled
in one transaction (a batch of PlaceBet from one Kafka fetch) are drafted one by
one (each sees the ones before it, e.g. for OPPOSING_BETS) and recorded as ONE
``BetsAnswered`` event with a line per bet, which the relay publishes as one
BetAccepted / BetRejected per line. Settling the coup is likewise ONE event
(``CoupSettled``, a line per bet: one BetSettled message each, then
CoupSettled), a void one ``CoupRefunded`` event, and a correction of a settled coup's result
one ``SettlementCorrected`` event (a line per bet whose result or payout changed: one
BetCorrected each, then CoupSettlementCorrected; the BetSettled stay as they were).

Operators (B2B): one book takes the bets of every operator at the table. A bet's identity in
the book is (operator, bet id); answers, settlements and refunds are recorded one event per
operator (its bets, for its bet-events topic). Dealing marks every operator's bet-commands
topic: the book takes an operator's bets once that operator's OpenBook is read
(:meth:`BetBook.opened_for`), refuses them once its CloseBook is read, and closes (BetsClosed,
which lets dealing deal) only when the CloseBook of every operator it waits for is read.

A book accepts at most ``max_bets`` bets (``PB_MAX_BETS_PER_COUP``, all operators together;
``BOOK_FULL`` beyond), so what settlement holds per coup is bounded (docs/scaling.md), and at
most ``max_operator_bets`` of one operator (``PB_MAX_BETS_PER_OPERATOR``, by default an equal
share of the first), so one operator's bets never take another's share; likewise each operator's
stakes at most an equal share of :data:`MAX_BOOK_STAKE`. The counts are the book's own accepted
bets, rebuilt from its events on every replay.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from functools import lru_cache
from typing import Any, NamedTuple
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from services.shared.facts.settlement import (
    HOUSE,
    AnswerLine,
    BetsAnsweredFact,
    BookClosedFact,
    BookOpenedFact,
    CorrectedLine,
    CoupRefundedFact,
    CoupSettledFact,
    DrawnCard,
    Limits,
    OperatorClosedFact,
    RefundLine,
    SettledLine,
    SettlementCorrectedFact,
)
from services.shared.facts.topics import record, register_stored_topics
from services.shared.rules.paytable import PAYTABLES, BetType, Paytable, get_paytable
from services.shared.rules.settlement import Payoff, payoff, settle_stake
from services.shared.rules.tableau import CoupResult
from services.shared.rules.validation import (
    BetLimit,
    Rejection,
    RejectionReason,
    parse_bet_type,
    validate_stake,
)

MAX_BOOK_EXPOSURE = 2**53 - 1
"""The most a coup could pay back: the sum over its accepted bets of each stake times the most
its bet type returns at the table's paytable (:func:`exposure`: 2 for Player, 12 for a pair, 252
for a Perfect Pair...). So every amount of the coup (a bet's return, staked, paid, the house's
result) stays below 2^53, exact in every wallet and in JavaScript, and a table may still take
its largest bets on the bets that pay least."""


def exposure(paytable: str, bet_type: str, stake: int) -> int:
    """The most a bet of ``stake`` on ``bet_type`` could return (stake included), rounded up."""
    numerator, denominator = _most_returned(paytable, bet_type)
    return -(-stake * numerator // denominator)


@lru_cache(maxsize=256)
def _most_returned(paytable: str, bet_type: str) -> tuple[int, int]:
    most = get_paytable(paytable).largest_return(BetType(bet_type))
    return most.numerator, most.denominator


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
    operator: str = HOUSE


BetKey = tuple[str, str]
"""A bet's identity: (operator, bet id)."""


class CoupFacts(NamedTuple):
    """What a coup was settled on, as its CoupSettled records it (a claim of the same coup on
    other facts is refused)."""

    outcome: str
    player_pair: bool
    banker_pair: bool


class FinishedBook(NamedTuple):
    """What answering a bet needs of a settled or voided book, kept instead of the book: such
    a book takes no bet, and a bet naming it is answered on the table's desk (a late bet's
    cost does not grow with the book)."""

    id: UUID
    coup_id: str
    status: BookStatus
    opened: frozenset[str]  # the operators whose OpenBook was read

    def opened_for(self, operator: str) -> bool:
        return operator in self.opened

    def refusal(self) -> Rejection:
        """Why a bet on this coup is refused (what :meth:`BetBook.check` says of it)."""
        return _closed(self.coup_id, _FINISHED[self.status])


_FINISHED = {
    BookStatus.SETTLED: "the coup is resolved and settled",
    BookStatus.VOIDED: "the coup was voided",
}


def _closed(coup_id: str, why: str) -> Rejection:
    return Rejection(
        RejectionReason.BETTING_CLOSED,
        f"betting on coup {coup_id} is closed ({why}); wait for the next BettingOpened",
    )


@lru_cache(maxsize=1024)
def _iso_text(placed_at: datetime, offset: timedelta | None) -> str:
    """``placed_at.isoformat()`` (2 us), made once: the bets of one record batch share their
    append time (``deliveries.append_time``). The offset is part of the key, as an equal time
    in another zone is written otherwise."""
    return placed_at.isoformat()


@lru_cache(maxsize=4096)
def book_aggregate_id(table_id: str, coup_id: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"/punto-banco/settlement/books/{table_id}/{coup_id}")


_new_tuple = tuple.__new__


class BetBook(Aggregate):
    """The bets of one coup."""

    class Opened(BookOpenedFact, Aggregate.Created):
        """Dealing's OpenBook: betting on the coup starts, with these terms."""

        TOPIC = BookOpenedFact.STORED_TOPIC

    class OperatorOpened(Aggregate.Event):
        """Another operator's OpenBook: its bets are taken from now on."""

        operator: str

    class OperatorClosed(OperatorClosedFact, Aggregate.Event):
        """An operator's CloseBook at ``closed_at``, while others' are awaited: its later
        bets are too late. The last operator's closes the book (BettingClosed)."""

        TOPIC = OperatorClosedFact.STORED_TOPIC

    class BettingClosed(BookClosedFact, Aggregate.Event):
        """Dealing closed betting at ``closed_at`` (its CloseBook's append time).

        The book is closed from then on; the relay publishes it as ``BetsClosed``
        (the accepted ``bets`` and their ``staked`` total), which lets dealing deal.
        """

        TOPIC = BookClosedFact.STORED_TOPIC

        def apply(self, book: BetBook) -> None:
            book.status = BookStatus.CLOSED
            book.closed_at = self.closed_at

    class BetsAnswered(BetsAnsweredFact, Aggregate.Event):
        """Answers to bets; ``placed_at[i]`` (ISO 8601 or None) is when line i's bet was placed."""

        TOPIC = BetsAnsweredFact.STORED_TOPIC

        def apply(self, book: BetBook) -> None:
            # Live, the accepted lines were taken when drafted, as they are: a replay takes them.
            operator, taken = self.operator, book.bets
            for line in self.lines:
                if line.reason_code is None:
                    bet = taken.get((operator, line.bet_id))  # (bet_id, bettor, type, stake...)
                    if bet is None or bet[1:4] != line[1:4]:
                        book._take(line, operator)

    class CardsDrawn(Aggregate.Event):
        """Cards the shoe drew for the coup (its CardDrawn), each with when the broker
        appended it."""

        lines: list[DrawnCard]

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

    class CoupSettled(CoupSettledFact, Aggregate.Event):
        TOPIC = CoupSettledFact.STORED_TOPIC

        def apply(self, book: BetBook) -> None:
            book.status = BookStatus.SETTLED
            operator = self.operator
            book.returned.update({(operator, line.bet_id): line.returned for line in self.lines})
            book.settled_as().update(
                {(operator, line.bet_id): (line.result, line.payout) for line in self.lines}
            )
            book.facts = CoupFacts(self.outcome, self.player_pair, self.banker_pair)
            book.claims = []

    class SettlementCorrected(SettlementCorrectedFact, Aggregate.Event):
        TOPIC = SettlementCorrectedFact.STORED_TOPIC

        def apply(self, book: BetBook) -> None:
            operator, settled_as = self.operator, book.settled_as()
            for line in self.lines:
                key = (operator, line.bet_id)
                book.returned[key] = book.returned.get(key, 0) + line.difference
                settled_as[key] = (line.result, line.payout)
            book.facts = CoupFacts(self.outcome, self.player_pair, self.banker_pair)
            book.corrections_applied().add(self.correction_id)

    class CoupRefunded(CoupRefundedFact, Aggregate.Event):
        TOPIC = CoupRefundedFact.STORED_TOPIC

        def apply(self, book: BetBook) -> None:
            book.status = BookStatus.VOIDED
            book.claims = []

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
        operator: str = HOUSE,
        operators: list[str] | None = None,
    ) -> None:
        self.table_id = table_id
        self.operator = operator
        self.operators = [HOUSE] if operators is None else list(operators)
        self.opened = {operator}  # operators whose OpenBook was read
        self.marks: dict[str, datetime] = {}  # operator -> its CloseBook's time (book open)
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
        self.exposure = 0  # the most the accepted bets could return (MAX_BOOK_EXPOSURE)
        self.operator_bets: dict[str, int] = {}  # operator -> its accepted bets
        self.operator_exposure: dict[str, int] = {}  # operator -> the most its bets return
        self.status = BookStatus.BETTING
        self.closed_at: datetime | None = None  # dealing's BettingClosed.occurred_at
        self.bets: dict[BetKey, Bet] = {}
        self.bettor_types: dict[tuple[str, str], set[BetType]] = {}  # (operator, bettor)
        self.returned: dict[BetKey, int] = {}
        self.results: dict[BetKey, tuple[str, int]] = {}  # (result, payout) as settled now
        self.corrections: set[UUID] = set()  # the corrections of its result applied
        self.facts: CoupFacts | None = None  # what it was settled on
        # this unit's answers, per operator: its lines and their placed_at
        self._draft: dict[str, tuple[list[AnswerLine], list[str | None]]] = {}

    # -- operators' marks -----------------------------------------------------------
    def opened_for(self, operator: str) -> bool:
        """Whether ``operator``'s OpenBook was read: its bets are judged by the book."""
        return operator in self.opened

    def open_for(self, operator: str) -> None:
        """Another operator's OpenBook (nothing if read before, or the book is closed)."""
        if operator not in self.opened and self.status is BookStatus.BETTING:
            self._open_for(operator=operator)

    @event(OperatorOpened)
    def _open_for(self, operator: str) -> None:
        self.opened.add(operator)

    def close_mark(self, operator: str, closed_at: datetime) -> bool:
        """``operator``'s CloseBook at ``closed_at``; True when it closed the book (every
        operator's mark is in: BettingClosed), False while others' are awaited."""
        if self.status is not BookStatus.BETTING or operator in self.marks:
            return False
        if set(self.operators) <= {*self.marks, operator}:
            self.close_betting(closed_at)
            return True
        self._close_mark(operator=operator, closed_at=closed_at)
        return False

    @event(OperatorClosed)
    def _close_mark(self, operator: str, closed_at: datetime) -> None:
        self.marks[operator] = closed_at

    # -- bets ----------------------------------------------------------------------
    def check(
        self,
        bettor_id: str,
        bet_type: str,
        stake: int | None,
        amount: object,
        currency: str,
        placed_at: datetime,
        operator: str = HOUSE,
        *,
        max_bets: int,
        max_operator_bets: int,
    ) -> Rejection | None:
        """Why this bet cannot be accepted, or None (see rules.validation).

        ``stake`` is ``amount`` parsed where the bet entered (None: not a valid amount);
        ``amount`` as received is quoted when it is refused. ``placed_at`` is when the bet
        was placed: the Kafka broker's append time of the PlaceBet (never a time the
        client wrote). See :meth:`closed_for`. ``max_bets``: the most bets the book accepts
        (``PB_MAX_BETS_PER_COUP``), counted over every operator's accepted bets, those
        drafted in this unit included; ``max_operator_bets`` the most of one operator
        (``PB_MAX_BETS_PER_OPERATOR``); a bet beyond either is ``BOOK_FULL``. What the coup
        could pay back stays within :data:`MAX_BOOK_EXPOSURE`, an operator's bets within an
        equal share of it (``ABOVE_MAXIMUM``).
        """
        closed = self.closed_for(placed_at, operator)
        if closed is not None:
            return _closed(self.coup_id, closed)
        refused = validate_stake(
            bet_type,
            stake,
            amount,
            self._bet_limits(),
            currency,
            self.currency,
            self.bettor_types.get((operator, bettor_id), set()),
        )
        if refused is not None:
            return refused
        if len(self.bets) >= max_bets:
            return Rejection(
                RejectionReason.BOOK_FULL,
                f"coup {self.coup_id} already holds {len(self.bets)} bets, the most one coup "
                "takes; bet on the next coup (with a new bet id)",
            )
        mine = self.operator_bets.get(operator, 0)
        if mine >= max_operator_bets:
            return Rejection(
                RejectionReason.BOOK_FULL,
                f"coup {self.coup_id} already holds {mine} bets of operator {operator}, the "
                "most one coup takes from one operator; bet on the next coup (with a new bet id)",
            )
        most = exposure(self.paytable, bet_type, stake or 0)
        if self.exposure + most > MAX_BOOK_EXPOSURE:
            return Rejection(
                RejectionReason.ABOVE_MAXIMUM,
                f"what coup {self.coup_id} could pay back would exceed the house's limit of "
                f"{MAX_BOOK_EXPOSURE} minor units for one coup (each stake times the most its "
                "bet type returns); bet less, or on the next coup",
            )
        sharing = len(self.operators) + (operator not in self.operators)
        share = MAX_BOOK_EXPOSURE // sharing
        if self.operator_exposure.get(operator, 0) + most > share:
            return Rejection(
                RejectionReason.ABOVE_MAXIMUM,
                f"what operator {operator}'s bets on coup {self.coup_id} could pay back would "
                f"exceed the house's limit of {share} minor units for one operator on one coup "
                "(each stake times the most its bet type returns); bet less, or on the next coup",
            )
        return None

    def closed_for(self, placed_at: datetime, operator: str = HOUSE) -> str | None:
        """Why a bet placed at ``placed_at`` is too late for this coup, or None.

        A bet is in time if it was placed before the coup's ``closes_at`` and the book
        is still open here: once dealing's BettingClosed is applied (betting may close
        early) the book is closed and BetsClosed tells dealing it may deal, so every
        bet judged after that is too late, whenever it was placed. A bet placed too
        late is refused even before BettingClosed is applied. An operator's bet judged after
        that operator's CloseBook is too late too (the book may wait for others' marks).
        """
        if self.status in _FINISHED:
            return _FINISHED[self.status]
        if placed_at >= self.closes_at:
            return f"bet placed at {placed_at.isoformat()}, betting closed at " + (
                self.closes_at.isoformat()
            )
        mark = self.__dict__.get("marks", {}).get(operator)
        if mark is not None:
            return (
                f"bet placed at {placed_at.isoformat()}, betting closed at {mark.isoformat()} "
                "(the CloseBook mark is before it)"
            )
        if self.status is BookStatus.CLOSED:
            closed_at = "an unknown time" if self.closed_at is None else self.closed_at.isoformat()
            return (
                f"bet placed at {placed_at.isoformat()}, betting closed at {closed_at} "
                "and the book is closed (BetsClosed): the cards may be out"
            )
        return None

    def _bet_limits(self) -> dict[BetType, BetLimit]:
        """The limits of the bet types offered: named by the book's limits and by its
        paytable (a type the paytable does not offer is never accepted: it could not be
        settled)."""
        parsed: dict[BetType, BetLimit] | None = getattr(self, "_parsed_limits", None)
        if parsed is None:
            paytable = PAYTABLES.get(self.paytable)
            parsed = {
                BetType(name): BetLimit(limit["minimum"], limit["maximum"])
                for name, limit in self.limits.items()
                if paytable is None or name in paytable.pays
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
        operator: str = HOUSE,
    ) -> None:
        """Accept a bet; recorded with the others of this transaction by :meth:`flush`."""
        line = AnswerLine(bet_id, bettor_id, bet_type, amount, currency, None, "")
        self._take(line, operator)
        self._drafted(operator, line, placed_at)

    def _drafted(self, operator: str, line: AnswerLine, placed_at: datetime | None) -> None:
        lines, placed = self._draft.setdefault(operator, ([], []))
        lines.append(line)
        placed.append(None if placed_at is None else _iso_text(placed_at, placed_at.utcoffset()))

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
        operator: str = HOUSE,
    ) -> None:
        """Refuse a bet; recorded with the others of this transaction by :meth:`flush`."""
        line = AnswerLine(bet_id, bettor_id, bet_type, amount, currency, reason_code, message)
        self._drafted(operator, line, placed_at)

    @property
    def has_draft(self) -> bool:
        return bool(self._draft)

    def flush(self) -> None:
        """Record the drafted answers as one BetsAnswered event per operator."""
        if self._draft:
            drafts, self._draft = self._draft, {}
            for operator, (lines, placed) in drafts.items():
                answered = BetsAnsweredFact(self.table_id, self.coup_id, lines, placed, operator)
                record(self, self.BetsAnswered, answered)

    def _take(self, line: AnswerLine, operator: str) -> None:
        """Count an accepted line's bet (its ``amount`` is the stake, an int)."""
        bet_id, amount = line.bet_id, line.amount
        assert type(amount) is int
        key = (operator, bet_id)
        if key not in self.bets:
            most = exposure(self.paytable, line.bet_type, amount)
            self.exposure += most
            self.operator_bets[operator] = self.operator_bets.get(operator, 0) + 1
            self.operator_exposure[operator] = self.operator_exposure.get(operator, 0) + most
        self.bets[key] = Bet(bet_id, line.bettor_id, line.bet_type, amount, operator)
        types = self.bettor_types.setdefault((operator, line.bettor_id), set())
        types.add(parse_bet_type(line.bet_type) or BetType(line.bet_type))  # a dict's, or raise

    def close_betting(self, closed_at: datetime) -> None:
        """Dealing closed betting at ``closed_at`` (its CloseBook's append time)."""
        self.flush()
        closed = BookClosedFact(
            closed_at=closed_at,
            table_id=self.table_id,
            coup_id=self.coup_id,
            bets=len(self.bets),
            staked=sum(bet.amount for bet in self.bets.values()),
            currency=self.currency,
        )
        record(self, self.BettingClosed, closed)

    # -- the shoe's cards and dealing's claim ---------------------------------------
    def note_cards(
        self, cards: list[tuple[int, str, datetime | None]]
    ) -> list[tuple[int, str, str]]:
        """Record cards the shoe drew for the coup, each with when the broker appended it;
        the conflicts (position, had, new): a position seen before with another card (the
        first one stays)."""
        seen = {position: card for position, (card, _) in self.drawn.items()}
        fresh: list[DrawnCard] = []
        conflicts: list[tuple[int, str, str]] = []
        for position, card, appended in cards:
            had = seen.get(position)
            if had is None:
                seen[position] = card
                when = None if appended is None else appended.isoformat()
                fresh.append(DrawnCard(position, card, when))
            elif had != card:
                conflicts.append((position, had, card))
        if fresh:
            self._cards_drawn(lines=fresh)
        return conflicts

    @event(CardsDrawn)
    def _cards_drawn(self, lines: list[DrawnCard]) -> None:
        for position, card, appended in lines:
            when = None if appended is None else datetime.fromisoformat(appended)
            self.drawn[int(position)] = (card, when)

    def early_cards(self, skew: timedelta) -> list[int]:
        """Positions of cards appended more than ``skew`` before the book's close mark (none
        while open); ``skew``: how far the two partition leaders' clocks may disagree."""
        if self.closed_at is None:
            return []
        closed_at = self.closed_at - skew
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
    def _by_operator(self) -> dict[str, list[Bet]]:
        """The accepted bets per operator: every operator the book waits for (none: no bets),
        then any other whose bets it holds."""
        found: dict[str, list[Bet]] = {operator: [] for operator in self.operators}
        for bet in self.bets.values():
            found.setdefault(bet.operator, []).append(bet)
        return found

    def settle(self, coup: CoupResult) -> None:
        """Settle every accepted bet against the coup (resolved from its verified cards): one
        event per operator (its bets)."""
        self.flush()
        paytable = get_paytable(self.paytable)
        payoffs = {bet.value: payoff(bet, coup, paytable) for bet in paytable.offered}
        facts = CoupFacts(coup.outcome.value, coup.player_pair, coup.banker_pair)
        settled = [
            self._settled(facts, payoffs, paytable, operator, bets)
            for operator, bets in self._by_operator().items()
        ]
        for fact in settled:
            record(self, self.CoupSettled, fact)

    def _settled(
        self,
        coup: CoupFacts,
        payoffs: dict[str, Payoff],
        paytable: Paytable,
        operator: str,
        bets: list[Bet],
    ) -> CoupSettledFact:
        lines: list[SettledLine] = []
        staked = paid = 0
        for bet in bets:
            result = settle_stake(bet.amount, payoffs[bet.bet_type], paytable)
            lines.append(
                _new_tuple(  # SettledLine(...) without its Python-level __new__: 10,000 a coup
                    SettledLine,
                    (
                        bet.bet_id,
                        bet.bettor_id,
                        bet.bet_type,
                        result.result.value,
                        result.stake,
                        result.payout,
                        result.returned,
                    ),
                )
            )
            staked += result.stake
            paid += result.returned
        return CoupSettledFact(
            table_id=self.table_id,
            coup_id=self.coup_id,
            outcome=coup.outcome,
            player_pair=coup.player_pair,
            banker_pair=coup.banker_pair,
            lines=lines,
            staked=staked,
            paid=paid,
            currency=self.currency,
            operator=operator,
        )

    def settled_as(self) -> dict[BetKey, tuple[str, int]]:
        """Each settled bet's (result, payout) as it stands now (corrections included)."""
        results: dict[BetKey, tuple[str, int]] = self.__dict__.setdefault("results", {})
        return results

    def corrections_applied(self) -> set[UUID]:
        """The ids of the corrections of its result settled (each once)."""
        applied: set[UUID] = self.__dict__.setdefault("corrections", set())
        return applied

    def correct(self, correction_id: UUID, coup: CoupResult) -> None:
        """Settle every bet again on the corrected result ``coup`` (verified from its cards):
        one event per operator, a line per bet whose result or payout changes, its
        ``difference`` relative to what the bet returns now. Nothing if this correction was
        settled already."""
        if correction_id in self.corrections_applied():
            return
        paytable = get_paytable(self.paytable)
        payoffs = {bet.value: payoff(bet, coup, paytable) for bet in paytable.offered}
        settled_as = self.settled_as()
        facts: list[SettlementCorrectedFact] = []
        for operator, bets in self._by_operator().items():
            lines: list[CorrectedLine] = []
            staked = paid = 0
            for bet in bets:
                key = (operator, bet.bet_id)
                now = settle_stake(bet.amount, payoffs[bet.bet_type], paytable)
                before, before_payout = settled_as[key]
                returned = self.returned[key]
                if (now.result.value, now.payout) != (before, before_payout):
                    lines.append(
                        CorrectedLine(
                            bet.bet_id,
                            bet.bettor_id,
                            bet.bet_type,
                            bet.amount,
                            before,
                            before_payout,
                            now.result.value,
                            now.payout,
                            now.returned - returned,
                        )
                    )
                staked += now.stake
                paid += now.returned
            facts.append(
                SettlementCorrectedFact(
                    table_id=self.table_id,
                    coup_id=self.coup_id,
                    correction_id=correction_id,
                    outcome=coup.outcome.value,
                    player_pair=coup.player_pair,
                    banker_pair=coup.banker_pair,
                    lines=lines,
                    difference=sum(line.difference for line in lines),
                    staked=staked,
                    paid=paid,
                    currency=self.currency,
                    operator=operator,
                )
            )
        for fact in facts:
            record(self, self.SettlementCorrected, fact)

    def refund(self, supervisor_id: str, reason: str) -> None:
        """Refund every bet's stake, one event per operator (its bets); the adjustment is
        relative to what was already paid."""
        self.flush()
        settled = self.status is BookStatus.SETTLED
        refunds = []
        for operator, bets in self._by_operator().items():
            lines: list[RefundLine] = []
            refunded = 0
            for bet in bets:
                paid = self.returned.get((operator, bet.bet_id), 0) if settled else 0
                lines.append(RefundLine(bet.bet_id, bet.bettor_id, bet.amount, bet.amount - paid))
                refunded += bet.amount
            refunds.append(
                CoupRefundedFact(
                    table_id=self.table_id,
                    coup_id=self.coup_id,
                    supervisor_id=supervisor_id,
                    reason=reason,
                    lines=lines,
                    refunded=refunded,
                    currency=self.currency,
                    operator=operator,
                )
            )
        for refund in refunds:
            record(self, self.CoupRefunded, refund)

    def finished(self) -> FinishedBook | None:
        """The book as a :class:`FinishedBook` once settled or voided (else None)."""
        if self.status not in _FINISHED:
            return None
        return FinishedBook(self.id, self.coup_id, self.status, frozenset(self.opened))

    @property
    def bet_count(self) -> int:
        return len(self.bets)

    def settled_amounts(self, operator: str = HOUSE) -> Mapping[str, int]:
        """bet id -> amount returned to the bettor (after settlement), of one operator."""
        return {bet_id: paid for (op, bet_id), paid in self.returned.items() if op == operator}


register_stored_topics(BetBook)
