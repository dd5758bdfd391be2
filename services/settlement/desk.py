"""The BetDesk aggregate: bets that have no coup's book to go to (yet).

Bets and dealing's events travel on different topics, so a bet may arrive just
before the ``BettingOpened`` of the coup it names. Such a bet (for a known,
open table) is *held* here and judged when the table's next coup opens: by the
book if it is that coup, else refused with NO_SUCH_COUP. The desk also records
refusals that have no book to go to (no such table, no such coup).

Bets held in one unit of work are recorded as ONE ``BetsHeld`` event (``draft_hold``
then ``flush``, as a book records its answers): a flood of bets that overtook its
coup's ``BettingOpened`` costs one event, not one per bet. ``BetHeld`` (one bet) is
what earlier stores hold; it is still read. Held bets are the house's (they predate
operators); a refusal names the bet's operator. Refusals likewise: one ``BetsRefused``
event per coup id and operator per unit of work (``reject`` then ``flush``); earlier
versions recorded a ``BetRejected`` per bet, still read.

The desk is also where a bet naming a settled or voided coup is answered: a finished book
takes nothing more, so a flood of late bets never makes a book longer, and the desk (a
few fields, snapshotted) costs the same however many came before.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from services.shared.facts.legacy import DeskBetHeldFact
from services.shared.facts.settlement import (
    HOUSE,
    AnswerLine,
    DeskRefusedFact,
    DeskRejectedFact,
    HeldLine,
)
from services.shared.facts.topics import record, register_stored_topics


def held_line(
    coup_id: str,
    bet_id: str,
    bettor_id: str,
    bet_type: str,
    amount: str,
    currency: str,
    placed_at: datetime,
) -> HeldLine:
    """A held bet as the desk keeps and records it."""
    return HeldLine(coup_id, bet_id, bettor_id, bet_type, amount, currency, placed_at.isoformat())


@lru_cache(maxsize=4096)
def desk_aggregate_id(table_id: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"/punto-banco/settlement/desks/{table_id}")


class BetDesk(Aggregate):
    """One per table id named by bets."""

    class Started(Aggregate.Created):
        table_id: str

    class BetHeld(DeskBetHeldFact, Aggregate.Event):
        TOPIC = DeskBetHeldFact.STORED_TOPIC

    class BetsHeld(Aggregate.Event):
        table_id: str
        lines: list[HeldLine]

    class BetsReleased(Aggregate.Event):
        bet_ids: list[str]

    class BetRejected(DeskRejectedFact, Aggregate.Event):
        """A bet refused with no book to record it (its fields: the bet as received):
        replayed, no longer recorded (:class:`BetsRefused`)."""

        TOPIC = DeskRejectedFact.STORED_TOPIC

    class BetsRefused(DeskRefusedFact, Aggregate.Event):
        """One unit's refusals of one coup id and operator (each line: the bet as received)."""

        TOPIC = DeskRefusedFact.STORED_TOPIC

    @staticmethod
    def create_id(table_id: str, **_: Any) -> UUID:
        return desk_aggregate_id(table_id)

    @event(Started)
    def __init__(self, table_id: str) -> None:
        self.table_id = table_id
        self.held: dict[str, HeldLine] = {}  # from a snapshot: lists (see release_all)

    @event(BetHeld)
    def _held_one(
        self,
        table_id: str,
        coup_id: str,
        bet_id: str,
        bettor_id: str,
        bet_type: str,
        amount: str,
        currency: str,
        placed_at: datetime,
    ) -> None:
        """A bet held on its own (stores written before BetsHeld): replayed, no longer
        recorded. The parameters are the recorded event's fields."""
        line = held_line(coup_id, bet_id, bettor_id, bet_type, amount, currency, placed_at)
        self.held[bet_id] = line

    def draft_hold(self, line: HeldLine) -> None:
        """Hold a bet now (see :func:`held_line`); :meth:`flush` records this unit's holds
        as one BetsHeld event."""
        self.held[line.bet_id] = line
        self.__dict__.setdefault("_draft", []).append(line)  # snapshots may predate it

    def flush(self) -> None:
        """Record the bets held since the last flush as one BetsHeld event, and the refusals
        as one BetsRefused event per coup id and operator."""
        lines = self.__dict__.get("_draft")
        if lines:
            self._draft: list[HeldLine] = []
            self._hold_lines(table_id=self.table_id, lines=lines)
        refusals = self.__dict__.pop("_refusals", None)
        for (coup_id, operator), (refused, placed) in (refusals or {}).items():
            fact = DeskRefusedFact(self.table_id, coup_id, refused, placed, operator)
            record(self, self.BetsRefused, fact)

    @event(BetsHeld)
    def _hold_lines(self, table_id: str, lines: list[HeldLine]) -> None:
        for line in lines:
            self.held[line.bet_id] = line

    def release_all(self) -> list[HeldLine]:
        """Take every held bet out (in the order they came) to be judged now."""
        self.flush()  # holds of this unit first: the record says held, then released
        held = [HeldLine._make(line) for line in self.held.values()]  # a snapshot's: lists
        if held:
            self._release(bet_ids=[line.bet_id for line in held])
        return held

    @event(BetsReleased)
    def _release(self, bet_ids: list[str]) -> None:
        for bet_id in bet_ids:
            self.held.pop(bet_id, None)

    def reject(
        self,
        table_id: str,
        coup_id: str,
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
        """Refuse a bet of this table (``table_id``: the desk's); :meth:`flush` records it."""
        assert table_id == self.table_id, (table_id, self.table_id)
        line = AnswerLine(bet_id, bettor_id, bet_type, amount, currency, reason_code, message)
        refusals = self.__dict__.setdefault("_refusals", {})
        lines, placed = refusals.setdefault((coup_id, operator), ([], []))
        lines.append(line)
        placed.append(None if placed_at is None else placed_at.isoformat())


register_stored_topics(BetDesk)
