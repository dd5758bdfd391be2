"""Seal anchors for audit tests: as the relay encodes and signs them, and an attacker's tools.

:func:`relay_anchors` runs a store's seal events through the relay's own record encoder (the
``with_anchors`` mapper, a real Ed25519 signer), giving the records the service would have put
on ``punto-banco.seals``. :func:`reseal` is the attacker with write access to the store: it
recomputes every seal over the rows as they now are, so the store's own chain verifies.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from services.shared.platform.relay import with_anchors
from services.shared.platform.relay.records import (
    SIGNED_TOPICS,
    OutgoingRecord,
    RecordEncoder,
)
from services.shared.platform.security import Keyring, KeyringEntry, Signer
from services.shared.platform.settings import Settings
from services.shared.platform.store import ServiceApplication
from services.shared.platform.store.sealing import (
    SEALED_TOPIC,
    ZERO_DIGEST,
    id_runs,
    pack_fingerprints,
    row_hash,
    seal_digest,
)
from services.tools.audit.anchor_reader import AnchorRecords
from services.tools.audit.stores import Row

SERVICES = ("shoe", "dealing", "settlement")


@dataclass(frozen=True)
class Record:
    """A record on the seals topic: key, value, headers."""

    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


def signers(services: Iterable[str] = SERVICES) -> tuple[dict[str, Signer], Keyring]:
    """A fresh key per service, and the keyring of their public keys."""
    made = {
        service: Signer(f"{service}-1", service, Ed25519PrivateKey.generate())
        for service in services
    }
    keyring = Keyring({s.kid: KeyringEntry(s.kid, s.service, s.public_key) for s in made.values()})
    return made, keyring


def relay_anchors(
    app: ServiceApplication, service: str, signer: Signer | None, partition: int | None = None
) -> list[Record]:
    """The seals topic's records of ``app``'s seals, as its relay encodes and signs them
    (``partition``: as the cell of that partition does)."""
    notifications = app.process_recorder.select_notifications(
        start=1, limit=1_000_000, topics=[SEALED_TOPIC]
    )
    events = [(n.id, app.mapper.to_domain_event(n)) for n in notifications]
    encoder = RecordEncoder(
        Settings.from_env(service, {}),
        with_anchors(lambda event: [], service, partition),
        _no_quarantine,
        signer=signer,
        signed_topics=SIGNED_TOPICS,
        partitions=_one_partition,  # the seals topic of one partition: 0
    )

    async def encoded() -> list[OutgoingRecord]:
        chunks = encoder.chunks(events, [0])
        return [record async for chunk in chunks for record in chunk.markers + chunk.others]

    records = asyncio.run(encoded())
    return [Record(r.key, r.value, list(r.headers)) for r in records]


async def _one_partition(topic: str) -> int:
    return 1


def _no_quarantine(record: OutgoingRecord, reason: str) -> OutgoingRecord:
    raise AssertionError(f"an anchor was quarantined: {reason}")


def read(keyring: Keyring, records: Sequence[Record]) -> AnchorRecords:
    """What the auditor keeps of these records (as ``anchor_reader.read_anchors`` does)."""
    found = AnchorRecords("punto-banco.seals", keyring)
    for offset, record in enumerate(records):
        found.add(record.key, record.value, record.headers, 0, offset)
    found.finish()
    return found


def reseal(rows: Sequence[Row]) -> list[Row]:
    """The rows with every seal recomputed over the rows as they are (the attacker's rewrite:
    the store's own chain verifies again)."""
    out: list[Row] = []
    previous = ZERO_DIGEST
    pending: list[tuple[int, bytes]] = []
    for row in sorted(rows, key=lambda r: r.notification_id):
        if row.topic == SEALED_TOPIC:
            state: dict[str, Any] = json.loads(row.state)
            from_id, to_id = state["from_id"], state["to_id"]
            covered = [(n, h) for n, h in pending if from_id < n <= to_id]
            pending = [(n, h) for n, h in pending if n > to_id]
            state.update(
                digest=seal_digest(previous, from_id, to_id, covered),
                previous_digest=previous,
                ids=id_runs([n for n, _ in covered]),
                count=len(covered),
                fingerprints=pack_fingerprints(h for _, h in covered),
            )
            previous = state["digest"]
            row = row._replace(state=json.dumps(state, separators=(",", ":")).encode())
        hashed = row_hash(
            UUID(bytes=row.originator_id), row.originator_version, row.topic, row.state
        )
        pending.append((row.notification_id, hashed))
        out.append(row)
    return out


def seal_rows(rows: Sequence[Row]) -> list[Row]:
    """The seal rows among ``rows``, in order."""
    return [row for row in rows if row.topic == SEALED_TOPIC]
