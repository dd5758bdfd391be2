"""Check each store's seals against the anchors its service published (``--anchors``).

An anchor (``contracts.SealAnchored`` on ``punto-banco.seals``, ``anchor_reader.py`` reads and
verifies them) is a seal the service's relay published, signed with the service's key, which
never lives in the store. While the store's seals stream by (``seals.SealVerifier`` calls
:meth:`AnchorCheck.seal` for each), every anchored seal must be found in the store with the
same number, range, count, digest and previous digest:

- an anchored seal the store does not have (the store was truncated, at a seal boundary or
  not, or seals were deleted; its last seal older than the last anchor):
  ``ANCHOR_MISSING_IN_STORE``, an error;
- a store seal that differs from its anchor (rows changed and the chain recomputed), or two
  signed anchors of one seal that differ (a chain rewritten and anchored again):
  ``ANCHOR_DIGEST_MISMATCH``, an error; the first seal that differs is reported, the later
  ones counted in one finding (a recomputed chain differs from there on);
- a store seal never anchored while later ones are: ``SEAL_NOT_ANCHORED``, a warning. The
  relay publishes in the store's order and the topic keeps everything, so the topic lost that
  record (recreated, or its retention changed); the seal is still vouched for through the
  next anchored seal, whose previous digest chains to it;
- store seals before the first anchor (sealed before anchoring began) and after the last one
  (not published yet: the relay lags, or the service stopped with it down) are counted in the
  summary, not reported: the first are vouched for through the first anchor's chain, the
  second only by the store itself until they are anchored.

Memory: one small record per anchored seal (its digests as bytes), dropped as the store's
seal is met; the topic itself is streamed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from services.shared.platform.settings import store_name
from services.tools.audit.findings import Code, Finding, Severity


@dataclass(frozen=True, slots=True)
class Anchor:
    """One verified anchor: a seal of ``service``'s store as its relay published it."""

    seal: int
    from_id: int
    to_id: int
    count: int
    digest: bytes
    previous_digest: bytes
    sealed_at: str
    notification_id: int  # the seal's own row in the store (the signed relay position)
    partition: int | None = None  # a partitioned service's: its store's partition

    def differences(
        self, from_id: int, to_id: int, count: int, digest: bytes, previous: bytes
    ) -> list[str]:
        """What differs between this anchor and a seal (empty: the same seal)."""
        found = []
        if (from_id, to_id) != (self.from_id, self.to_id):
            found.append(
                f"covers {from_id + 1}..{to_id}, anchored {self.from_id + 1}..{self.to_id}"
            )
        if count != self.count:
            found.append(f"{count} events, anchored {self.count}")
        if digest != self.digest:
            found.append(f"digest {digest.hex()[:16]}..., anchored {self.digest.hex()[:16]}...")
        if previous != self.previous_digest:
            found.append("previous digest differs")
        return found


@dataclass
class AnchorSummary:
    """What the anchors of one store showed (for the report)."""

    store: str
    anchors: int = 0  # distinct anchored seals
    head_seal: int = 0  # the last anchored seal (0: none)
    head_to_id: int = 0
    head_digest: str = ""
    head_sealed_at: str = ""
    matched: int = 0  # store seals equal to their anchor
    before_anchoring: int = 0  # store seals older than the first anchor
    not_anchored_yet: int = 0  # store seals after the last anchor

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class AnchorBook:
    """The verified anchors of one store (a service's, or one partition's of a partitioned
    service: an anchor vouches only for the store of its own service AND partition)."""

    service: str
    partition: int | None = None
    anchors: dict[int, Anchor] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    head: Anchor | None = None
    first: int = 0

    def add(self, anchor: Anchor) -> None:
        """A verified anchor; the same seal again (a relay's resend, a replay) is ignored,
        a different one for the same seal is a finding."""
        known = self.anchors.get(anchor.seal)
        if known is not None:
            if known != anchor and known.differences(
                anchor.from_id, anchor.to_id, anchor.count, anchor.digest, anchor.previous_digest
            ):
                self.findings.append(
                    Finding(
                        Severity.ERROR,
                        Code.ANCHOR_DIGEST_MISMATCH,
                        f"two signed anchors of seal {anchor.seal} differ (notifications "
                        f"{known.notification_id} and {anchor.notification_id}): the store's "
                        "chain was rewritten after it was anchored, and anchored again",
                        store=self.service,
                        notification_id=anchor.notification_id,
                        partition=self.partition,
                    )
                )
            return
        self.anchors[anchor.seal] = anchor
        if self.head is None or anchor.seal > self.head.seal:
            self.head = anchor
        if not self.first or anchor.seal < self.first:
            self.first = anchor.seal


