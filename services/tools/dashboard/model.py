"""The dashboard's read model: every table's state, built only from the messages on Kafka.

Fed with decoded :mod:`contracts` messages (``apply``), from the shoe, table and bet event
topics, the studio reads, the incidents (only a studio shoe's holds, ``STUDIO_HOLD``, are
taken) and the dead letters; it never reads a store and never imports a service. The
messages go through the read side's ``MessageFeed`` into its views (tables, shoes, coups,
bet books: :mod:`services.tools.history`), kept to a window per table (the last
``COUPS_KEPT`` coups, the last shoes, a bounded set of event ids for spotting
redeliveries), and the dashboard's counters (:mod:`services.tools.dashboard.panels`).
``snapshot()`` is the JSON the page renders.

Per table: status, the shoe (cards left, cut card position: a studio shoe's is unknown until
its device reads it, the remaining composition from the shoe's deck count minus the shown,
burned and drawn cards), a studio table's device (:mod:`services.tools.dashboard.device`;
none for a software shoe's table), the current coup and its
phase (betting, dealing, resolved, settled, voided), the shoe's roads
(:mod:`services.tools.dashboard.roads`), money (staked, paid, house result, realised hold
overall and per bet type, from CoupSettled / BetSettled, less refunds of voided coups), the
theoretical edge of each bet type of the table's paytable (full shoe) and its exact edge for
the cards left (``services.shared.rules.odds``, from the count of each card left; ``favourable``
when it is negative, i.e. the bet favours the players) beside its realised hold, bets accepted
/ rejected (by reason) / settled, bets per second and the settlement latency (CoupResolved's
time to the Kafka timestamp of CoupSettled).
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Iterable
from fractions import Fraction
from functools import lru_cache
from typing import Any

from contracts import DeadLetter, IncidentRaised, Message
from services.shared.rules.odds import MIN_CARDS, exact_odds, full_shoe_odds
from services.shared.rules.paytable import PAYTABLES, STANDARD, get_paytable
from services.tools.dashboard.device import HOLD, DevicePanel
from services.tools.dashboard.panels import COUPS_KEPT, Money, TableView
from services.tools.dashboard.roads import scoreboard
from services.tools.history.from_messages import MessageFeed
from services.tools.history.views import History

RATE_WINDOW = 10.0  # seconds over which bets per second are counted
DEAD_LETTERS_KEPT = 10
EVENT_IDS_KEPT = 100_000  # event ids remembered for spotting a relay's redeliveries


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


def bet_types(paytable: str, played: Iterable[str] = ()) -> list[str]:
    """The rows of a table's bets panel: its paytable's bet types (the standard's while it is
    not known), then any other bet type ``played`` there."""
    offered = [bet.value for bet in PAYTABLES.get(paytable, STANDARD).offered]
    return offered + sorted(set(played) - set(offered))


class DashboardModel:
    """All tables; ``apply`` each message, ``snapshot`` for the page. Not thread-safe."""

    def __init__(self, clock: Any = time.time) -> None:
        self.history = History()
        self.feed = MessageFeed(self.history, remember=EVENT_IDS_KEPT)
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
            view = self.tables[table_id] = TableView(table_id, self.history)
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
        if isinstance(message, IncidentRaised) and message.code != HOLD:
            return  # only a studio shoe's holds are shown
        table = self.table(table_id)
        if not self.feed.apply(message):
            return  # seen already (a relay's redelivery)
        table.count(message, timestamp if timestamp is not None else now, now)
        table.keep(getattr(message, "coup_id", None), getattr(message, "shoe_id", None))

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
        terms = t.terms
        theoretical = _theoretical(terms.decks, terms.paytable) if terms.paytable else {}
        shoe = t.shoe
        remaining = None
        if shoe is not None and not shoe.closed:
            remaining = _edges(tuple(shoe.counts), terms.paytable)
        bets = []
        for name in bet_types(terms.paytable, t.by_bet):
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
        device = t.device
        if device is None and t.card_source == "studio":
            device = DevicePanel()  # no read yet
        coup, last_coup = t.coup, t.last_coup
        return {
            "table_id": t.table_id,
            "status": t.status,
            "paytable": terms.paytable,
            "decks": terms.decks,
            "currency": terms.currency,
            "shoe": None
            if shoe is None
            else {
                "shoe_id": shoe.shoe_id,
                "number": t.shoes,
                "card_count": shoe.card_count,
                "cards_left": shoe.cards_left,
                "cut_card_index": shoe.cut_card_index,
                "cards_to_cut": shoe.cards_to_cut,
                "cut_card_out": shoe.cut_card_out,
                "closed": shoe.closed,
                "studio": shoe.studio,
            },
            "device": None
            if device is None
            else device.snapshot(now, t.coups_resolved, t.coups_voided),
            "coup": None if coup is None else dict(coup.__dict__),
            "last_coup": None if last_coup is None else dict(last_coup.__dict__),
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


__all__ = ["COUPS_KEPT", "DashboardModel", "TableView", "bet_types"]
