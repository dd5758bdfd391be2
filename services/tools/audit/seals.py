"""Verify a store's seal chain (see ``platform.store.sealing``) and locate any change.

Rows are fed in notification order; each ``SealLedger.Sealed`` row is checked
against the rows it covers as soon as it is met (seals come after what they
cover), so memory stays bounded by one seal's range. A mismatch is located by
the seal's fingerprints: a row whose content is unknown at an id the seal
knows (altered), an id the seal knows that is gone (deleted), content nobody
sealed at a new id (inserted), sealed content found at another id (moved),
two rows that traded ids (swapped).
"""

from __future__ import annotations

import base64
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from services.shared.platform.store import FINGERPRINT_BYTES, ZERO_DIGEST, seal_digest
from services.tools.audit.anchors import AnchorCheck, AnchorSummary
from services.tools.audit.findings import Code, Finding, Severity
from services.tools.history.from_store import read_json

Pending = tuple[int, bytes, bytes]  # notification id, row hash, originator id

_notification_id = itemgetter(0)


def expand_runs(runs: Iterable[Sequence[int]], count: int | None = None) -> list[int]:
    """A seal's ids from their runs: ``[[3, 5], [9, 9]]`` -> ``[3, 4, 5, 9]``; ValueError
    unless they are ``count`` ids (checked first: a changed seal may ask for 10**12)."""
    pairs = [(int(first), int(last)) for first, last in runs]
    if count is not None and sum(max(0, last - first + 1) for first, last in pairs) != count:
        raise ValueError(f"its runs of ids do not hold its count, {count}")
    return [n for first, last in pairs for n in range(first, last + 1)]


def unpack_fingerprints(packed: bytes) -> list[bytes]:
    """A seal's fingerprints, from its ``fingerprints`` once base64-decoded."""
    return [packed[i : i + FINGERPRINT_BYTES] for i in range(0, len(packed), FINGERPRINT_BYTES)]


@dataclass
class SealSummary:
    """What the chain of one store showed (for the report)."""

    store: str
    seals: int = 0
    sealed_rows: int = 0
    head_to_id: int = 0
    head_digest: str = ZERO_DIGEST
    unsealed_rows: int = 0
    rows: int = 0
    anchors: AnchorSummary | None = None  # the report shows it apart (``--anchors``)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "anchors"}


