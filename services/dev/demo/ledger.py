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

The checks themselves are in :mod:`services.dev.demo.audit`, the records in
:mod:`services.dev.demo.records`. Redelivered messages (same ``event_id``, as an outbox relay may
republish after a crash) are counted but have no second effect here, exactly as the services
must treat them.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any
from uuid import UUID

from contracts import (
    BetAccepted,
    BetRefunded,
    BetRejected,
    BetSettled,
    BettingClosed,
    BettingOpened,
    CardDrawn,
    CardsBurned,
    CoupRefunded,
    CoupResolved,
    CoupSettled,
    CoupVoided,
    ShoeClosed,
    ShoeShuffled,
    TableClosed,
    TableOpened,
)
from services.dev.demo.audit import (
    NON_BINDING,
    Problem,
    ProblemKind,
    Severity,
    check_bet,
    check_coup,
    check_shoe,
    recompute,
    shoe_order,
)
from services.dev.demo.bettors import PlannedBet
from services.dev.demo.records import BetState, CoupState, ShoeState
from services.shared.rules.odds import full_shoe_odds
from services.shared.rules.paytable import BetType, get_paytable

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
        self.tables: dict[str, TableOpened] = {}
        self.closed_tables: set[str] = set()
        self.coups: dict[tuple[str, str], CoupState] = {}
        self.bets: dict[str, BetState] = {}
        self.shoes: dict[str, ShoeState] = {}
        self.last_coup: CoupState | None = None
        self.seen: set[UUID] = set()
        self.redeliveries = 0
        self.bets_sent = 0
        self._settled_bets: set[str] = set()
        self._refunded_bets: set[str] = set()
        self._staked = 0
        self._returned = 0
        self._expected = Fraction(0)
        self._immediate: list[Problem] = []
        self._last_checks = (0, 0)

    # ---- input ---------------------------------------------------------------------------

    def expect(self, bet: PlannedBet) -> None:
        """Record a PlaceBet sent, with the answer it should get."""
        self.bets_sent += 1
        self._bet(bet.bet_id).planned.append(bet)

    def observe(self, message: object) -> None:
        """Take in any message seen on the topics (others than the events below are ignored)."""
        event_id = getattr(message, "event_id", None)
        if isinstance(event_id, UUID):
            if event_id in self.seen:
                self.redeliveries += 1
                return
            self.seen.add(event_id)
        handler = _HANDLERS.get(type(message))
        if handler is not None:
            handler(self, message)

    # ---- queries ---------------------------------------------------------------------------

    def coup(self, table_id: str, coup_id: str) -> CoupState:
        key = (table_id, coup_id)
        state = self.coups.get(key)
        if state is None:
            state = self.coups[key] = CoupState(table_id, coup_id)
        return state

    def coup_settled(self, table_id: str, coup_id: str) -> bool:
        state = self.coups.get((table_id, coup_id))
        return bool(state and (state.settled or state.refunded))

    def unanswered(self) -> list[str]:
        """Bet ids sent that got no answer yet."""
        return [
            state.bet_id
            for state in self.bets.values()
            if state.planned and state.first_answer is None
        ]

    def unsettled(self) -> list[str]:
        """Accepted bets with neither a settlement nor a refund yet."""
        return [
            state.bet_id
            for state in self.bets.values()
            if state.accepted is not None and not state.settlements and not state.refunds
        ]

    def rejections(self) -> dict[str, int]:
        """Bets refused, by reason: each bet counted once, by its standing answer (a refusal
        that does not use up the bet id, such as NO_SUCH_COUP, gives way to a later answer);
        each reuse of an id with other content counts as DUPLICATE_BET_ID."""
        counts: Counter[str] = Counter()
        for bet in self.bets.values():
            if bet.accepted is None and bet.first_answer not in (None, "ACCEPTED"):
                counts[str(bet.first_answer)] += 1
            counts["DUPLICATE_BET_ID"] += len(
                {r.event_id for r in bet.rejections.values() if r.reason_code == "DUPLICATE_BET_ID"}
            )
        return {reason: count for reason, count in counts.items() if count}

    def summary(self, checks: bool = True) -> Summary:
        """Counters; with ``checks`` also the problems so far (costs a pass over every bet;
        without, ``errors`` and ``warnings`` are those of the last summary with checks)."""
        resolved = [c for c in self.coups.values() if c.resolved is not None]
        outcomes: Counter[str] = Counter(c.resolved.outcome for c in resolved if c.resolved)
        if checks:
            problems = self.problems(final=False)
            errors = sum(1 for p in problems if p.severity is Severity.ERROR)
            self._last_checks = (errors, len(problems) - errors)
        errors, warnings = self._last_checks
        return Summary(
            tables_open=len(set(self.tables) - self.closed_tables),
            coups_opened=sum(1 for c in self.coups.values() if c.coup_number is not None),
            coups_resolved=len(resolved),
            coups_voided=sum(1 for c in self.coups.values() if c.voided is not None),
            outcomes=dict(outcomes),
            naturals=sum(1 for c in resolved if c.resolved and c.resolved.natural),
            bets_sent=self.bets_sent,
            bets_accepted=sum(1 for b in self.bets.values() if b.accepted is not None),
            bets_rejected=self.rejections(),
            bets_settled=len(self._settled_bets),
            bets_refunded=len(self._refunded_bets),
            staked=self._staked,
            returned=self._returned,
            house_result=self._staked - self._returned,
            expected_house_result=self._expected,
            redeliveries=self.redeliveries,
            shoes_shuffled=len(self.shoes),
            shoes_closed=sum(1 for s in self.shoes.values() if s.closed is not None),
            errors=errors,
            warnings=warnings,
        )

    def problems(self, final: bool = True) -> list[Problem]:
        """Everything wrong so far. ``final``: the run is over, so what is still missing
        (a settlement, a refund, an answer) is a problem too."""
        found = list(self._immediate)
        for coup in self.coups.values():
            found.extend(check_coup(coup, self.bets, final))
        for bet in self.bets.values():
            found.extend(check_bet(bet, self.coups, self.tables, final))
        for shoe in self.shoes.values():
            found.extend(check_shoe(shoe))
        return found

    def errors(self, final: bool = True) -> list[Problem]:
        return [p for p in self.problems(final) if p.severity is Severity.ERROR]

    # ---- handlers --------------------------------------------------------------------------

    def _bet(self, bet_id: str) -> BetState:
        state = self.bets.get(bet_id)
        if state is None:
            state = self.bets[bet_id] = BetState(bet_id)
        return state

    def _on_table_opened(self, event: TableOpened) -> None:
        self.tables[event.table_id] = event
        self.closed_tables.discard(event.table_id)

    def _on_table_closed(self, event: TableClosed) -> None:
        self.closed_tables.add(event.table_id)

    def _on_betting_opened(self, event: BettingOpened) -> None:
        coup = self.coup(event.table_id, event.coup_id)
        coup.coup_number = event.coup_number
        coup.shoe_id = event.shoe_id
        coup.terms = coup.terms or self.tables.get(event.table_id)
        self.last_coup = coup

    def _on_betting_closed(self, event: BettingClosed) -> None:
        self.coup(event.table_id, event.coup_id).betting_closed = True

    def _on_coup_resolved(self, event: CoupResolved) -> None:
        coup = self.coup(event.table_id, event.coup_id)
        coup.resolutions[event.event_id] = event
        if coup.resolved is None:
            coup.resolved = event
        coup.coup_number = event.coup_number

    def _on_coup_voided(self, event: CoupVoided) -> None:
        self.coup(event.table_id, event.coup_id).voided = event

    def _on_bet_accepted(self, event: BetAccepted) -> None:
        bet = self._bet(event.bet_id)
        if bet.accepted is not None:
            if (bet.accepted.amount, bet.accepted.bet_type, bet.accepted.coup_id) != (
                event.amount,
                event.bet_type,
                event.coup_id,
            ):
                self._immediate.append(
                    Problem(
                        ProblemKind.ANSWER_CHANGED,
                        f"accepted again with other terms: {event.bet_type} {event.amount} "
                        f"(first {bet.accepted.bet_type} {bet.accepted.amount})",
                        event.bet_id,
                        event.coup_id,
                    )
                )
            return
        bet.accepted = event
        if bet.first_answer is None or bet.first_answer in NON_BINDING:
            bet.first_answer = "ACCEPTED"
        self.coup(event.table_id, event.coup_id).bet_ids.append(event.bet_id)

    def _on_bet_rejected(self, event: BetRejected) -> None:
        bet = self._bet(event.bet_id)
        code = event.reason_code
        binding = code not in NON_BINDING and code != "DUPLICATE_BET_ID"
        if binding and bet.first_answer not in (None, code, *NON_BINDING):
            self._immediate.append(
                Problem(
                    ProblemKind.ANSWER_CHANGED,
                    f"answered {code} after {bet.first_answer}",
                    event.bet_id,
                    event.coup_id,
                )
            )
        bet.rejections[event.event_id] = event
        if bet.first_answer is None or (bet.first_answer in NON_BINDING and binding):
            bet.first_answer = code

    def _on_bet_settled(self, event: BetSettled) -> None:
        bet = self._bet(event.bet_id)
        bet.settlements[event.event_id] = event
        if event.bet_id not in self._settled_bets:
            self._settled_bets.add(event.bet_id)
            self._staked += event.stake
            self._returned += event.returned
            table = self.tables.get(event.table_id)
            if table is not None:
                edge = self._edge(table.decks, table.paytable).get(event.bet_type)
                if edge is not None:
                    self._expected += edge * event.stake

    def _on_coup_settled(self, event: CoupSettled) -> None:
        self.coup(event.table_id, event.coup_id).settled[event.event_id] = event

    def _on_bet_refunded(self, event: BetRefunded) -> None:
        bet = self._bet(event.bet_id)
        bet.refunds[event.event_id] = event
        if event.bet_id not in self._refunded_bets:
            self._refunded_bets.add(event.bet_id)
            if event.bet_id in self._settled_bets:  # a settled coup reversed: undo its result
                settled = next(iter(bet.settlements.values()))
                self._staked -= settled.stake
                self._returned -= settled.returned
                table = self.tables.get(event.table_id)
                if table is not None:
                    edge = self._edge(table.decks, table.paytable).get(settled.bet_type)
                    if edge is not None:
                        self._expected -= edge * settled.stake

    def _on_coup_refunded(self, event: CoupRefunded) -> None:
        self.coup(event.table_id, event.coup_id).refunded[event.event_id] = event

    def _on_shoe_shuffled(self, event: ShoeShuffled) -> None:
        shoe = self._shoe(event.shoe_id, event.table_id)
        shoe.card_count = event.card_count
        shoe.cut_card_index = event.cut_card_index
        shoe.commitment = event.commitment

    def _on_cards_burned(self, event: CardsBurned) -> None:
        shoe = self._shoe(event.shoe_id, event.table_id)
        for positioned in event.burned:
            self._place(shoe, positioned.position, positioned.card)
        shoe.drawn = max(shoe.drawn, event.next_position)

    def _on_card_drawn(self, event: CardDrawn) -> None:
        shoe = self._shoe(event.shoe_id, event.table_id)
        self._place(shoe, event.position, event.card)
        shoe.drawn = max(shoe.drawn, event.position + 1)

    def _on_shoe_closed(self, event: ShoeClosed) -> None:
        self._shoe(event.shoe_id, event.table_id).closed = event

    def _shoe(self, shoe_id: str, table_id: str) -> ShoeState:
        shoe = self.shoes.get(shoe_id)
        if shoe is None:
            shoe = self.shoes[shoe_id] = ShoeState(shoe_id, table_id)
        return shoe

    def _place(self, shoe: ShoeState, position: int, card: str) -> None:
        earlier = shoe.cards.setdefault(position, card)
        if earlier != card:
            self._immediate.append(
                Problem(
                    ProblemKind.REVEAL_MISMATCH,
                    f"shoe {shoe.shoe_id} position {position} handed out as {earlier} and {card}",
                )
            )


_HANDLERS: dict[type[object], Callable[[Ledger, Any], None]] = {
    TableOpened: Ledger._on_table_opened,
    TableClosed: Ledger._on_table_closed,
    BettingOpened: Ledger._on_betting_opened,
    BettingClosed: Ledger._on_betting_closed,
    CoupResolved: Ledger._on_coup_resolved,
    CoupVoided: Ledger._on_coup_voided,
    BetAccepted: Ledger._on_bet_accepted,
    BetRejected: Ledger._on_bet_rejected,
    BetSettled: Ledger._on_bet_settled,
    CoupSettled: Ledger._on_coup_settled,
    BetRefunded: Ledger._on_bet_refunded,
    CoupRefunded: Ledger._on_coup_refunded,
    ShoeShuffled: Ledger._on_shoe_shuffled,
    CardsBurned: Ledger._on_cards_burned,
    CardDrawn: Ledger._on_card_drawn,
    ShoeClosed: Ledger._on_shoe_closed,
}
