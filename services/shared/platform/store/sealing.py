"""Tamper evidence: a hash chain over each store's notification log, recorded in the same store.

A seal (:class:`SealLedger.Sealed`) covers the rows since the previous one: their ids (as
runs), an 8-byte fingerprint of each row's :func:`row_hash` (to locate a change), and a digest
over the previous seal's digest and every row's id and hash (:func:`seal_digest`, scheme
``pb-seal-v1``). Editing, deleting, inserting or swapping a sealed row breaks its seal and every
later one; the relay anchors each seal on Kafka, signed, so a rewritten chain is found too
(``audit --anchors``, docs/security.md).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import struct
from collections.abc import Iterable, Sequence
from typing import Any, cast
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate
from eventsourcing.utils import register_topic

from services.shared.facts.topics import register_stored_topics
from services.shared.platform.store.application import ServiceApplication

log = logging.getLogger(__name__)

SCHEME = "pb-seal-v1"
ZERO_DIGEST = "0" * 64
FINGERPRINT_BYTES = 8
MAX_ROWS_PER_SEAL = 20_000
"""A seal covers at most this many rows (a backlog is sealed in several seals)."""
MAX_ROWS_PER_ROUND = 100_000
"""A running service seals at most this many rows per round (the rest next round)."""

LEDGER_ID = uuid5(UUID("0c7d8f5e-4a0b-4f9e-9a55-5eab1ed5ea15"), "punto-banco/seal-ledger")
"""The one ``SealLedger`` of a store (each service's store has its own)."""

_ROW_PREFIX = b"pb-row-v1"
_SEAL_PREFIX = b"pb-seal-v1"


SEALED_TOPIC = "services.platform.sealing:SealLedger.Sealed"
STARTED_TOPIC = "services.platform.sealing:SealLedger.Started"
LEDGER_TOPIC = "services.platform.sealing:SealLedger"
"""The topics seal rows carry: stored names that never change, wherever the classes live."""
SEAL_TOPICS = frozenset({SEALED_TOPIC, STARTED_TOPIC})


class SealLedger(Aggregate):
    """The seals of one store (events are written directly; the aggregate is never loaded)."""

    class Started(Aggregate.Created):
        TOPIC = STARTED_TOPIC
        service: str
        scheme: str

    class Sealed(Aggregate.Event):
        TOPIC = SEALED_TOPIC
        from_id: int
        to_id: int
        count: int
        ids: list[list[int]]
        fingerprints: str
        digest: str
        previous_digest: str

    def __init__(self, service: str, scheme: str) -> None:  # pragma: no cover - never replayed
        self.service = service
        self.scheme = scheme


register_stored_topics(SealLedger)  # each event class under its stored topic: old rows resolve
register_topic(LEDGER_TOPIC, SealLedger)  # the ledger's rows name it so (a replay finds it)


# -- canonical bytes ------------------------------------------------------------------
def row_hash(originator_id: UUID, version: int, topic: str, state: bytes) -> bytes:
    """SHA-256 (32 bytes) of one stored row's canonical bytes (see the module docstring)."""
    encoded = topic.encode()
    return hashlib.sha256(
        b"".join(
            (
                _ROW_PREFIX,
                originator_id.bytes,
                version.to_bytes(8, "big"),
                len(encoded).to_bytes(2, "big"),
                encoded,
                bytes(state),
            )
        )
    ).digest()


_ID_AND_HASH = struct.Struct(">Q32s").pack
"""A row in a seal: its notification id (8 bytes, big-endian) and its 32-byte row hash."""


def seal_digest(
    previous_digest: str, from_id: int, to_id: int, rows: Iterable[tuple[Any, ...]]
) -> str:
    """Hex digest of one seal over ``rows`` = (notification id, :func:`row_hash`, ...) in order
    (further items of a row, such as the auditor's originator id, are ignored)."""
    digest = hashlib.sha256(_SEAL_PREFIX)
    digest.update(bytes.fromhex(previous_digest))
    digest.update(from_id.to_bytes(8, "big"))
    digest.update(to_id.to_bytes(8, "big"))
    digest.update(b"".join([_ID_AND_HASH(n, hashed) for n, hashed, *_ in rows]))
    return digest.hexdigest()


def id_runs(ids: Sequence[int]) -> list[list[int]]:
    """``[3, 4, 5, 9]`` -> ``[[3, 5], [9, 9]]``."""
    runs: list[list[int]] = []
    for notification_id in ids:
        if runs and runs[-1][1] + 1 == notification_id:
            runs[-1][1] = notification_id
        else:
            runs.append([notification_id, notification_id])
    return runs


def pack_fingerprints(hashes: Iterable[bytes]) -> str:
    return base64.b64encode(b"".join(h[:FINGERPRINT_BYTES] for h in hashes)).decode()


# -- sealing a store ------------------------------------------------------------------
class Sealer:
    """Seals ``app``'s notification log; call from the service's worker thread only."""

    def __init__(self, app: ServiceApplication, service: str) -> None:
        self.app = app
        self.service = service
        # The head: the version of the ledger's last event (0: no ledger yet), the last id
        # sealed and the last seal's digest.
        self.version, self.to_id, self.digest = 0, 0, ZERO_DIGEST
        stored = app.recorder.select_events(LEDGER_ID, desc=True, limit=1)
        if stored:
            last: Any = app.mapper.to_domain_event(stored[0])
            self.version = last.originator_version
            if isinstance(last, SealLedger.Sealed):
                self.to_id, self.digest = last.to_id, last.digest

    def seal(self, max_rows: int | None = None) -> int:
        """Seal the rows recorded since the last seal (at most about ``max_rows``, so a
        long backlog does not hold up the service's worker); the number sealed."""
        total = 0
        while max_rows is None or total < max_rows:
            notifications = self.app.process_recorder.select_notifications(
                start=self.to_id + 1, limit=MAX_ROWS_PER_SEAL
            )
            if not notifications or all(n.topic in SEAL_TOPICS for n in notifications):
                return total  # nothing new but the last seal itself: no seal of a seal
            rows = [
                (n.id, row_hash(_uuid(n.originator_id), n.originator_version, n.topic, n.state))
                for n in notifications
            ]
            self._record(rows)
            total += len(rows)
            if len(notifications) < MAX_ROWS_PER_SEAL:
                return total
        return total

    def _record(self, rows: Sequence[tuple[int, bytes]]) -> None:
        to_id = rows[-1][0]
        digest = seal_digest(self.digest, self.to_id, to_id, rows)
        events: list[Aggregate.Event] = []
        version = self.version
        if version == 0:
            version = 1
            events.append(
                cast(Any, SealLedger.Started)(
                    originator_id=LEDGER_ID,
                    originator_version=1,
                    timestamp=SealLedger.Started.create_timestamp(),
                    originator_topic=LEDGER_TOPIC,
                    service=self.service,
                    scheme=SCHEME,
                )
            )
        version += 1
        events.append(
            cast(Any, SealLedger.Sealed)(
                originator_id=LEDGER_ID,
                originator_version=version,
                timestamp=SealLedger.Sealed.create_timestamp(),
                from_id=self.to_id,
                to_id=to_id,
                count=len(rows),
                ids=id_runs([n for n, _ in rows]),
                fingerprints=pack_fingerprints(h for _, h in rows),
                digest=digest,
                previous_digest=self.digest,
            )
        )
        self.app.save(*events)
        self.version, self.to_id, self.digest = version, to_id, digest  # once saved


def _uuid(value: UUID | str) -> UUID:
    return value if isinstance(value, UUID) else UUID(str(value))


def seal_store(app: ServiceApplication, service: str) -> int:
    """Seal everything ``app`` has recorded so far (e.g. on a clean shutdown)."""
    return Sealer(app, service).seal()
