"""What one partition's fetched records become: fresh deliveries, duplicates, refused records.

Run in the service's worker thread (it reads the store's tracking position), before any
handler is called (``handling.py``), for the records of ONE topic-partition, in order:

1. Each record has a tracking position (:func:`record_position`, ``tracking.py``). On a topic
   with an owner (``contracts.TOPIC_OWNERS``) it comes from the owner's relay headers, checked
   strictly; a record whose headers are missing, repeated, malformed, out of range or from
   another source is REFUSED (a dead letter, never a position). On the other topics the
   ``pb-*`` headers are ignored and records are tracked by offset.
2. Then the writer's signature (``pb-sig``, ``signing.py``), before anything is tracked or
   handled: on an owned topic every record must be signed by a key of the topic's owner (the
   keyring), for its own topic, key and relay position, except on bet-events (:data:`UNSIGNED`:
   settlement does not sign its 10,000 BetSettled a coup; only settlement may write it, the
   broker's ACLs say, and only the gateway reads it); elsewhere a message that only a
   service may send (``contracts.MESSAGE_SOURCES``: dealing's ``OpenBook`` / ``CloseBook`` on
   bet-commands, which gateways also write) must be signed by that service, for the position
   its relay headers give. A record that fails is refused (``signature: ...``), never a
   position; commands from outside need no signature.
3. Records at or below the recorded position are duplicates (a redelivery after a crash, or a
   relay republishing): skipped, never handed to a handler.
4. A fresh record without a value or that does not decode (``ContractError``) is refused too,
   but it takes its position: its partition goes on past it.

Refused records keep their original record (bytes, key, headers) for the dead letter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiokafka import ConsumerRecord
from eventsourcing.persistence import Tracking

from contracts import (
    BET_EVENTS,
    EXTERNAL,
    MESSAGE_SOURCES,
    TOPIC_OWNERS,
    ContractError,
    Message,
    base_topic,
    decode,
)
from services.shared.platform.application import ServiceApplication
from services.shared.platform.dead_letters import as_text
from services.shared.platform.deliveries import Delivery
from services.shared.platform.kafka import SIGNATURE_HEADER
from services.shared.platform.signing import Keyring, verify
from services.shared.platform.tracking import (
    MESSAGES_PER_NOTIFICATION,
    Headers,
    UntrustedHeaders,
    relayed_position,
)

Position = int | UntrustedHeaders
"""A record's tracking position, or why its headers are refused."""


@dataclass
class Refused:
    """A record that goes to the dead letters, and why."""

    record: ConsumerRecord[Any, Any]
    error: str


@dataclass
class Intake:
    """One partition's records sorted out (see the module docstring)."""

    name: str  # the partition's tracking name
    fresh: list[Delivery] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    raw: dict[int, ConsumerRecord[Any, Any]] = field(default_factory=dict)  # fresh, by offset
    duplicates: int = 0
    last: int | None = None  # the last fresh position (valid or not)


def record_position(logical: str, record: ConsumerRecord[Any, Any]) -> Position:
    """The record's tracking position (``tracking.py``), or why it is refused."""
    owner = TOPIC_OWNERS.get(logical)
    if owner is None:
        return int(record.offset) + 1
    try:
        return relayed_position(record.headers, owner)
    except UntrustedHeaders as refused:
        return refused


UNSIGNED = frozenset({BET_EVENTS})
"""Owned topics whose writer does not sign (``relay_records.SIGNED_TOPICS`` leaves them out):
their relay headers are checked, not a signature."""


class RecordIntake:
    """Sorts out one partition's records against the store's position and the keyring."""

    def __init__(self, app: ServiceApplication, keyring: Keyring) -> None:
        self.app = app
        self.keyring = keyring  # who may write what (signing.py): every service's public keys

    def sort(
        self,
        logical: str,
        partition: int,
        name: str,
        records: list[tuple[ConsumerRecord[Any, Any], Position]],
    ) -> Intake:
        """Drop duplicates, decode the rest (the refused and invalid ones go to dead letters)."""
        intake = Intake(name)
        recorded = self.app.tracked_position(name)
        owner = TOPIC_OWNERS.get(logical)
        signed = owner is not None and base_topic(logical) not in UNSIGNED
        for record, position in records:
            if isinstance(position, UntrustedHeaders):
                intake.refused.append(Refused(record, f"untrusted headers: {position.reason}"))
                continue
            if signed and owner is not None:
                refused = self._signature(owner, logical, record, position)
                if refused is not None:
                    intake.refused.append(Refused(record, f"signature: {refused}"))
                    continue
            if position <= recorded:
                intake.duplicates += 1
                continue
            recorded = position
            intake.last = position
            if record.value is None:
                intake.refused.append(Refused(record, "empty message (no value)"))
                continue
            try:
                message = decode(logical, record.value)
            except ContractError as error:
                intake.refused.append(Refused(record, error.reason))
                continue
            source = owner or _sender(message)
            if owner is None and source is not None:  # a service's message on a shared topic
                refused = self._signature(source, logical, record, None)
                if refused is not None:
                    intake.refused.append(Refused(record, f"signature: {refused}"))
                    continue
            intake.raw[record.offset] = record
            intake.fresh.append(
                Delivery(
                    message=message,
                    topic=logical,
                    partition=partition,
                    offset=record.offset,
                    key=as_text(record.key),
                    source=source,
                    tracking=Tracking(name, position),
                    timestamp=record.timestamp,
                    timestamp_type=record.timestamp_type,
                )
            )
        return intake

    def _signature(
        self,
        signer: str,
        logical: str,
        record: ConsumerRecord[Any, Any],
        position: int | None,
    ) -> str | None:
        """Why ``record`` is not ``signer``'s (signing.verify), or None when it is.

        ``position``: the record's relay position, read from its headers when None.
        """
        if position is None:
            try:
                position = relayed_position(record.headers, signer)
            except UntrustedHeaders as refused:
                return f"its relay position cannot be read: {refused.reason}"
        header = _only(record.headers, SIGNATURE_HEADER)
        if isinstance(header, _Repeated):
            return f"header {SIGNATURE_HEADER} appears more than once"
        notification_id, index = divmod(position, MESSAGES_PER_NOTIFICATION)
        return verify(
            self.keyring,
            signer,
            logical,
            record.key,
            record.value,
            notification_id,
            index,
            header,
        )


def _sender(message: Message) -> str | None:
    """The one service that may send ``message``; None for a message from outside."""
    sender = MESSAGE_SOURCES.get(type(message).__name__)
    return None if sender is None or sender == EXTERNAL else sender


class _Repeated:
    """A header found more than once."""


def _only(headers: Headers, name: str) -> bytes | _Repeated | None:
    """The value of the header ``name`` (None when absent or null), or _Repeated."""
    found: list[bytes | None] = [value for key, value in headers or () if key == name]
    if len(found) > 1:
        return _Repeated()
    return found[0] if found else None
