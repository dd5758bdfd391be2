"""The dashboard's read model: every table's state, built only from the messages on Kafka.

Fed with decoded :mod:`contracts` messages (``apply``), from the shoe, table
and bet event topics and the dead letters; it never reads a store and never
imports a service. ``snapshot()`` is the JSON the page renders.

Per table: status, the shoe (cards left, cut card position, the remaining
composition from ShoeShuffled's deck count minus the shown, burned and drawn
cards), the current coup and its phase (betting, dealing, resolved, settled,
voided), the shoe's roads (:mod:`services.tools.dashboard.roads`), money (staked,
paid, house result, realised hold overall and per bet type, from CoupSettled /
BetSettled, less refunds of voided coups), the theoretical edge of each bet
(full shoe) and its exact edge for the cards left (``services.shared.rules.odds``;
``favourable`` when it is negative, i.e. the bet favours the players),
bets accepted / rejected (by reason) / settled, bets per second and the
settlement latency (CoupResolved's time to the Kafka timestamp of CoupSettled).
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

from contracts import (
    BetAccepted,
    BetRefunded,
    BetRejected,
    BetSettled,
    BettingClosed,
    BettingOpened,
    CardDealt,
    CardDrawn,
    CardsBurned,
    CoupRefunded,
    CoupResolved,
    CoupSettled,
    CoupVoided,
    CutCardReached,
    DeadLetter,
    Message,
    ShoeClosed,
    ShoeShuffled,
    TableClosed,
    TableOpened,
)
from services.shared.rules.cards import RANKS
from services.shared.rules.odds import MIN_CARDS, exact_odds, full_shoe_odds
from services.shared.rules.paytable import get_paytable
from services.tools.dashboard.roads import Outcome, RoadCoup, scoreboard

BET_TYPES = ("player", "banker", "tie", "player_pair", "banker_pair")
RATE_WINDOW = 10.0  # seconds over which bets per second are counted
LATENCIES_KEPT = 200
COUPS_KEPT = 200  # coups per table whose settled bets are kept (duplicates, refunds)
DEAD_LETTERS_KEPT = 10
_RANK_INDEX = {rank: i for i, rank in enumerate(RANKS)}


@lru_cache(maxsize=256)
def _edges(counts: tuple[int, ...], paytable: str) -> dict[str, float] | None:
    if sum(counts) < MIN_CARDS:
        return None
    odds = exact_odds(counts, get_paytable(paytable))
    return {bet.value: float(edge) for bet, edge in odds.house_edge.items()}


@lru_cache(maxsize=32)
def _theoretical(decks: int, paytable: str) -> dict[str, float]:
    odds = full_shoe_odds(decks, get_paytable(paytable))
    return {bet.value: float(edge) for bet, edge in odds.house_edge.items()}


@dataclass
class ShoeView:
    shoe_id: str
    decks: int
    card_count: int
    cut_card_index: int
    counts: list[int]
    dealt: int = 0  # positions out of the shoe (shown + burned + drawn)
    cut_card_out: bool = False
    closed: bool = False

    @property
    def cards_left(self) -> int:
        return max(0, self.card_count - self.dealt)

    def take(self, card: str, position: int) -> None:
        index = _RANK_INDEX.get(card[:1])
        if index is not None and self.counts[index] > 0:
            self.counts[index] -= 1
        self.dealt = max(self.dealt, position + 1)


@dataclass
class CoupView:
    coup_id: str
    number: int
    shoe_id: str
    phase: str = "betting"
    closes_at: str | None = None
    player: list[str] = field(default_factory=list)
    banker: list[str] = field(default_factory=list)
    player_total: int | None = None
    banker_total: int | None = None
    outcome: str | None = None
    bets: int = 0
    staked: int = 0
    house_result: int | None = None


@dataclass
class Money:
    staked: int = 0
    paid: int = 0

    @property
    def house_result(self) -> int:
        return self.staked - self.paid


@dataclass
class TableView:
    table_id: str
    status: str = "open"
    paytable: str = "standard"
    decks: int = 6
    currency: str = ""
    betting_window_ms: int = 0
    cut_card_from_end: int = 0
    shoe: ShoeView | None = None
    shoes: int = 0
    coup: CoupView | None = None
    last_coup: CoupView | None = None  # the last resolved coup (shown while the next one bets)
    road: list[RoadCoup] = field(default_factory=list)  # the current shoe's coups
    road_ids: list[str] = field(default_factory=list)
    coups_resolved: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    money: Money = field(default_factory=Money)
    by_bet: dict[str, Money] = field(default_factory=dict)
    settled_coups: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    settled_bets: OrderedDict[str, dict[str, tuple[str, int, int]]] = field(
        default_factory=OrderedDict
    )  # by coup (the last COUPS_KEPT coups), then by bet: for duplicates and refunds
    bets_accepted: int = 0
    bets_settled: int = 0
    bets_refunded: int = 0
    rejections: Counter[str] = field(default_factory=Counter)
    coups_voided: int = 0
    resolved_at: dict[str, float] = field(default_factory=dict)
    latencies: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCIES_KEPT))
    accepted_times: deque[tuple[float, int]] = field(default_factory=deque)


class DashboardModel:
    """All tables; ``apply`` each message, ``snapshot`` for the page. Not thread-safe."""

    def __init__(self, clock: Any = time.time) -> None:
        self.tables: dict[str, TableView] = {}
        self.dead_letters = 0
        self.recent_dead_letters: deque[dict[str, str]] = deque(maxlen=DEAD_LETTERS_KEPT)
        self.messages = 0
        self.version = 0
        self.clock = clock
        self.started = clock()

    def table(self, table_id: str) -> TableView:
        view = self.tables.get(table_id)
        if view is None:
            view = self.tables[table_id] = TableView(table_id)
        return view

    # ---- applying messages ----------------------------------------------------------------

    def apply(self, message: Message, timestamp: float | None = None) -> None:
        """Take one message into account; ``timestamp`` = its Kafka timestamp (seconds)."""
        self.messages += 1
        self.version += 1
        now = self.clock()
        if isinstance(message, DeadLetter):
            self.dead_letters += 1
            self.recent_dead_letters.append(
                {
                    "service": message.service,
                    "topic": message.original_topic,
                    "error": message.error[:200],
                    "at": message.occurred_at.isoformat(timespec="seconds"),
                }
            )
            return
        table_id = getattr(message, "table_id", None)
        if not isinstance(table_id, str):
            return
        table = self.table(table_id)
        handler = _HANDLERS.get(type(message))
        if handler is not None:
            handler(self, table, message, timestamp if timestamp is not None else now, now)

    def _table_opened(self, t: TableView, m: TableOpened, ts: float, now: float) -> None:
        t.status = "open"
        t.paytable = m.paytable
        t.decks = m.decks
        t.currency = m.currency
        t.betting_window_ms = m.betting_window_ms
        t.cut_card_from_end = m.cut_card_from_end

    def _table_closed(self, t: TableView, m: TableClosed, ts: float, now: float) -> None:
        t.status = "closed"

    def _shuffled(self, t: TableView, m: ShoeShuffled, ts: float, now: float) -> None:
        t.shoe = ShoeView(
            m.shoe_id, m.decks, m.card_count, m.cut_card_index, [4 * m.decks] * len(RANKS)
        )
        t.shoes += 1
        t.road = []
        t.road_ids = []

    def _burned(self, t: TableView, m: CardsBurned, ts: float, now: float) -> None:
        shoe = t.shoe
        if shoe is None or shoe.shoe_id != m.shoe_id:
            return
        shoe.take(m.shown_card, 0)
        for positioned in m.burned:
            shoe.take(positioned.card, positioned.position)
        shoe.dealt = max(shoe.dealt, m.next_position)

    def _drawn(self, t: TableView, m: CardDrawn, ts: float, now: float) -> None:
        if t.shoe is not None and t.shoe.shoe_id == m.shoe_id:
            t.shoe.take(m.card, m.position)

    def _cut(self, t: TableView, m: CutCardReached, ts: float, now: float) -> None:
        if t.shoe is not None and t.shoe.shoe_id == m.shoe_id:
            t.shoe.cut_card_out = True

    def _shoe_closed(self, t: TableView, m: ShoeClosed, ts: float, now: float) -> None:
        if t.shoe is not None and t.shoe.shoe_id == m.shoe_id:
            t.shoe.closed = True

    def _betting_opened(self, t: TableView, m: BettingOpened, ts: float, now: float) -> None:
        t.coup = CoupView(m.coup_id, m.coup_number, m.shoe_id, closes_at=m.closes_at.isoformat())

    def _betting_closed(self, t: TableView, m: BettingClosed, ts: float, now: float) -> None:
        if t.coup is not None and t.coup.coup_id == m.coup_id and t.coup.phase == "betting":
            t.coup.phase = "dealing"

    def _dealt(self, t: TableView, m: CardDealt, ts: float, now: float) -> None:
        coup = t.coup
        if coup is None or coup.coup_id != m.coup_id:
            return
        coup.phase = "dealing"
        hand = coup.player if m.side == "PLAYER" else coup.banker
        if len(hand) < m.card_index_in_hand:
            hand.append(m.card)

    def _resolved(self, t: TableView, m: CoupResolved, ts: float, now: float) -> None:
        if m.coup_id in t.road_ids or m.coup_id in t.resolved_at:
            return  # a duplicate after a relay restart
        coup = t.coup
        if coup is None or coup.coup_id != m.coup_id:
            coup = t.coup = CoupView(m.coup_id, m.coup_number, m.shoe_id)
        coup.phase = "resolved"
        coup.player = list(m.player_cards)
        coup.banker = list(m.banker_cards)
        coup.player_total, coup.banker_total = m.player_total, m.banker_total
        coup.outcome = m.outcome
        t.last_coup = coup
        t.coups_resolved += 1
        t.outcomes[m.outcome] += 1
        t.resolved_at[m.coup_id] = m.occurred_at.timestamp()
        outcome: Outcome = "P" if m.outcome == "PLAYER" else "B" if m.outcome == "BANKER" else "T"
        total = m.banker_total if m.outcome == "BANKER" else m.player_total
        if t.shoe is None or t.shoe.shoe_id == m.shoe_id:
            t.road.append(RoadCoup(outcome, m.player_pair, m.banker_pair, m.natural, total))
            t.road_ids.append(m.coup_id)

    def _voided(self, t: TableView, m: CoupVoided, ts: float, now: float) -> None:
        t.coups_voided += 1
        if t.coup is not None and t.coup.coup_id == m.coup_id:
            t.coup.phase = "voided"

    def _accepted(self, t: TableView, m: BetAccepted, ts: float, now: float) -> None:
        t.bets_accepted += 1
        if t.accepted_times and t.accepted_times[-1][0] == now:
            t.accepted_times[-1] = (now, t.accepted_times[-1][1] + 1)
        else:
            t.accepted_times.append((now, 1))
        if t.coup is not None and t.coup.coup_id == m.coup_id:
            t.coup.bets += 1
            t.coup.staked += m.amount

    def _rejected(self, t: TableView, m: BetRejected, ts: float, now: float) -> None:
        t.rejections[m.reason_code] += 1

    def _bet_settled(self, t: TableView, m: BetSettled, ts: float, now: float) -> None:
        coup = t.settled_bets.get(m.coup_id)
        if coup is None:
            coup = t.settled_bets[m.coup_id] = {}
            while len(t.settled_bets) > COUPS_KEPT:
                t.settled_bets.popitem(last=False)
        if m.bet_id in coup:
            return
        coup[m.bet_id] = (m.bet_type, m.stake, m.returned)
        t.bets_settled += 1
        money = t.by_bet.setdefault(m.bet_type, Money())
        money.staked += m.stake
        money.paid += m.returned

    def _coup_settled(self, t: TableView, m: CoupSettled, ts: float, now: float) -> None:
        if m.coup_id in t.settled_coups:
            return
        t.settled_coups[m.coup_id] = (m.bets, m.staked, m.paid)
        t.money.staked += m.staked
        t.money.paid += m.paid
        resolved = t.resolved_at.pop(m.coup_id, None)
        if resolved is not None:
            t.latencies.append(max(0.0, ts - resolved))
        if t.coup is not None and t.coup.coup_id == m.coup_id:
            t.coup.phase = "settled"
            t.coup.house_result = m.house_result

    def _bet_refunded(self, t: TableView, m: BetRefunded, ts: float, now: float) -> None:
        t.bets_refunded += 1
        settled = t.settled_bets.get(m.coup_id, {}).pop(m.bet_id, None)
        if settled is not None:
            bet_type, stake, returned = settled
            money = t.by_bet.get(bet_type)
            if money is not None:
                money.staked -= stake
                money.paid -= returned

    def _coup_refunded(self, t: TableView, m: CoupRefunded, ts: float, now: float) -> None:
        settled = t.settled_coups.pop(m.coup_id, None)
        if settled is not None:
            _bets, staked, paid = settled
            t.money.staked -= staked
            t.money.paid -= paid

    # ---- the page's data --------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        now = self.clock()
        tables = [self._table_snapshot(t, now) for t in sorted(self.tables.values(), key=_order)]
        return {
            "version": self.version,
            "messages": self.messages,
            "tables": tables,
            "dead_letters": self.dead_letters,
            "recent_dead_letters": list(self.recent_dead_letters),
            "bets_per_second": round(sum(t["bets_per_second"] for t in tables), 2),
            "bets_accepted": sum(t.bets_accepted for t in self.tables.values()),
            "bets_settled": sum(t.bets_settled for t in self.tables.values()),
            "rejections": dict(
                sum((t.rejections for t in self.tables.values()), Counter[str]()).most_common()
            ),
        }

    def _table_snapshot(self, t: TableView, now: float) -> dict[str, Any]:
        while t.accepted_times and t.accepted_times[0][0] < now - RATE_WINDOW:
            t.accepted_times.popleft()
        window = min(RATE_WINDOW, max(1.0, now - self.started))
        rate = sum(count for _at, count in t.accepted_times) / window
        theoretical = _theoretical(t.decks, t.paytable) if t.paytable else {}
        shoe = t.shoe
        remaining = None
        if shoe is not None and not shoe.closed:
            remaining = _edges(tuple(shoe.counts), t.paytable)
        bets = []
        for name in BET_TYPES:
            money = t.by_bet.get(name, Money())
            edge_now = None if remaining is None else remaining.get(name)
            bets.append(
                {
                    "bet_type": name,
                    "theoretical_edge": theoretical.get(name),
                    "edge_now": edge_now,
                    "favourable": edge_now is not None and edge_now < 0,
                    "staked": money.staked,
                    "house_result": money.house_result,
                    "hold": _ratio(money.house_result, money.staked),
                }
            )
        latencies = sorted(t.latencies)
        coup = t.coup
        return {
            "table_id": t.table_id,
            "status": t.status,
            "paytable": t.paytable,
            "decks": t.decks,
            "currency": t.currency,
            "shoe": None
            if shoe is None
            else {
                "shoe_id": shoe.shoe_id,
                "number": t.shoes,
                "card_count": shoe.card_count,
                "cards_left": shoe.cards_left,
                "cut_card_index": shoe.cut_card_index,
                "cards_to_cut": max(0, shoe.cut_card_index - shoe.dealt),
                "cut_card_out": shoe.cut_card_out,
                "closed": shoe.closed,
            },
            "coup": None if coup is None else dict(coup.__dict__),
            "last_coup": None if t.last_coup is None else dict(t.last_coup.__dict__),
            "coups_resolved": t.coups_resolved,
            "coups_voided": t.coups_voided,
            "outcomes": {k: t.outcomes.get(k, 0) for k in ("BANKER", "PLAYER", "TIE")},
            "roads": scoreboard(t.road),
            "staked": t.money.staked,
            "paid": t.money.paid,
            "house_result": t.money.house_result,
            "hold": _ratio(t.money.house_result, t.money.staked),
            "bets": bets,
            "bets_accepted": t.bets_accepted,
            "bets_settled": t.bets_settled,
            "bets_refunded": t.bets_refunded,
            "rejections": dict(t.rejections.most_common()),
            "bets_per_second": round(rate, 2),
            "latency": {
                "last": t.latencies[-1] if t.latencies else None,
                "p50": _quantile(latencies, 0.5),
                "p95": _quantile(latencies, 0.95),
                "count": len(latencies),
            },
        }


def _order(table: TableView) -> tuple[int, str]:
    return (0 if table.status == "open" else 1, table.table_id)


def _ratio(numerator: int, denominator: int) -> float | None:
    return float(Fraction(numerator, denominator)) if denominator else None


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return values[min(len(values) - 1, int(q * len(values)))]


_HANDLERS: Mapping[type, Any] = {
    TableOpened: DashboardModel._table_opened,
    TableClosed: DashboardModel._table_closed,
    ShoeShuffled: DashboardModel._shuffled,
    CardsBurned: DashboardModel._burned,
    CardDrawn: DashboardModel._drawn,
    CutCardReached: DashboardModel._cut,
    ShoeClosed: DashboardModel._shoe_closed,
    BettingOpened: DashboardModel._betting_opened,
    BettingClosed: DashboardModel._betting_closed,
    CardDealt: DashboardModel._dealt,
    CoupResolved: DashboardModel._resolved,
    CoupVoided: DashboardModel._voided,
    BetAccepted: DashboardModel._accepted,
    BetRejected: DashboardModel._rejected,
    BetSettled: DashboardModel._bet_settled,
    CoupSettled: DashboardModel._coup_settled,
    BetRefunded: DashboardModel._bet_refunded,
    CoupRefunded: DashboardModel._coup_refunded,
}

__all__ = ["BET_TYPES", "DashboardModel", "TableView"]
