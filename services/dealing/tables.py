"""The Table aggregate: a table's settings, its shoe and which coup is in play.

The coups themselves are :class:`~services.dealing.coups.Coup` aggregates; the
table only records which one is current, so a table's history stays short.
Every event carries ``table_id``: the relay translates stored events into
contract messages without loading the aggregate.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, cast
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event
from eventsourcing.domain import Snapshot as BaseSnapshot

from services.shared.facts.dealing import (
    Limits,
    ShoeFinishedFact,
    ShoeRequestedFact,
    StudioCoupClearedFact,
    StudioCoupCorrectedFact,
    TableClosedFact,
    TableOpenedFact,
    TableReopenedFact,
)
from services.shared.facts.topics import record, register_stored_topics


class TableStatus(StrEnum):
    OPEN = "OPEN"
    CLOSING = "CLOSING"  # CloseTable received: the current coup is finished first
    CLOSED = "CLOSED"


class ShoeState(StrEnum):
    SHUFFLING = "SHUFFLING"  # ShuffleShoe sent, waiting for the burn
    IN_PLAY = "IN_PLAY"
    CLOSED = "CLOSED"


def table_aggregate_id(table_id: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"/punto-banco/dealing/tables/{table_id}")


def shoe_id_for(table_id: str, shoe_number: int) -> str:
    return f"{table_id}.shoe-{shoe_number}"


def coup_id_for(table_id: str, coup_number: int) -> str:
    return f"{table_id}.coup-{coup_number}"


class Table(Aggregate):
    """One table: settings, status, the shoe in play and the current coup."""

    class Opened(TableOpenedFact, Aggregate.Created):
        TOPIC = TableOpenedFact.STORED_TOPIC

    class Reopened(TableReopenedFact, Aggregate.Event):
        TOPIC = TableReopenedFact.STORED_TOPIC

        def apply(self, table: Table) -> None:
            table.status = TableStatus.OPEN
            table.close_reason = ""
            table._apply_settings(
                self.decks,
                self.paytable,
                self.limits,
                self.currency,
                self.betting_window_ms,
                self.cut_card_from_end,
                self.card_source,
            )

    class ShoeRequested(ShoeRequestedFact, Aggregate.Event):
        """A new shoe is asked of the shoe service (ShuffleShoe)."""

        TOPIC = ShoeRequestedFact.STORED_TOPIC

        def apply(self, table: Table) -> None:
            table.shoe_number += 1
            table.shoe_id = self.shoe_id
            table.shoe_state = ShoeState.SHUFFLING
            table.cut_card_index = None
            table.cut_card_reached = False

    class ShoeShuffled(Aggregate.Event):
        table_id: str
        shoe_id: str
        card_count: int
        cut_card_index: int

    class CutCardReached(Aggregate.Event):
        table_id: str
        shoe_id: str
        position: int

    class CoupStarted(Aggregate.Event):
        table_id: str
        coup_id: str
        coup_number: int
        shoe_id: str
        last_of_shoe: bool

    class CoupFinished(Aggregate.Event):
        table_id: str
        coup_id: str

    class ShoeFinished(ShoeFinishedFact, Aggregate.Event):
        """The shoe is done with (CloseShoe: the shoe service reveals its order)."""

        TOPIC = ShoeFinishedFact.STORED_TOPIC

        def apply(self, table: Table) -> None:
            table.shoe_state = ShoeState.CLOSED

    class StudioCoupCleared(StudioCoupClearedFact, Aggregate.Event):
        """A voided coup of a studio table: its shoe puts the coup's cards aside."""

        TOPIC = StudioCoupClearedFact.STORED_TOPIC

    class StudioCoupCorrected(StudioCoupCorrectedFact, Aggregate.Event):
        """A held studio coup corrected by a supervisor: its shoe deals the cards decided."""

        TOPIC = StudioCoupCorrectedFact.STORED_TOPIC

    class ClosingRequested(Aggregate.Event):
        table_id: str
        reason: str

    class Closed(TableClosedFact, Aggregate.Event):
        TOPIC = TableClosedFact.STORED_TOPIC

        def apply(self, table: Table) -> None:
            table.status = TableStatus.CLOSED
            table.close_reason = self.reason

    class Snapshot(BaseSnapshot):
        """A table's state at one version (a table's history grows with every coup)."""

        def mutate(self, aggregate: None) -> Table:
            table = cast(Table, super().mutate(aggregate))
            table.status = TableStatus(table.status)  # JSON gave plain strings back
            table.shoe_state = ShoeState(table.shoe_state)
            table.__dict__.setdefault("card_source", "rng")  # taken before studio tables
            return table

    @staticmethod
    def create_id(table_id: str, **_: Any) -> UUID:
        return table_aggregate_id(table_id)

    @event(Opened)
    def __init__(
        self,
        table_id: str,
        decks: int,
        paytable: str,
        limits: Limits,
        currency: str,
        betting_window_ms: int,
        cut_card_from_end: int,
        card_source: str,
    ) -> None:
        self.table_id = table_id
        self.status = TableStatus.OPEN
        self.close_reason = ""
        self.shoe_number = 0
        self.shoe_id: str | None = None
        self.shoe_state = ShoeState.CLOSED
        self.cut_card_index: int | None = None
        self.cut_card_reached = False
        self.coup_number = 0
        self.current_coup_id: str | None = None
        self.current_coup_last = False
        self._apply_settings(
            decks, paytable, limits, currency, betting_window_ms, cut_card_from_end, card_source
        )

    def _apply_settings(
        self,
        decks: int,
        paytable: str,
        limits: Limits,
        currency: str,
        betting_window_ms: int,
        cut_card_from_end: int,
        card_source: str,
    ) -> None:
        self.decks = decks
        self.paytable = paytable
        self.limits = limits
        self.currency = currency
        self.betting_window_ms = betting_window_ms
        self.cut_card_from_end = cut_card_from_end
        self.card_source = card_source

    def settings(self) -> dict[str, Any]:
        return {
            "decks": self.decks,
            "paytable": self.paytable,
            "limits": self.limits,
            "currency": self.currency,
            "betting_window_ms": self.betting_window_ms,
            "cut_card_from_end": self.cut_card_from_end,
            "card_source": self.card_source,
        }

    # -- commands ------------------------------------------------------------------
    def reopen(
        self,
        table_id: str,
        decks: int,
        paytable: str,
        limits: Limits,
        currency: str,
        betting_window_ms: int,
        cut_card_from_end: int,
        card_source: str,
    ) -> None:
        reopened = TableReopenedFact(
            table_id=table_id,
            decks=decks,
            paytable=paytable,
            limits=limits,
            currency=currency,
            betting_window_ms=betting_window_ms,
            cut_card_from_end=cut_card_from_end,
            card_source=card_source,
        )
        record(self, self.Reopened, reopened)

    def request_new_shoe(self) -> None:
        requested = ShoeRequestedFact(
            table_id=self.table_id,
            shoe_id=shoe_id_for(self.table_id, self.shoe_number + 1),
            decks=self.decks,
            cut_card_from_end=self.cut_card_from_end,
            card_source=self.card_source,
        )
        record(self, self.ShoeRequested, requested)

    def note_shuffle(self, shoe_id: str, card_count: int, cut_card_index: int) -> None:
        self._note_shuffle(
            table_id=self.table_id,
            shoe_id=shoe_id,
            card_count=card_count,
            cut_card_index=cut_card_index,
        )

    @event(ShoeShuffled)
    def _note_shuffle(
        self, table_id: str, shoe_id: str, card_count: int, cut_card_index: int
    ) -> None:
        self.cut_card_index = cut_card_index

    def note_cut_card(self, position: int) -> None:
        assert self.shoe_id is not None
        self._note_cut_card(table_id=self.table_id, shoe_id=self.shoe_id, position=position)

    @event(CutCardReached)
    def _note_cut_card(self, table_id: str, shoe_id: str, position: int) -> None:
        self.cut_card_reached = True

    def start_coup(self) -> str:
        """Start the next coup (the Coup aggregate is created by the caller); its id."""
        assert self.shoe_id is not None
        number = self.coup_number + 1
        coup_id = coup_id_for(self.table_id, number)
        self._start_coup(
            table_id=self.table_id,
            coup_id=coup_id,
            coup_number=number,
            shoe_id=self.shoe_id,
            last_of_shoe=self.cut_card_reached,
        )
        return coup_id

    @event(CoupStarted)
    def _start_coup(
        self, table_id: str, coup_id: str, coup_number: int, shoe_id: str, last_of_shoe: bool
    ) -> None:
        self.coup_number = coup_number
        self.current_coup_id = coup_id
        self.current_coup_last = last_of_shoe
        self.shoe_state = ShoeState.IN_PLAY

    def finish_coup(self) -> None:
        assert self.current_coup_id is not None
        self._finish_coup(table_id=self.table_id, coup_id=self.current_coup_id)

    @event(CoupFinished)
    def _finish_coup(self, table_id: str, coup_id: str) -> None:
        self.current_coup_id = None

    def finish_shoe(self) -> None:
        assert self.shoe_id is not None
        record(self, self.ShoeFinished, ShoeFinishedFact(self.table_id, self.shoe_id))

    def clear_studio_coup(self, coup_id: str, reason: str) -> None:
        assert self.shoe_id is not None
        cleared = StudioCoupClearedFact(self.table_id, self.shoe_id, coup_id, reason)
        record(self, self.StudioCoupCleared, cleared)

    def correct_studio_coup(self, coup_id: str, cards: list[str], reason: str) -> None:
        assert self.shoe_id is not None
        corrected = StudioCoupCorrectedFact(self.table_id, self.shoe_id, coup_id, cards, reason)
        record(self, self.StudioCoupCorrected, corrected)

    def request_close(self, reason: str) -> None:
        self._request_close(table_id=self.table_id, reason=reason)

    @event(ClosingRequested)
    def _request_close(self, table_id: str, reason: str) -> None:
        self.status = TableStatus.CLOSING
        self.close_reason = reason

    def close(self, reason: str) -> None:
        record(self, self.Closed, TableClosedFact(self.table_id, reason))

    # -- queries -------------------------------------------------------------------
    def shoe_needs_closing(self) -> bool:
        """True after the shoe's last coup (cut card out and last coup played)."""
        return self.current_coup_last


register_stored_topics(Table)
