"""What the streaming audit needs of the store feed: the aggregates' ids, and a shoe's draws.

:class:`StreamFeed` is the :class:`~services.tools.history.from_store.StoreFeed` that notes
the originator id of every shoe, coup and bet book it reads (a checked one is dropped by
id, and read again by id when a late event brings it back) and forgets one on request. It
keeps no desk refusal of a coup whose book is not open in the window (a late bet on a coup
checked already, a bet for no coup): no check of a coup reads it then, and a flood of them
would hold memory in proportion to the history.
:func:`drawn_of` gives what a shoe handed out by position, as the shoe check records it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.shared.rules.cards import Card
from services.tools.history.from_store import StoreFeed
from services.tools.history.views import History, ShoeView

Key = tuple[str, str]


class StreamFeed(StoreFeed):
    """A StoreFeed that knows its aggregates' ids: ``(table, shoe|coup) -> originator id``."""

    def __init__(self, history: History) -> None:
        self.shoe_oids: dict[Key, bytes] = {}
        self.coup_oids: dict[Key, bytes] = {}
        self.book_oids: dict[Key, bytes] = {}
        self.reopened: Callable[[str, Key, int], None] | None = None
        """``reopened(store, (table, coup), nid)`` before a coup or book is opened."""
        self.last_draw: dict[str, str] = {}
        """table -> the coup of the last draw the shoe store recorded for it."""
        super().__init__(history)

    def _owner(self, oid: bytes) -> tuple[str, str | None, str | None]:
        return self.history.owners[oid]

    def _shuffled(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        super()._shuffled(oid, nid, d)
        table_id, shoe_id, _ = self._owner(oid)
        self.shoe_oids[(table_id, str(shoe_id))] = oid

    def _studio_opened(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        super()._studio_opened(oid, nid, d)
        table_id, shoe_id, _ = self._owner(oid)
        self.shoe_oids[(table_id, str(shoe_id))] = oid

    def _drawn(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        super()._drawn(oid, nid, d)
        self.last_draw[d["table_id"]] = d["coup_id"]

    def _betting_opened(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        if self.reopened is not None:
            self.reopened("dealing", (d["table_id"], d["coup_id"]), nid)
        super()._betting_opened(oid, nid, d)
        table_id, _, coup_id = self._owner(oid)
        self.coup_oids[(table_id, str(coup_id))] = oid

    def _book_opened(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        if self.reopened is not None:
            self.reopened("settlement", (d["table_id"], d["coup_id"]), nid)
        super()._book_opened(oid, nid, d)
        table_id, _, coup_id = self._owner(oid)
        self.book_oids[(table_id, str(coup_id))] = oid

    def _desk_refused(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        if (d["table_id"], d["coup_id"]) in self.history.books:
            super()._desk_refused(oid, nid, d)

    def forget(self, oid: bytes) -> None:
        """Drop what the feed holds about one aggregate (it was checked)."""
        self._books.pop(oid, None)
        self.history.owners.pop(oid, None)


Drawn = dict[int, tuple[str, str]]


def drawn_of(
    shoe: ShoeView, card: Callable[[str], Card], known: tuple[int, bool, Drawn] | None = None
) -> tuple[int, bool, Drawn]:
    """position -> (coup id, card) as the shoe handed them out so far (the first draw of a
    position counts); nothing when the order or the shown card cannot be read (the shoe
    check then hands out nothing either). Returns ``(draws read, revealed, drawn)``: given
    back as ``known``, only the draws since are added (-1 draws read: unreadable)."""
    revealed = shoe.reveal is not None
    if known is not None and known[1] == revealed and known[0] <= len(shoe.draws):
        done, _, drawn = known
        if done < 0:
            return known
    else:
        done, drawn = 0, {}
        order = shoe.reveal.order if shoe.reveal is not None else shoe.order
        try:
            if order is not None:
                for code in order:
                    card(code)
            elif shoe.burn is not None:
                card(shoe.burn.shown)
        except ValueError:
            return -1, revealed, {}
    for draw in shoe.draws[done:]:
        first = draw.first_position
        for offset, code in enumerate(draw.cards):
            drawn.setdefault(first + offset, (draw.coup_id, code))
    return len(shoe.draws), revealed, drawn
