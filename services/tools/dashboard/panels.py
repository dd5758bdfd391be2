"""What the dashboard shows of each table, from the read side's views and its own counters.

The table, its shoe and its coups are the read side's views (:mod:`services.tools.history`,
kept to a window: the last coups and shoes of each table); beside them the dashboard counts
what no view keeps once a coup is forgotten: money overall and per bet type (less refunds of
voided coups), bets accepted, refused (by reason), settled and refunded, outcomes, the rate
of bets and the settlement latency, and a studio table's device
(:mod:`services.tools.dashboard.device`: its reads and holds). Each message is counted once
(the feed skips what it saw already).
"""

from __future__ import annotations

from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field
from datetime import datetime
from functools import singledispatchmethod

from contracts import (
    BetAccepted,
    BetRefunded,
    BetRejected,
    BetSettled,
    BettingOpened,
    CoupRefunded,
    CoupResolved,
    CoupSettled,
    CoupVoided,
    IncidentRaised,
    Message,
    ShoeShuffled,
    StudioRead,
    StudioShoeOpened,
    TableOpened,
)
from services.shared.rules.cards import ALL_CARDS
from services.tools.dashboard.device import HOLD, DevicePanel
from services.tools.dashboard.roads import Outcome, RoadCoup
from services.tools.history.views import History, TableSettings, bet_key

LATENCIES_KEPT = 200
COUPS_KEPT = 200  # coups per table kept in the views (and their settled bets)
SHOES_KEPT = 2  # shoes per table kept in the views (the one in play and the last)
_CARD_INDEX = {card.code: i for i, card in enumerate(ALL_CARDS)}
_DEFAULT_TERMS = TableSettings(6, "standard", "", {})


@dataclass
class Money:
    staked: int = 0
    paid: int = 0

    @property
    def house_result(self) -> int:
        return self.staked - self.paid


@dataclass
class CoupPanel:
    """A coup as the page shows it (derived from its views)."""

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
class ShoePanel:
    """A shoe as the page shows it (derived from its view). A studio shoe's cut card is
    where its device read it: unknown (None) until then."""

    shoe_id: str
    decks: int
    card_count: int
    cut_card_index: int | None
    counts: list[int]  # cards left per card (``ALL_CARDS`` order: the odds' counts by card)
    dealt: int  # positions out of the shoe (shown + burned + drawn)
    cut_card_out: bool
    closed: bool
    studio: bool

    @property
    def cards_left(self) -> int:
        return max(0, self.card_count - self.dealt)

    @property
    def cards_to_cut(self) -> int | None:
        return None if self.cut_card_index is None else max(0, self.cut_card_index - self.dealt)