class AnchorCheck:
    """Compares one store's seals, as they stream by, with its service's anchors."""

    def __init__(self, book: AnchorBook) -> None:
        self.book = book
        self.findings: list[Finding] = list(book.findings)
        head = book.head
        self.summary = AnchorSummary(
            store_name(book.service, book.partition),
            anchors=len(book.anchors),
            head_seal=head.seal if head else 0,
            head_to_id=head.to_id if head else 0,
            head_digest=head.digest.hex() if head else "",
            head_sealed_at=head.sealed_at if head else "",
        )
        self._differing = 0  # anchored seals that differ after the first one reported
        self._first_differing = 0
        self._last_store_seal = 0

    def seal(
        self,
        number: int,
        from_id: int,
        to_id: int,
        count: int,
        digest: str,
        previous: str,
        notification_id: int,
    ) -> None:
        """A store's seal (number = its ledger version - 1), in the store's order."""
        self._last_store_seal = max(self._last_store_seal, number)
        anchor = self.book.anchors.pop(number, None)
        summary = self.summary
        if anchor is None:
            if not summary.head_seal or number > summary.head_seal:
                summary.not_anchored_yet += 1
            elif number < self.book.first:
                summary.before_anchoring += 1
            else:
                self._add(
                    Severity.WARNING,
                    Code.SEAL_NOT_ANCHORED,
                    f"seal {number} was never anchored while later seals were: the seals "
                    "topic lost its record (recreated, or its retention changed); the seal "
                    "is vouched for only through the next anchored seal",
                    notification_id,
                )
            return
        try:
            sealed, before = bytes.fromhex(digest), bytes.fromhex(previous)
        except ValueError:
            sealed, before = b"", b""
        differences = anchor.differences(from_id, to_id, count, sealed, before)
        if not differences:
            summary.matched += 1
            return
        if self._first_differing:
            self._differing += 1
            return
        self._first_differing = number
        self._add(
            Severity.ERROR,
            Code.ANCHOR_DIGEST_MISMATCH,
            f"seal {number} is not the seal anchored on {anchor.sealed_at} ("
            + "; ".join(differences)
            + "): the store's rows were changed and its chain recomputed",
            notification_id,
        )

    def finish(self) -> list[Finding]:
        """After the store's last row: anchored seals the store lacks; every finding."""
        if not self.summary.anchors and self.summary.not_anchored_yet:
            self._add(
                Severity.WARNING,
                Code.SEAL_NOT_ANCHORED,
                f"none of the store's {self.summary.not_anchored_yet} seals is anchored: "
                "nothing outside the store vouches for them (has the service run since "
                "anchoring began? is PB_TOPIC_PREFIX right?)",
                None,
            )
        if self._differing:
            self._add(
                Severity.ERROR,
                Code.ANCHOR_DIGEST_MISMATCH,
                f"{self._differing} later anchored seal"
                + (" differs" if self._differing == 1 else "s differ")
                + f" as well: the chain was recomputed from seal {self._first_differing} on",
                None,
            )
        missing = sorted(self.book.anchors.values(), key=lambda a: a.seal)
        for run in _runs(missing):
            first, last = run[0], run[-1]
            seals = (
                f"seal {first.seal} is" if first is last else f"seals {first.seal}..{last.seal} are"
            )
            where = f"notifications {first.from_id + 1}..{last.to_id}"
            if first.seal > self._last_store_seal:
                why = (
                    f"the store's last seal is {self._last_store_seal or 'none'}, the last "
                    f"anchored one {self.summary.head_seal}: the store was truncated, or its "
                    "last seals deleted"
                )
            else:
                why = "the store's seals were deleted or renumbered"
            self._add(
                Severity.ERROR,
                Code.ANCHOR_MISSING_IN_STORE,
                f"anchored {seals} not in the store ({where}, anchored from {first.sealed_at}): "
                f"{why}",
                first.notification_id,
            )
        self.book.anchors.clear()
        return self.findings

    def _add(self, severity: Severity, code: Code, message: str, where: int | None) -> None:
        self.findings.append(
            Finding(
                severity,
                code,
                message,
                store=self.book.service,
                notification_id=where,
                partition=self.book.partition,
            )
        )


def _runs(anchors: list[Anchor]) -> list[list[Anchor]]:
    """Consecutive seal numbers together: ``[1, 2, 3, 7]`` -> ``[[1, 2, 3], [7]]``."""
    runs: list[list[Anchor]] = []
    for anchor in anchors:
        if runs and runs[-1][-1].seal + 1 == anchor.seal:
            runs[-1].append(anchor)
        else:
            runs.append([anchor])
    return runs
