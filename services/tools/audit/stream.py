"""The streaming audit: the three stores read in step, each coup checked once complete.

The stores are separate logs. They are read a step (``STEP`` rows) at a time, always the
store whose reading is furthest behind (``Window.progress``: the dealing order of the latest
coup each store has reached), so the three advance together and a coup's shoe, dealing and
settlement events are read close together; after each step the
:class:`~services.tools.audit.window.Window` checks and drops what is complete. The pace
only decides memory: what is checked, and how, depends on the order of each store alone.
Events' own times are used only to forget checked coups after ``revive_within``.

A row of a coup already checked (``late``) brings it back: its rows are read again from
the stores (``rows_of``), and it is checked again with what came since.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta

from services.tools.audit.anchor_reader import AnchorRecords
from services.tools.audit.anchors import AnchorCheck
from services.tools.audit.checks import Checker
from services.tools.audit.findings import Finding
from services.tools.audit.reading import Owner, RowReader, place
from services.tools.audit.seals import SealSummary, SealVerifier
from services.tools.audit.stores import SERVICES, Row, StoreReader
from services.tools.audit.window import REVIVE_WITHIN, Window
from services.tools.audit.window_feed import StreamFeed

Progress = Callable[[str, int], None]
STEP = 250
"""Rows read from one store before the stores are compared again (a store's batch of
several thousand rows holds hundreds of coups of dealing, tens of settlement)."""
_STAMP = b'"timestamp":{"_type_":"datetime_iso","_data_":"'


def moment_of(state: bytes) -> str:
    """The time a stored event was recorded (ISO 8601, as stored); "" if it names none."""
    at = state.find(_STAMP)
    if at < 0:
        return ""
    start = at + len(_STAMP)
    end = state.find(b'"', start)
    return state[start:end].decode("ascii", "replace") if end > 0 else ""


def _steps(batches: Iterator[list[Row]], step: int, upto: int | None) -> Iterator[list[Row]]:
    """The store's batches cut into steps of at most ``step`` rows (up to ``upto``)."""
    for batch in batches:
        if upto is not None and batch and batch[-1][0] > upto:
            batch = [row for row in batch if row[0] <= upto]
            yield from (batch[i : i + step] for i in range(0, len(batch), step))
            return
        for start in range(0, len(batch), step):
            yield batch[start : start + step]


def verifier(
    service: str, anchors: AnchorRecords | None, partition: int | None = None
) -> SealVerifier:
    """The seal verifier of one store (``partition``: that partition's store), comparing its
    seals with its anchors if given."""
    check = AnchorCheck(anchors.book(service, partition)) if anchors is not None else None
    return SealVerifier(service, anchors=check)


class StreamAudit:
    """Read the stores in step into ``checker``'s (bounded) history, checking as it goes."""

    def __init__(
        self,
        stores: Mapping[str, StoreReader],
        checker: Checker,
        anchors: AnchorRecords | None = None,
        revive_within: timedelta = REVIVE_WITHIN,
        step: int = STEP,
        partition: int | None = None,
    ) -> None:
        self.stores = stores
        self.step = step
        self.feed = StreamFeed(checker.history)
        self.feed.reopened = self._reopened
        present = [service for service in SERVICES if service in stores]
        self.readers = {
            s: RowReader(s, self.feed, verifier(s, anchors, partition)) for s in present
        }
        versions = [reader.versions for reader in self.readers.values()]
        self.window = Window(checker, self.feed, versions, set(present))
        self.window.revive_within = revive_within
        self.placed: dict[str, list[Finding]] = {s: [] for s in present}
        self.after: dict[str, int] = {}
        """Per store: read only the rows after this notification id (a resumed audit)."""
        self._placed_upto = dict.fromkeys(present, 0)
        self.revived = 0

    def run(self, progress: Progress | None = None, upto: dict[str, int] | None = None) -> None:
        """Read every store to its end, then check what is still open; or, given ``upto``,
        each store up to that notification id, and carry what is open (a checkpoint)."""
        batches = {
            s: _steps(self.stores[s].rows(self.after.get(s, 0)), self.step, (upto or {}).get(s))
            for s in self.readers
        }
        window = self.window
        behind = window.progress
        while batches:
            service = min(batches, key=lambda name: behind.get(name, 0))
            batch = next(batches[service], None)
            reader = self.readers[service]
            if batch is None:
                del batches[service]
                if upto is None or service not in upto:
                    window.reading.discard(service)  # its end: nothing more to wait for
                reader.verifier.finish()
                self._place(service)
                continue
            reader.read(batch, window.done_oids, self._late)
            window.now = max(window.now, moment_of(batch[-1][4]) if batch else "")
            self._place(service)
            window.advance()
            if progress is not None:
                progress(service, len(batch))
        window.advance(final=upto is None)
        self.feed.close()

    def findings(self) -> list[Finding]:
        """The stores' findings (rows, then seals, store by store), then the checks'."""
        out: list[Finding] = []
        for service, reader in self.readers.items():
            out += reader.findings + self.placed[service]
        return out + self.window.findings()

    @property
    def summaries(self) -> dict[str, SealSummary]:
        return {service: reader.verifier.summary for service, reader in self.readers.items()}

    @property
    def events(self) -> dict[str, int]:
        return {service: reader.rows for service, reader in self.readers.items()}

    def _place(self, service: str) -> None:
        """Locate the seal findings met so far (while their aggregates are still known)."""
        found = self.readers[service].verifier.findings
        new = found[self._placed_upto[service] :]
        if new:
            located = self.readers[service].verifier.located
            self.placed[service] += place(new, located, self._owner)
            self._placed_upto[service] = len(found)

    def _reopened(self, service: str, key: tuple[str, str], nid: int) -> None:
        if key in self.window.done:
            self._revive(service, key, nid)

    def _owner(self, oid: bytes) -> Owner | None:
        owner = self.feed.history.owners.get(oid)
        if owner is not None:
            return owner
        key = self.window.done_oids.get(oid)
        done = self.window.done.get(key) if key is not None else None
        if done is None:
            return None
        shoe = done.shoe_id if oid == done.coup_oid else None
        return (done.table_id, shoe, done.coup_id)

    def _late(self, service: str, oid: bytes, nid: int) -> None:
        """A row of a checked coup: take its check back and read it again (see window)."""
        key = self.window.done_oids.get(oid)
        if key is not None:
            self._revive(service, key, nid)

    def _revive(self, service: str, key: tuple[str, str], nid: int) -> None:
        """Bring a checked coup back (``nid``: the row of ``service`` that concerns it): its
        check taken back, its rows read again up to where each store's reading is. Also when
        a coup or book is opened again under a checked one's ids: then, as in the whole
        history, the new one replaces the old view read back here."""
        window = self.window
        done = window.done.pop(key, None)
        if done is None:
            return
        self.revived += 1
        window.take_back(done)
        history = self.feed.history
        shoe_key = (done.table_id, done.shoe_id)
        for store, aggregate in (
            ("shoe", done.shoe_oid if shoe_key not in history.shoes else None),
            ("dealing", done.coup_oid),
            ("settlement", done.book_oid),
        ):
            rows_of = getattr(self.stores.get(store), "rows_of", None)
            if aggregate is None or store not in self.readers or rows_of is None:
                continue
            before = nid if store == service else self.readers[store].position + 1
            if store == "shoe":
                window.reference(shoe_key)
            self.readers[store].project(list(rows_of(aggregate, before)))
        table = history.tables.get(done.table_id)
        if table is not None and done.coup_id in table.coups:  # the oldest, not the latest
            table.coups.remove(done.coup_id)
            table.coups.insert(0, done.coup_id)
