"""The streaming audit's window: what is open, what is complete, checked and dropped.

Every check is about one shoe, coup, bet book or table, so the audit holds only what is
still open. A coup is complete once every store read has moved ``LAG`` coups of its table
past it (each service handles a table's coups in order: dealing opened coup n+2 only after
n was decided; settlement opened the book of n+2 after it settled n; the shoe drew for n+2
after n): it is then checked with its book, and both are dropped. A shoe is checked and
dropped once the shoe store and dealing are two shoes further at its table and none of its
coups is open. Open state is thus bounded by the tables (a few coups and shoes each), not
by the history.

A checked coup leaves a small ``Done`` behind while a late event may still concern it
(a supervisor may void a resolved coup within the void window, and settlement refunds it):
a row of its aggregates brings it back (``StreamAudit._revive``): what its check counted is
taken back, its rows are read again from the stores (``StoreReader.rows_of``), and it is
checked again with what came since. ``Done`` entries older than ``revive_within`` (stream
time) are forgotten; a row naming one after that is an unreadable event (names nothing
known), as any row about a coup the audit never saw.

Findings are kept per shoe, coup and book, and given in the order of the whole-history
audit: shoes, coups, the decisions warning, books, coups without a book.
"""

from __future__ import annotations

from collections import defaultdict

from services.tools.audit.window_checks import END, REVIVE_WITHIN, Key, WindowChecks

__all__ = ["LAG", "REVIVE_WITHIN", "SHOE_LAG", "Window"]

LAG = 2
"""Coups of a table every store must be past a coup before it is checked and dropped."""
SHOE_LAG = 2
"""Shoes of a table the shoe store and dealing must be past a shoe before it is dropped."""


class Window(WindowChecks):
    """Open coups, books and shoes of one audit; check and drop what is complete."""

    # -- after each batch -----------------------------------------------------------------
    def advance(self, final: bool = False) -> None:
        """Check and drop every coup and shoe that is complete (``final``: everything)."""
        history = self.ctx.history
        for key in history.shoes:
            if key not in self._shoe_seq:
                if key in self._reference:
                    self._shoe_seq[key] = -1
                    continue
                self._shoes_of[key[0]] += 1
                self._shoe_seq[key] = self._shoes_of[key[0]]
                self._latest_shoe[key[0]] = key[1]
        self.books_seen = self.books_seen or bool(history.books)
        for name, held in (
            ("coups", len(history.coups)),
            ("books", len(history.books)),
            ("shoes", len(history.shoes)),
        ):
            self.peak[name] = max(self.peak[name], held)
        by_table: dict[str, list[int]] = defaultdict(list)
        for coup in history.coups.values():
            by_table[coup.table_id].append(coup.notification_id)
        fronts = self._fronts()
        for table_id, nids in by_table.items():
            nids.sort()
            front = END if final else min(front[table_id] for front in fronts)
            within = sum(1 for nid in nids if nid <= front)
            self._dealing_shoe[table_id] = history.coups[self._key_of(table_id, nids[-1])].shoe_id
            for nid in nids[: len(nids) if final else max(0, within - LAG)]:
                self._finish_coup(self._key_of(table_id, nid))
        if final:
            for key in sorted(history.books, key=lambda k: history.books[k].notification_id):
                self._finish_book(key)
        for key in sorted(history.shoes, key=self._shoe_seq.__getitem__):
            if final or self._shoe_done(key):
                self._finish_shoe(key)
        self._forget_old()

    def _key_of(self, table_id: str, nid: int) -> Key:
        return self._coup_by_nid[(table_id, nid)]

    def _fronts(self) -> list[defaultdict[str, int]]:
        """Per store read, per table: the dealing order (notification id of BettingOpened)
        of the latest coup that store has reached (a coup dealing has not opened yet: ahead).
        Also notes each store's :attr:`progress`."""
        history = self.ctx.history
        coups = history.coups
        self._coup_by_nid = {(c.table_id, c.notification_id): k for k, c in coups.items()}
        dealing: defaultdict[str, int] = defaultdict(int)
        for view in coups.values():
            dealing[view.table_id] = max(dealing[view.table_id], view.notification_id)
        progress = self.progress
        progress["dealing"] = max(progress.get("dealing", 0), *dealing.values(), 0)
        ahead = progress["dealing"] + 1  # reached a coup dealing has not opened yet
        fronts = [dealing]
        if "settlement" in self.reading:
            settled: defaultdict[str, int] = defaultdict(int)
            for key in history.books:
                opened = coups.get(key)
                at = END if opened is None else opened.notification_id
                settled[key[0]] = max(settled[key[0]], at)
                progress["settlement"] = max(
                    progress.get("settlement", 0), ahead if opened is None else at
                )
            fronts.append(settled)
        if "shoe" in self.reading:
            drawn: defaultdict[str, int] = defaultdict(int)
            for table_id, coup_id in self.feed.last_draw.items():
                last = coups.get((table_id, coup_id))
                drawn[table_id] = END if last is None else last.notification_id
                progress["shoe"] = max(progress.get("shoe", 0), min(drawn[table_id], ahead))
            fronts.append(drawn)
        return fronts

    def _shoe_done(self, key: Key) -> bool:
        table_id, shoe_id = key
        seq = self._shoe_seq[key]
        if seq > self._shoes_of[table_id] - SHOE_LAG and key not in self._reference:
            return False
        if "dealing" in self.reading:
            dealt_from = self._shoe_seq.get((table_id, self._dealing_shoe.get(table_id, "")), 0)
            if 0 <= dealt_from < seq + SHOE_LAG and key not in self._reference:
                return False
        return not any(
            c.table_id == table_id and c.shoe_id == shoe_id for c in self.ctx.history.coups.values()
        )
