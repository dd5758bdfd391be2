"""Checking and dropping what the streaming audit's window found complete; taking it back.

:class:`WindowChecks` holds the open state's bookkeeping and runs the audit's checks on one
complete coup (with its book and its shoe's cards), a book or a shoe, keeps their findings
per shoe, coup and book (given in the whole-history audit's order at the end), and drops
what it checked, leaving a small :class:`Done` per coup while a late event may bring it back
(:meth:`WindowChecks.take_back`). When things are complete is ``window.py``'s to say.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from services.tools.audit.checks import Checker
from services.tools.audit.checks.books import check_book
from services.tools.audit.checks.context import DAMAGE
from services.tools.audit.checks.coups import check_coup
from services.tools.audit.checks.decisions import check_decisions
from services.tools.audit.checks.shoes import card, check_shoe
from services.tools.audit.checks.studio import check_studio_shoe
from services.tools.audit.findings import Code, Finding
from services.tools.audit.totals import Tally
from services.tools.audit.window_feed import Drawn, StreamFeed, drawn_of

REVIVE_WITHIN = timedelta(hours=26)
"""How long (stream time) a checked coup may be brought back by a late event (the void
window, 24 h by default, and some margin)."""
END = 1 << 62
"""After every notification id."""

Key = tuple[str, str]
Order = tuple[int, int]


@dataclass(slots=True)
class Done:
    """A checked and dropped coup: what its check counted, and where its rows are."""

    table_id: str
    coup_id: str
    shoe_id: str
    opened_at: str
    coup_oid: bytes | None
    book_oid: bytes | None
    shoe_oid: bytes | None
    coup_nid: int
    book_nid: int
    counted: tuple[int, int, int, int]  # coups, books, bets, unverified voids
    tally: Tally | None
    """What it added to the totals (None: nothing, undecided or filtered out)."""


class WindowChecks:
    """The window's open state, and the checks of what in it is complete."""

    def __init__(
        self, checker: Checker, feed: StreamFeed, versions: list[dict[bytes, int]], stores: set[str]
    ) -> None:
        self.checker = checker
        self.versions = versions
        self.ctx = checker.context
        self.feed = feed
        self.stores = stores
        self.reading = set(stores)
        """The stores still being read (one read to its end is waited for no more)."""
        self.revive_within = REVIVE_WITHIN
        self.done: dict[Key, Done] = {}
        self.done_oids: dict[bytes, Key] = {}
        self.found: dict[Order, list[Finding]] = {}
        self.unverified = 0
        self.books_seen = False
        self.peak: dict[str, int] = defaultdict(int)
        self.now = ""
        self.progress: dict[str, int] = {}
        """Per store: how far its reading has come, as the dealing order of the latest coup
        it reached (the stores are read so that the one furthest behind goes next)."""
        self._shoe_seq: dict[Key, int] = {}
        self._shoes_of: dict[str, int] = defaultdict(int)  # table -> shoes shuffled
        self._latest_shoe: dict[str, str] = {}
        self._dealing_shoe: dict[str, str] = {}  # table -> shoe of dealing's latest coup
        self._reference: set[Key] = set()  # shoes read again for a revived coup only
        self._drawn: dict[Key, tuple[int, bool, Drawn]] = {}  # per shoe: see drawn_of

    # -- checking and dropping ------------------------------------------------------------
    def _keep(self, order: Order, start: int) -> None:
        """The findings the last check added, under ``order``."""
        new = self.ctx.findings[start:]
        if new:
            del self.ctx.findings[start:]
            self.found.setdefault(order, []).extend(new)

    def _finish_coup(self, key: Key) -> None:
        ctx, history, feed = self.ctx, self.ctx.history, self.feed
        coup = history.coups[key]
        table_id, coup_id = key
        shoe = history.shoes.get((table_id, coup.shoe_id))
        if shoe is not None and ctx.filters.table_in(table_id):
            known = self._drawn[(table_id, coup.shoe_id)] = drawn_of(
                shoe, card, self._drawn.get((table_id, coup.shoe_id))
            )
            ctx.drawn[(table_id, coup.shoe_id)] = known[2]
        before = (ctx.checked["coups"], ctx.checked["books"], ctx.checked["bets"])
        unverified = 0
        start = len(ctx.findings)
        if ctx.coup_selected(coup):
            try:
                check_coup(ctx, coup)
                if self.checker.supervisors is not None:
                    check_decisions(ctx, coup, self.checker.supervisors)
                else:
                    unverified = len(coup.voids) + len(coup.corrections)
            except DAMAGE as error:
                ctx.damaged(error, table_id=table_id, coup_id=coup_id)
        self._keep((1, coup.notification_id), start)
        self.unverified += unverified
        ctx.drawn.pop((table_id, coup.shoe_id), None)
        book = history.books.get(key)
        tally = None
        if book is not None:
            tally = self._finish_book(key)
        elif "settlement" in self.stores and self.books_seen and ctx.coup_selected(coup):
            start = len(ctx.findings)
            ctx.error(
                Code.VIEWS_DISAGREE,
                "dealing opened this coup, settlement has no bets book for it",
                table_id=table_id,
                shoe_id=coup.shoe_id,
                coup_id=coup_id,
            )
            self._keep((3, coup.notification_id), start)
        ctx.results.pop(key, None)
        coups, books, bets = (
            ctx.checked[name] - was
            for name, was in zip(("coups", "books", "bets"), before, strict=True)
        )
        coup_oid = feed.coup_oids.pop(key, None)
        book_oid = feed.book_oids.pop(key, None)
        done = Done(
            table_id,
            coup_id,
            coup.shoe_id,
            coup.opened_at,
            coup_oid,
            book_oid,
            feed.shoe_oids.get((table_id, coup.shoe_id)),
            coup.notification_id,
            book.notification_id if book is not None else 0,
            (coups, books, bets, unverified),
            tally,
        )
        self.done[key] = done
        for oid in (coup_oid, book_oid):
            if oid is not None:
                self.done_oids[oid] = key
                self.forget(oid)
        history.forget_coup(table_id, coup_id)

    def _finish_book(self, key: Key) -> Tally | None:
        """Check a book (with its coup, if dealing opened it) and drop it; what it added to
        the totals."""
        ctx, history = self.ctx, self.ctx.history
        book = history.books[key]
        coup = history.coups.get(key)
        tally = None
        if ctx.filters.table_in(book.table_id) and ctx.filters.time_in(
            coup.opened_at if coup is not None else book.opened_at
        ):
            start = len(ctx.findings)
            counted = ctx.totals.overall.coups
            try:
                check_book(ctx, book, coup)
            except DAMAGE as error:
                ctx.damaged(error, table_id=book.table_id, coup_id=book.coup_id)
            tally = ctx.totals.last if ctx.totals.overall.coups > counted else None
            self._keep((2, book.notification_id), start)
        history.books.pop(key, None)
        oid = self.feed.book_oids.pop(key, None) if coup is None else None
        if oid is not None:
            self.forget(oid)
        return tally

    def _finish_shoe(self, key: Key) -> None:
        ctx, history = self.ctx, self.ctx.history
        table_id, shoe_id = key
        shoe = history.shoes[key]
        if key not in self._reference and ctx.filters.table_in(table_id):
            ctx.last_shoe[table_id] = self._latest_shoe.get(table_id, shoe_id)
            start = len(ctx.findings)
            try:
                check = check_studio_shoe if shoe.studio is not None else check_shoe
                check(ctx, shoe)
            except DAMAGE as error:
                ctx.damaged(error, table_id=table_id, shoe_id=shoe_id)
            self._keep((0, shoe.notification_id), start)
        ctx.drawn.pop(key, None)
        self._drawn.pop(key, None)
        self._reference.discard(key)
        self._shoe_seq.pop(key, None)
        oid = self.feed.shoe_oids.pop(key, None)
        if oid is not None:
            self.forget(oid)
        history.forget_shoe(table_id, shoe_id)

    def reference(self, key: Key) -> None:
        """A shoe read again only for a revived coup's check (dropped unchecked)."""
        self._reference.add(key)

    def take_back(self, done: Done) -> None:
        """Undo what a coup's check counted (it was brought back to be checked again)."""
        for oid in (done.coup_oid, done.book_oid):
            self.done_oids.pop(oid or b"", None)
        checked = self.ctx.checked
        coups, books, bets, unverified = done.counted
        checked["coups"] -= coups
        checked["books"] -= books
        checked["bets"] -= bets
        self.unverified -= unverified
        if done.tally is not None:
            day = done.opened_at[:10]
            self.ctx.totals.remove_coup(done.table_id, done.shoe_id, done.coup_id, day, done.tally)
        for order in ((1, done.coup_nid), (2, done.book_nid), (3, done.coup_nid)):
            self.found.pop(order, None)

    def forget(self, oid: bytes) -> None:
        """Drop what reading kept about a checked aggregate."""
        self.feed.forget(oid)
        for versions in self.versions:
            versions.pop(oid, None)

    def _forget_old(self) -> None:
        """Drop the ``Done`` of coups opened more than ``revive_within`` before now."""
        if not self.now or not self.done:
            return
        try:
            cutoff = (datetime.fromisoformat(self.now) - self.revive_within).isoformat()
        except ValueError:
            return
        while self.done:
            key, done = next(iter(self.done.items()))
            if done.opened_at >= cutoff:
                return
            del self.done[key]
            for oid in (done.coup_oid, done.book_oid):
                self.done_oids.pop(oid or b"", None)

    # -- the end ---------------------------------------------------------------------------
    def findings(self) -> list[Finding]:
        """Every check's findings, in the whole-history audit's order."""
        if self.unverified and self.checker.require_decisions:
            self.ctx.warn(
                Code.DECISIONS_NOT_VERIFIED,
                f"{self.unverified} voids: the supervisors' signed decisions were not verified "
                "(no supervisors keyring): give --supervisors KEYRING (PB_SUPERVISOR_KEYRING)",
                store="dealing",
            )
            self._keep((1, END), 0)
        return [f for _order, found in sorted(self.found.items()) for f in found]
