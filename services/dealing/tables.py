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


Limits = dict[str, dict[str, int]]
"""Per bet type name: {"minimum": int, "maximum": int} in minor units."""


class Table(Aggregate):
    """One table: settings, status, the shoe in play and the current coup."""

    class Opened(Aggregate.Created):
        table_id: str
        decks: int
        paytable: str
        limits: Limits
        currency: str
        betting_window_ms: int
        cut_card_from_end: int

    class Reopened(Aggregate.Event):
        table_id: str
        decks: int
        paytable: str
        limits: Limits
        currency: str
        betting_window_ms: int
        cut_card_from_end: int

    class ShoeRequested(Aggregate.Event):
        """A new shoe is asked of the shoe service (ShuffleShoe)."""

        table_id: str
        shoe_id: str
        decks: int
        cut_card_from_end: int

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

    class ShoeFinished(Aggregate.Event):
        """The shoe is done with (CloseShoe: the shoe service reveals its order)."""

        table_id: str
        shoe_id: str

    class ClosingRequested(Aggregate.Event):
        table_id: str
        reason: str

    class Closed(Aggregate.Event):
        table_id: str
        reason: str

    class Snapshot(BaseSnapshot):
        """A table's state at one version (a table's history grows with every coup)."""

        def mutate(self, aggregate: None) -> Table:
            table = cast(Table, super().mutate(aggregate))
            table.status = TableStatus(table.status)  # JSON gave plain strings back
            table.shoe_state = ShoeState(table.shoe_state)
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
            decks, paytable, limits, currency, betting_window_ms, cut_card_from_end
        )

    def _apply_settings(
        self,
        decks: int,
        paytable: str,
        limits: Limits,
        currency: str,
        betting_window_ms: int,
        cut_card_from_end: int,
    ) -> None:
        self.decks = decks
        self.paytable = paytable
        self.limits = limits
        self.currency = currency
        self.betting_window_ms = betting_window_ms
        self.cut_card_from_end = cut_card_from_end

    def settings(self) -> dict[str, Any]:
        return {
            "decks": self.decks,
            "paytable": self.paytable,
            "limits": self.limits,
            "currency": self.currency,
            "betting_window_ms": self.betting_window_ms,
            "cut_card_from_end": self.cut_card_from_end,
        }

    # -- commands ------------------------------------------------------------------
    @event(Reopened)
    def reopen(
        self,
        table_id: str,
        decks: int,
        paytable: str,
        limits: Limits,
        currency: str,
        betting_window_ms: int,
        cut_card_from_end: int,
    ) -> None:
        self.status = TableStatus.OPEN
        self.close_reason = ""
        self._apply_settings(
            decks, paytable, limits, currency, betting_window_ms, cut_card_from_end
        )

    def request_new_shoe(self) -> None:
        number = self.shoe_number + 1
        self._request_shoe(
            table_id=self.table_id,
            shoe_id=shoe_id_for(self.table_id, number),
            decks=self.decks,
            cut_card_from_end=self.cut_card_from_end,
        )

    @event(ShoeRequested)
    def _request_shoe(
        self, table_id: str, shoe_id: str, decks: int, cut_card_from_end: int
    ) -> None:
        self.shoe_number += 1
        self.shoe_id = shoe_id
        self.shoe_state = ShoeState.SHUFFLING
        self.cut_card_index = None
        self.cut_card_reached = False

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
        self._finish_shoe(table_id=self.table_id, shoe_id=self.shoe_id)

    @event(ShoeFinished)
    def _finish_shoe(self, table_id: str, shoe_id: str) -> None:
        self.shoe_state = ShoeState.CLOSED

    def request_close(self, reason: str) -> None:
        self._request_close(table_id=self.table_id, reason=reason)

    @event(ClosingRequested)
    def _request_close(self, table_id: str, reason: str) -> None:
        self.status = TableStatus.CLOSING
        self.close_reason = reason

    def close(self, reason: str) -> None:
        self._close(table_id=self.table_id, reason=reason)

    @event(Closed)
    def _close(self, table_id: str, reason: str) -> None:
        self.status = TableStatus.CLOSED
        self.close_reason = reason

    # -- queries -------------------------------------------------------------------
    def shoe_needs_closing(self) -> bool:
        """True after the shoe's last coup (cut card out and last coup played)."""
        return self.current_coup_last