@dataclass
class TableView:
    """One table: its views in ``history`` and the dashboard's counters."""

    table_id: str
    history: History = field(repr=False, compare=False, default_factory=History)
    card_source: str = "rng"  # TableOpened's: ``studio`` tables are dealt by their device
    device: DevicePanel | None = None  # a studio table's (made by its first read or hold)
    shoe_id: str | None = None  # the shoe in play
    shoes: int = 0
    coup_id: str | None = None  # the coup in play
    last_coup_id: str | None = None  # the last resolved coup (shown while the next one bets)
    coups_resolved: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    money: Money = field(default_factory=Money)
    by_bet: dict[str, Money] = field(default_factory=dict)
    settled_bets: OrderedDict[str, dict[str, tuple[str, int, int]]] = field(
        default_factory=OrderedDict
    )  # by coup (the last COUPS_KEPT coups), then by bet: for refunds
    bets_accepted: int = 0
    bets_settled: int = 0
    bets_refunded: int = 0
    rejections: Counter[str] = field(default_factory=Counter)
    coups_voided: int = 0
    latencies: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCIES_KEPT))
    accepted_times: deque[tuple[float, int]] = field(default_factory=deque)
    kept_coups: OrderedDict[str, None] = field(default_factory=OrderedDict)
    kept_shoes: OrderedDict[str, None] = field(default_factory=OrderedDict)

    # ---- from the views ---------------------------------------------------------------------
    @property
    def terms(self) -> TableSettings:
        view = self.history.tables.get(self.table_id)
        return view.settings if view is not None and view.opened_at else _DEFAULT_TERMS

    @property
    def status(self) -> str:
        view = self.history.tables.get(self.table_id)
        return "closed" if view is not None and view.closed_at is not None else "open"

    @property
    def coup(self) -> CoupPanel | None:
        return None if self.coup_id is None else self._coup(self.coup_id)

    @property
    def last_coup(self) -> CoupPanel | None:
        return None if self.last_coup_id is None else self._coup(self.last_coup_id)

    def _coup(self, coup_id: str) -> CoupPanel | None:
        view = self.history.coups.get((self.table_id, coup_id))
        if view is None:
            return None
        book = self.history.books.get((self.table_id, coup_id))
        settled = None
        if book is not None:
            settled = next((s for s in book.settlements if s.staked is not None), None)
        panel = CoupPanel(view.coup_id, view.coup_number, view.shoe_id)
        panel.closes_at = view.closes_at or None
        panel.phase = (
            "voided"
            if view.voids
            else "settled"
            if settled is not None
            else "resolved"
            if view.resolutions
            else "dealing"
            if view.betting_closed_at is not None or view.dealt
            else "betting"
        )
        resolution = view.resolved
        if resolution is not None:
            fact = resolution.fact
            panel.player, panel.banker = list(fact.player_cards), list(fact.banker_cards)
            panel.player_total, panel.banker_total = fact.player_total, fact.banker_total
            panel.outcome = fact.outcome
        else:
            for dealt in view.dealt:
                hand = panel.player if dealt.side == "PLAYER" else panel.banker
                if len(hand) < dealt.index_in_hand:
                    hand.append(dealt.card)
        if book is not None:
            panel.bets = len(book.accepted)
            panel.staked = sum(book.staked.values())
        if settled is not None:
            panel.house_result = settled.house_result
        return panel

    @property
    def shoe(self) -> ShoePanel | None:
        key = (self.table_id, self.shoe_id or "")
        view = None if self.shoe_id is None else self.history.shoes.get(key)
        if view is None:
            return None
        counts = [view.decks] * len(ALL_CARDS)
        for _position, card in view.handed_out():
            index = _CARD_INDEX.get(card)
            if index is not None and counts[index] > 0:
                counts[index] -= 1
        studio = view.studio
        return ShoePanel(
            shoe_id=view.shoe_id,
            decks=view.decks,
            card_count=view.card_count,
            cut_card_index=view.cut_card_index if studio is None else view.cut_card_position,
            counts=counts,
            dealt=view.cards_out,
            cut_card_out=view.cut_card_position is not None,
            closed=view.reveal is not None if studio is None else studio.closed is not None,
            studio=studio is not None,
        )

    @property
    def road(self) -> list[RoadCoup]:
        """The resolved coups of the shoe in play (all kept coups when no shoe is known)."""
        view = self.history.tables.get(self.table_id)
        road = []
        for coup_id in [] if view is None else view.coups:
            coup = self.history.coups[(self.table_id, coup_id)]
            if coup.resolved is None or (self.shoe_id is not None and coup.shoe_id != self.shoe_id):
                continue
            fact = coup.resolved.fact
            outcome: Outcome = (
                "P" if fact.outcome == "PLAYER" else "B" if fact.outcome == "BANKER" else "T"
            )
            total = fact.banker_total if fact.outcome == "BANKER" else fact.player_total
            road.append(RoadCoup(outcome, fact.player_pair, fact.banker_pair, fact.natural, total))
        return road

    # ---- counting a new message (after the views took it in) --------------------------------
    @singledispatchmethod
    def count(self, message: Message, timestamp: float, now: float) -> None:
        """Messages only the views keep."""

    @count.register
    def _table_opened(self, m: TableOpened, timestamp: float, now: float) -> None:
        self.card_source = m.card_source

    @count.register
    def _shuffled(self, m: ShoeShuffled, timestamp: float, now: float) -> None:
        self.shoe_id = m.shoe_id
        self.shoes += 1

    @count.register
    def _studio_shoe_opened(self, m: StudioShoeOpened, timestamp: float, now: float) -> None:
        self.shoe_id = m.shoe_id
        self.shoes += 1

    @count.register
    def _studio_read(self, m: StudioRead, timestamp: float, now: float) -> None:
        self.studio_device().take(m)

    @count.register
    def _incident(self, m: IncidentRaised, timestamp: float, now: float) -> None:
        if m.code == HOLD:
            self.studio_device().hold(m, self.coups_resolved, self.coups_voided)

    def studio_device(self) -> DevicePanel:
        if self.device is None:
            self.device = DevicePanel()
        return self.device

    @count.register
    def _betting_opened(self, m: BettingOpened, timestamp: float, now: float) -> None:
        self.coup_id = m.coup_id

    @count.register
    def _resolved(self, m: CoupResolved, timestamp: float, now: float) -> None:
        view = self.history.coups.get((self.table_id, m.coup_id))
        if view is None or len(view.resolutions) != 1:
            return  # a second result of the coup (a fault the audit reports) counts once
        if self.coup_id != m.coup_id:
            self.coup_id = m.coup_id  # its BettingOpened was not seen
        self.last_coup_id = m.coup_id
        self.coups_resolved += 1
        self.outcomes[m.outcome] += 1

    @count.register
    def _voided(self, m: CoupVoided, timestamp: float, now: float) -> None:
        self.coups_voided += 1

    @count.register
    def _accepted(self, m: BetAccepted, timestamp: float, now: float) -> None:
        self.bets_accepted += 1
        if self.accepted_times and self.accepted_times[-1][0] == now:
            self.accepted_times[-1] = (now, self.accepted_times[-1][1] + 1)
        else:
            self.accepted_times.append((now, 1))

    @count.register
    def _rejected(self, m: BetRejected, timestamp: float, now: float) -> None:
        self.rejections[m.reason_code] += 1

    @count.register
    def _bet_settled(self, m: BetSettled, timestamp: float, now: float) -> None:
        coup = self.settled_bets.get(m.coup_id)
        if coup is None:
            coup = self.settled_bets[m.coup_id] = {}
            while len(self.settled_bets) > COUPS_KEPT:
                self.settled_bets.popitem(last=False)
        key = bet_key(m.operator, m.bet_id)  # each operator has its own bet ids
        if key in coup:
            return  # settled twice: counted once (the audit reports it)
        coup[key] = (m.bet_type, m.stake, m.returned)
        self.bets_settled += 1
        money = self.by_bet.setdefault(m.bet_type, Money())
        money.staked += m.stake
        money.paid += m.returned

    @count.register
    def _coup_settled(self, m: CoupSettled, timestamp: float, now: float) -> None:
        book = self.history.books.get((self.table_id, m.coup_id))
        totals = [] if book is None else [s for s in book.settlements if s.staked is not None]
        if len(totals) != 1:
            return  # settled twice: counted once
        self.money.staked += m.staked
        self.money.paid += m.paid
        coup = self.history.coups.get((self.table_id, m.coup_id))
        resolution = None if coup is None else coup.resolved
        if resolution is not None:
            resolved_at = datetime.fromisoformat(resolution.at).timestamp()
            self.latencies.append(max(0.0, timestamp - resolved_at))

    @count.register
    def _bet_refunded(self, m: BetRefunded, timestamp: float, now: float) -> None:
        self.bets_refunded += 1
        settled = self.settled_bets.get(m.coup_id, {}).pop(bet_key(m.operator, m.bet_id), None)
        if settled is not None:
            bet_type, stake, returned = settled
            money = self.by_bet.get(bet_type)
            if money is not None:
                money.staked -= stake
                money.paid -= returned

    @count.register
    def _coup_refunded(self, m: CoupRefunded, timestamp: float, now: float) -> None:
        book = self.history.books.get((self.table_id, m.coup_id))
        if book is None or len([r for r in book.refunds if r.refunded is not None]) != 1:
            return
        settled = next((s for s in book.settlements if s.staked is not None), None)
        if settled is not None and settled.staked is not None and settled.paid is not None:
            self.money.staked -= settled.staked
            self.money.paid -= settled.paid

    # ---- a bounded window -------------------------------------------------------------------
    def keep(self, coup_id: str | None, shoe_id: str | None) -> None:
        """Note the coup and shoe a message named; forget the oldest beyond the window."""
        history = self.history
        if coup_id is not None and coup_id not in self.kept_coups:
            self.kept_coups[coup_id] = None
            while len(self.kept_coups) > COUPS_KEPT:
                old, _ = self.kept_coups.popitem(last=False)
                history.forget_coup(self.table_id, old)
        if shoe_id is not None and shoe_id not in self.kept_shoes:
            self.kept_shoes[shoe_id] = None
            while len(self.kept_shoes) > SHOES_KEPT:
                old, _ = self.kept_shoes.popitem(last=False)
                history.forget_shoe(self.table_id, old)
        refused = history.desk_rejections.get(self.table_id)
        while refused and len(refused) > COUPS_KEPT:
            del refused[next(iter(refused))]
