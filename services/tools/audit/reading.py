"""Read one store's rows, a batch at a time: hash them for the seals, check versions, project.

A :class:`RowReader` per store keeps what reading it needs between batches: the seal
verifier the rows are hashed into (``services.tools.audit.seals``), the last version of each
aggregate (a version that does not follow is a finding) and the findings about the rows.
Both the whole-history reader (``auditor.read_history``) and the streaming audit
(``stream.py``) feed it batches in notification order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from contextlib import suppress

from services.shared.platform.store import SEALED_TOPIC, STARTED_TOPIC
from services.tools.audit.findings import Code, Finding, Severity
from services.tools.audit.seals import SealVerifier
from services.tools.audit.stores import Row
from services.tools.history.from_store import StoreFeed, read_state

UNREADABLE = (
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
    IndexError,
    StopIteration,
    ArithmeticError,  # a number JSON holds and Python cannot (1e400 as an int)
    RecursionError,  # [[[...]]]
)
"""What reading a changed row may raise: each is a finding, never the audit's end."""
_ROW_PREFIX = b"pb-row-v1"

Late = Callable[[str, bytes, int], None]
"""``late(store, originator_id, notification_id)``: a row of an aggregate already checked."""


class RowReader:
    """One store's reading state; :meth:`read` takes its next batch of rows."""

    def __init__(self, service: str, feed: StoreFeed, verifier: SealVerifier) -> None:
        self.service = service
        self.feed = feed
        self.verifier = verifier
        self.findings: list[Finding] = []
        self.versions: dict[bytes, int] = {}
        """originator id -> its last version read (dropped with what the audit drops)."""
        self.rows = 0
        self.position = 0
        """The notification id of the last row read."""
        self.hashed_only = 0
        """Rows up to this notification id are hashed for the seals, nothing more (a resumed
        audit: read before the checkpoint, but not yet sealed then)."""
        self._topics: dict[str, bytes] = {}

    def read(
        self,
        batch: list[Row],
        checked: Mapping[bytes, object] | None = None,
        late: Late | None = None,
    ) -> None:
        """Hash, version-check and project every row of ``batch``; a row whose aggregate is
        in ``checked`` is announced to ``late`` first (which may bring it back)."""
        readers = self.feed.readers
        sha256 = hashlib.sha256
        pending = self.verifier.pending
        topic_bytes = self._topics
        versions = self.versions
        service = self.service
        for nid, oid, version, topic, state in batch:
            encoded = topic_bytes.get(topic)
            if encoded is None:
                raw = topic.encode()
                encoded = topic_bytes[topic] = len(raw).to_bytes(2, "big") + raw
            pending.append(
                (
                    nid,
                    sha256(
                        b"".join((_ROW_PREFIX, oid, version.to_bytes(8, "big"), encoded, state))
                    ).digest(),
                    oid,
                )
            )
            if nid <= self.hashed_only:
                continue
            if checked and oid in checked and late is not None:
                late(service, oid, nid)
            previous = versions.get(oid, 0)
            if version != previous + 1:
                self.findings.append(
                    Finding(
                        Severity.ERROR,
                        Code.VERSION_GAP,
                        f"event version {version} of aggregate {oid.hex()} follows version "
                        f"{previous}: an event was deleted, inserted or moved",
                        store=service,
                        notification_id=nid,
                    )
                )
            versions[oid] = version
            handler = readers.get(topic)
            if handler is not None:
                try:
                    handler(oid, nid, read_state(state))
                except UNREADABLE as error:
                    self.findings.append(unreadable(topic, error, nid, service))
            elif topic == SEALED_TOPIC:
                self.verifier.sealed(nid, version, state)
            elif topic == STARTED_TOPIC:
                self.verifier.started(version)
        if batch:
            self.position = batch[-1][0]
        self.rows += len(batch)
        self.verifier.summary.rows += len(batch)

    def project(self, rows: list[Row]) -> None:
        """Project rows read again (an aggregate brought back): no hashing, no findings
        (they were counted the first time); its last version is noted again."""
        readers = self.feed.readers
        for _nid, oid, version, topic, state in rows:
            handler = readers.get(topic)
            if handler is not None:
                with suppress(*UNREADABLE):  # reported when the row was first read
                    handler(oid, _nid, read_state(state))
            self.versions[oid] = version


def unreadable(topic: str, error: BaseException, nid: int, store: str = "settlement") -> Finding:
    return Finding(
        Severity.ERROR,
        Code.UNREADABLE_EVENT,
        f"{topic.rsplit(':', 1)[-1]} cannot be read or names nothing known "
        f"({type(error).__name__}: {error})",
        store=store,
        notification_id=nid,
    )


Owner = tuple[str, str | None, str | None]


def place(
    findings: list[Finding], located: dict[int, bytes], owner: Callable[[bytes], Owner | None]
) -> list[Finding]:
    """Name the table/shoe/coup of tampered rows where the aggregate is known."""
    out = []
    for finding in findings:
        oid = located.get(finding.notification_id or -1)
        found = owner(oid) if oid else None
        if found is not None:
            table_id, shoe_id, coup_id = found
            finding = Finding(
                finding.severity,
                finding.code,
                finding.message,
                table_id=table_id,
                shoe_id=shoe_id,
                coup_id=coup_id,
                store=finding.store,
                notification_id=finding.notification_id,
            )
        out.append(finding)
    return out
