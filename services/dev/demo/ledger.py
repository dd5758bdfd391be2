"""An independent ledger of one run: what was sent, accepted, rejected, settled and refunded.

Pure (no I/O): feed it every event seen on the topics with :meth:`Ledger.observe` and every
bet sent with :meth:`Ledger.expect`; :meth:`Ledger.problems` then says what went wrong:

- a bet settled twice (two distinct BetSettled events) or never;
- a settlement whose amounts differ from the recomputation: the coup is re-resolved from the
  cards in CoupResolved with :func:`services.shared.rules.tableau.resolve_coup` and the bet
  settled with :func:`services.shared.rules.settlement.settle_bet` and the table's paytable,
  independently of the settlement service;
- a CoupResolved that does not follow the tableau, a CoupSettled whose totals differ from its
  bets, a voided coup whose bets were not each refunded once (with the right adjustment), a
  closed shoe whose revealed order disagrees with a card drawn or with its commitment.

What was seen is the read side's history (:mod:`services.tools.history`: the messages go
through its ``MessageFeed``, the views the audit's stores give too); what only the demo knows
is in :mod:`services.dev.demo.answers` (the bets sent and every answer to them). The checks
are in :mod:`services.dev.demo.checks`, the views the ledger shows in
:mod:`services.dev.demo.records`. Redelivered messages (same ``event_id``, as an outbox relay
may republish after a crash) are counted but have no second effect here, exactly as the
services must treat them.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from contracts import (
    BetAccepted,
    BetRefunded,
    BetRejected,
    BetSettled,
    BettingOpened,
    Message,
)
from services.dev.demo.answers import Answers
from services.dev.demo.bettors import PlannedBet
from services.dev.demo.checks import (
    Problem,
    ProblemKind,
    check_bet,
    check_coup,
    check_shoe,
    recompute,
    shoe_order,
)
from services.dev.demo.records import Bets, BetState, Coups, CoupState, Lines, Shoes
from services.shared.rules.odds import full_shoe_odds
from services.shared.rules.paytable import BetType, get_paytable
from services.tools.history.codes import Severity
from services.tools.history.from_messages import MessageFeed
from services.tools.history.views import History

__all__ = [
    "Ledger",
    "Problem",
    "ProblemKind",
    "Severity",
    "Summary",
    "recompute",
    "rules_house_edge",
    "shoe_order",
]

EdgeProvider = Callable[[int, str], Mapping[str, Fraction]]
"""(decks, paytable name) -> house edge per bet type value (fraction of the stake)."""


@functools.lru_cache(maxsize=16)
def rules_house_edge(decks: int, paytable: str) -> Mapping[str, Fraction]:
    """Exact house edge per bet type for a fresh shoe of ``decks`` (rules' exact odds)."""
    odds = full_shoe_odds(decks, get_paytable(paytable))
    return {BetType(bet_type).value: edge for bet_type, edge in odds.house_edge.items()}


@dataclass(frozen=True, slots=True)
class Summary:
    """Counters for the live view and the final report."""

    tables_open: int
    coups_opened: int
    coups_resolved: int
    coups_voided: int
    outcomes: Mapping[str, int]
    naturals: int
    bets_sent: int
    bets_accepted: int
    bets_rejected: Mapping[str, int]
    bets_settled: int
    settled_by_type: Mapping[str, int]
    bets_refunded: int
    staked: int
    returned: int
    house_result: int
    expected_house_result: Fraction
    redeliveries: int
    shoes_shuffled: int
    shoes_closed: int
    errors: int
    warnings: int

    @property
    def rejected_total(self) -> int:
        return sum(self.bets_rejected.values())

    @property
    def house_edge_observed(self) -> Fraction | None:
        return Fraction(self.house_result, self.staked) if self.staked else None

    @property
    def house_edge_expected(self) -> Fraction | None:
        return self.expected_house_result / self.staked if self.staked else None


class Ledger:
    """What one run sent and saw; see the module docstring."""

    def __init__(self, edge: EdgeProvider = rules_house_edge) -> None:
        self._edge = edge
        self.history = History()
        self.feed = MessageFeed(self.history)
        self.answers = Answers()
        self.bets_sent = 0
        self._last_coup: tuple[str, str] | None = None
        self._settled: dict[str, BetSettled] = {}  # bet id -> its first settlement
        self._refunded_bets: set[str] = set()
        self._staked = 0
        self._returned = 0
        self._expected = Fraction(0)
        self._immediate: list[Problem] = []
        self._last_checks = (0, 0)
        self._lines: tuple[int, Lines] | None = None

    # ---- input ---------------------------------------------------------------------------

    def expect(self, bet: PlannedBet) -> None:
        """Record a PlaceBet sent, with the answer it should get."""
        self.bets_sent += 1
        self.answers.expect(bet)

    def observe(self, message: object) -> None:
        """Take in any message seen on the topics (others than the events are ignored)."""
        if not isinstance(message, Message):
            return
        first_acceptance = self._first_acceptance(message)
        if not self.feed.apply(message):
            return  # a redelivery: no second effect
        if isinstance(message, BetAccepted):
            self.answers.accepted(message, first_acceptance)
        elif isinstance(message, BetRejected):
            self.answers.rejected(message)
        elif isinstance(message, BetSettled):
            self.answers.bet(message.bet_id).named((message.table_id, message.coup_id))
            self._count_settled(message)
        elif isinstance(message, BetRefunded):
            self.answers.bet(message.bet_id).named((message.table_id, message.coup_id))
            self._count_refunded(message)
        elif isinstance(message, BettingOpened):
            self._last_coup = (message.table_id, message.coup_id)

    # ---- views ---------------------------------------------------------------------------

    @property
    def redeliveries(self) -> int:
        return self.feed.redeliveries

    @property
    def coups(self) -> Coups:
        """(table, coup) -> every coup or book seen."""
        return Coups(self.history)

    @property
    def bets(self) -> Bets:
        """Bet id -> every bet sent or named by a message."""
        return Bets(self.answers, self.history, self.lines)

    @property
    def shoes(self) -> Shoes:
        """Shoe id -> every shoe seen."""
        return Shoes(self.history)

    @property
    def last_coup(self) -> CoupState | None:
        """The coup whose betting opened last."""
        return None if self._last_coup is None else self.coups.get(self._last_coup)

    @property
    def closed_tables(self) -> set[str]:
        return {t.table_id for t in self.history.tables.values() if t.closed_at is not None}

    def lines(self) -> Lines:
        """Every settled and refunded line by bet (made again when a message came in)."""
        if self._lines is None or self._lines[0] != self.feed.sequence:
            self._lines = (self.feed.sequence, Lines(self.history))
        return self._lines[1]

    # ---- queries ---------------------------------------------------------------------------

    def coup(self, table_id: str, coup_id: str) -> CoupState:
        return CoupState(
            (table_id, coup_id),
            self.history.coups.get((table_id, coup_id)),
            self.history.books.get((table_id, coup_id)),
        )

    def coup_settled(self, table_id: str, coup_id: str) -> bool:
        state = self.coups.get((table_id, coup_id))
        return bool(state and (state.settled or state.refunded))

    def unanswered(self) -> list[str]:
        """Bet ids sent that got no answer yet."""
        return self.answers.unanswered()

    def unsettled(self) -> list[str]:
        """Accepted bets with neither a settlement nor a refund yet."""
        lines = self.lines()
        return [
            bet_id
            for bet_id, answers in self.answers.bets.items()
            if answers.accepted_in is not None
            and bet_id not in lines.settled
            and bet_id not in lines.refunded
        ]

    def rejections(self) -> dict[str, int]:
        """Bets refused, by reason: each bet counted once, by its standing answer (a refusal
        that does not use up the bet id, such as NO_SUCH_COUP, gives way to a later answer);
        each reuse of an id with other content counts as DUPLICATE_BET_ID."""
        counts: Counter[str] = Counter()
        for bet in self.answers.bets.values():
            if bet.accepted_in is None and bet.first_answer not in (None, "ACCEPTED"):
                counts[str(bet.first_answer)] += 1
            counts["DUPLICATE_BET_ID"] += len(
                {r.event_id for r in bet.rejections.values() if r.reason_code == "DUPLICATE_BET_ID"}
            )
        return {reason: count for reason, count in counts.items() if count}

    def summary(self, checks: bool = True) -> Summary:
        """Counters; with ``checks`` also the problems so far (costs a pass over every bet;
        without, ``errors`` and ``warnings`` are those of the last summary with checks)."""
        coups = list(self.history.coups.values())
        resolved = [c.resolved.fact for c in coups if c.resolved is not None]
        outcomes: Counter[str] = Counter(fact.outcome for fact in resolved)
        if checks:
            problems = self.problems(final=False)
            errors = sum(1 for p in problems if p.severity is Severity.ERROR)
            self._last_checks = (errors, len(problems) - errors)
        errors, warnings = self._last_checks
        tables = self.history.tables.values()
        return Summary(
            tables_open=sum(1 for t in tables if t.opened_at and t.closed_at is None),
            coups_opened=sum(1 for c in coups if c.opened_at or c.resolutions),
            coups_resolved=len(resolved),
            coups_voided=sum(1 for c in coups if c.voids),
            outcomes=dict(outcomes),
            naturals=sum(1 for fact in resolved if fact.natural),
            bets_sent=self.bets_sent,
            bets_accepted=sum(1 for b in self.answers.bets.values() if b.accepted_in is not None),
            bets_rejected=self.rejections(),
            bets_settled=len(self._settled),
            settled_by_type=dict(Counter(m.bet_type for m in self._settled.values()).most_common()),
            bets_refunded=len(self._refunded_bets),
            staked=self._staked,
            returned=self._returned,
            house_result=self._staked - self._returned,
            expected_house_result=self._expected,
            redeliveries=self.feed.redeliveries,
            shoes_shuffled=len(self.history.shoes),
            shoes_closed=sum(1 for s in self.history.shoes.values() if s.reveal is not None),
            errors=errors,
            warnings=warnings,
        )

    def problems(self, final: bool = True) -> list[Problem]:
        """Everything wrong so far. ``final``: the run is over, so what is still missing
        (a settlement, a refund, an answer) is a problem too."""
        found = [*self._immediate, *self.answers.problems]
        lines = self.lines()
        coups = self.coups
        for coup in coups.values():
            found.extend(check_coup(coup, lines, final))
        for answers in self.answers.bets.values():
            bet = BetState(answers, self.history, self.lines)
            found.extend(check_bet(bet, coups, self.history.tables, final))
        for shoe in self.shoes.values():
            found.extend(check_shoe(shoe))
        return found

    def errors(self, final: bool = True) -> list[Problem]:
        return [p for p in self.problems(final) if p.severity is Severity.ERROR]

    # ---- bookkeeping -----------------------------------------------------------------------

    def _first_acceptance(self, message: Message) -> tuple[str, int, str] | None:
        """(bet type, amount, coup) of the first acceptance of a BetAccepted's bet, if any."""
        if not isinstance(message, BetAccepted):
            return None
        where = self.answers.bets.get(message.bet_id)
        key = None if where is None else where.accepted_in
        book = None if key is None else self.history.books.get(key)
        bet = None if book is None else book.accepted.get(message.bet_id)
        return None if key is None or bet is None else (bet.bet_type, bet.amount, key[1])

    def _edge_of(self, table_id: str, bet_type: str) -> Fraction | None:
        table = self.history.tables.get(table_id)
        if table is None or not table.opened_at:
            return None
        return self._edge(table.settings.decks, table.settings.paytable).get(bet_type)

    def _count_settled(self, event: BetSettled) -> None:
        if event.bet_id in self._settled:
            return
        self._settled[event.bet_id] = event
        self._staked += event.stake
        self._returned += event.returned
        edge = self._edge_of(event.table_id, event.bet_type)
        if edge is not None:
            self._expected += edge * event.stake

    def _count_refunded(self, event: BetRefunded) -> None:
        if event.refunded != event.stake:
            self._immediate.append(
                Problem(
                    ProblemKind.WRONG_REFUND,
                    f"BetRefunded says refunded={event.refunded} of a stake of {event.stake}",
                    event.bet_id,
                    event.coup_id,
                )
            )
        if event.bet_id in self._refunded_bets:
            return
        self._refunded_bets.add(event.bet_id)
        settled = self._settled.get(event.bet_id)
        if settled is not None:  # a settled coup reversed: undo its result
            self._staked -= settled.stake
            self._returned -= settled.returned
            edge = self._edge_of(event.table_id, settled.bet_type)
            if edge is not None:
                self._expected -= edge * settled.stake