@dataclass
class SealVerifier:
    store: str
    anchors: AnchorCheck | None = None
    """The store's anchors (``audit --anchors``): each seal is compared with its anchor."""
    findings: list[Finding] = field(default_factory=list)
    located: dict[int, bytes] = field(default_factory=dict)  # notification id -> originator
    pending: list[Pending] = field(default_factory=list)
    """Rows not covered by a seal met so far (the reader appends to it directly)."""
    _ledger_version: int = 0
    _started: bool = False

    def __post_init__(self) -> None:
        self.summary = SealSummary(self.store)
        if self.anchors is not None:
            self.summary.anchors = self.anchors.summary

    def add(self, notification_id: int, hashed: bytes, originator_id: bytes) -> None:
        self.pending.append((notification_id, hashed, originator_id))
        self.summary.rows += 1

    def resume(self, ledger_version: int) -> None:
        """Continue a chain verified up to the seal of ``ledger_version`` (a checkpoint)."""
        self._ledger_version = ledger_version
        self._started = True

    def started(self, version: int) -> None:
        self._started = True
        self._check_version(version, 0)

    def sealed(self, notification_id: int, version: int, state: bytes) -> None:
        """A ``Sealed`` row (already :meth:`add`-ed, it is covered by the NEXT seal)."""
        try:
            seal = read_json(state)
            from_id, to_id, count = int(seal["from_id"]), int(seal["to_id"]), int(seal["count"])
            ids = expand_runs(seal["ids"], count)
            # Decoded now (a damaged seal is unreadable), cut into fingerprints only to
            # locate a change (see _locate).
            packed = base64.b64decode(seal["fingerprints"])
            digest, previous = str(seal["digest"]), str(seal["previous_digest"])
        except (ValueError, KeyError, TypeError, ArithmeticError, RecursionError) as error:
            self._error(
                Code.UNREADABLE_EVENT,
                f"seal event cannot be read ({str(error)[:200]}): it was changed",
                notification_id,
            )
            return
        summary = self.summary
        self._check_version(version, notification_id)
        range_text = f"seal {version - 1} (notifications {from_id + 1}..{to_id})"
        if previous != summary.head_digest or from_id != summary.head_to_id:
            self._error(
                Code.SEAL_CHAIN_BROKEN,
                f"{range_text} does not continue the previous seal (which ended at "
                f"{summary.head_to_id}): a seal was removed, replaced or changed",
                notification_id,
            )
        pending = self.pending
        # The rows come in notification order: those up to to_id are a prefix.
        cut = bisect_right(pending, to_id, key=_notification_id)
        covered = pending[:cut]
        del pending[:cut]  # in place: the reader appends to this very list
        if covered and covered[0][0] <= from_id:
            covered = [row for row in covered if row[0] > from_id]
        recomputed = seal_digest(previous, from_id, to_id, covered)
        if recomputed != digest:
            located = self._locate(ids, unpack_fingerprints(packed), covered, range_text)
            if not located:
                self._error(
                    Code.SEAL_BROKEN,
                    f"{range_text}: the rows no longer give the sealed digest",
                    notification_id,
                )
        elif [row[0] for row in covered] != ids:
            self._error(
                Code.SEAL_BROKEN, f"{range_text}: ids differ from the seal", notification_id
            )
        if self.anchors is not None:
            self.anchors.seal(version - 1, from_id, to_id, count, digest, previous, notification_id)
        summary.seals += 1
        summary.sealed_rows += len(covered)
        summary.head_to_id = max(to_id, summary.head_to_id)
        summary.head_digest = digest

    def _check_version(self, version: int, notification_id: int) -> None:
        expected = self._ledger_version + 1
        if version != expected:
            self._error(
                Code.SEAL_CHAIN_BROKEN,
                f"seal ledger event version {version} where {expected} was expected: "
                "a seal event was deleted or inserted",
                notification_id or None,
            )
        self._ledger_version = version

    def _locate(
        self, ids: list[int], prints: list[bytes], covered: list[Pending], range_text: str
    ) -> int:
        """Report which rows of a broken seal changed; how many findings."""
        before = len(self.findings)
        sealed_by_fp = dict(zip(prints, ids, strict=False))
        sealed_by_id = dict(zip(ids, prints, strict=False))
        actual_by_fp = {h[:FINGERPRINT_BYTES]: n for n, h, _ in covered}
        beyond = {h[:FINGERPRINT_BYTES]: n for n, h, _ in self.pending}  # moved past the range
        actual_by_id = {n: (h[:FINGERPRINT_BYTES], oid) for n, h, oid in covered}
        altered: set[int] = set()
        moves: dict[int, int] = {}  # from sealed id -> actual id
        for n, (fp, oid) in actual_by_id.items():
            if fp in sealed_by_fp:
                if sealed_by_fp[fp] != n:
                    moves[sealed_by_fp[fp]] = n
                continue
            self.located[n] = oid
            if n in sealed_by_id and sealed_by_id[n] not in actual_by_fp:
                altered.add(n)
                self._error(Code.ROW_ALTERED, f"{range_text}: the stored event was edited", n)
            else:
                self._error(
                    Code.ROW_INSERTED, f"{range_text}: an event nobody sealed was inserted", n
                )
        for n, fp in sealed_by_id.items():
            if fp in beyond and fp not in actual_by_fp:
                moves[n] = beyond[fp]
            elif fp not in actual_by_fp and n not in altered:
                self._error(Code.ROW_DELETED, f"{range_text}: the sealed event is gone", n)
        done: set[int] = set()
        for old, new in sorted(moves.items()):
            if old in done:
                continue
            if moves.get(new) == old:
                done.update((old, new))
                self.located[old] = actual_by_id[old][1] if old in actual_by_id else b""
                self._error(
                    Code.ROWS_SWAPPED,
                    f"{range_text}: the events sealed at {old} and {new} traded places",
                    old,
                )
        shifted = sorted((old, new) for old, new in moves.items() if old not in done)
        run: list[tuple[int, int]] = []
        for old, new in [*shifted, (0, 0)]:
            if run and (old != run[-1][0] + 1 or new - old != run[-1][1] - run[-1][0]):
                first, last = run[0], run[-1]
                self._error(
                    Code.ROW_MOVED,
                    f"{range_text}: the events sealed at {first[0]}..{last[0]} now sit at "
                    f"{first[1]}..{last[1]} (renumbered)",
                    first[1],
                )
                run = []
            run.append((old, new))
        return len(self.findings) - before

    def finish(self) -> None:
        """After the last row: report rows no seal covers yet (and the anchors' findings)."""
        if self.anchors is not None:
            self.findings.extend(self.anchors.finish())
        tail = [row for row in self.pending if row[0] > self.summary.head_to_id]
        ledger_rows = {n for n, _, oid in tail if oid == _ledger_oid()}
        unsealed = [row for row in tail if row[0] not in ledger_rows]
        self.summary.unsealed_rows = len(unsealed)
        if not unsealed:
            return
        first, last = unsealed[0][0], unsealed[-1][0]
        if self.summary.seals == 0:
            self.findings.append(
                Finding(
                    Severity.WARNING,
                    Code.NOT_SEALED,
                    f"the store was never sealed ({len(unsealed)} events): changes to it "
                    "cannot be detected",
                    store=self.store,
                )
            )
            return
        self.findings.append(
            Finding(
                Severity.WARNING,
                Code.UNSEALED_TAIL,
                f"{len(unsealed)} events after the last seal (notifications {first}..{last}) "
                "are not sealed yet (a running or crashed service); they cannot be "
                "proven unchanged",
                store=self.store,
                notification_id=first,
            )
        )

    def _error(self, code: Code, message: str, notification_id: int | None) -> None:
        self.findings.append(
            Finding(
                Severity.ERROR, code, message, store=self.store, notification_id=notification_id
            )
        )


def _ledger_oid() -> bytes:
    from services.shared.platform.store import LEDGER_ID

    return LEDGER_ID.bytes
