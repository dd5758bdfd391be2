"""Seal anchors: the relay publishes every seal of the store as a signed ``SealAnchored``.

``with_anchors(mapper, service)`` wraps a service's ``to_messages``: a ``SealLedger.Sealed``
event becomes one ``SealAnchored`` (topic ``punto-banco.seals``, key = the service's name),
the ledger's ``Started`` nothing. The anchor goes through the outbox like every other fact,
so it is published exactly in the store's order, at least once, and the relay signs it
(``relay_records.SIGNED_TOPICS``) with the service's key, which never lives in the store.
Its ``event_id`` and ``occurred_at`` derive from the stored seal: publishing it again after
a crash gives the same record. ``services.tools.audit.anchors`` checks a store against them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC
from typing import Any
from uuid import uuid5

from contracts import IncidentRaised, SealAnchored
from services.shared.platform.relay.messages import message_id
from services.shared.platform.relay.publishing import publish_one
from services.shared.platform.settings import store_name
from services.shared.platform.store.incidents import IncidentLog
from services.shared.platform.store.sealing import LEDGER_ID, SealLedger


def anchor_message(
    service: str, event: SealLedger.Sealed, partition: int | None = None
) -> SealAnchored:
    """The anchor of one recorded seal (seal number = ledger version - 1: Started is 1);
    ``partition``: the store is that partition's cell's (``partitioned.py``)."""
    sealed_at = event.timestamp
    if sealed_at.tzinfo is None:
        sealed_at = sealed_at.replace(tzinfo=UTC)
    return SealAnchored(
        event_id=message_id(
            uuid5(LEDGER_ID, store_name(service, partition)), event.originator_version
        ),
        occurred_at=sealed_at,
        service=service,
        partition=partition,
        seal=event.originator_version - 1,
        from_id=event.from_id,
        to_id=event.to_id,
        count=event.count,
        digest=event.digest,
        previous_digest=event.previous_digest,
        sealed_at=sealed_at,
    )


def with_anchors(
    mapper: Callable[[Any], Sequence[Any]], service: str, partition: int | None = None
) -> Callable[[Any], Sequence[Any]]:
    """Wrap a service's ``to_messages``: each seal publishes its anchor."""

    def mapped(event: Any) -> Sequence[Any]:
        if isinstance(event, SealLedger.Sealed):
            return [anchor_message(service, event, partition)]
        if isinstance(event, SealLedger.Started):
            return []
        return mapper(event)

    return mapped


def incident_message(event: IncidentLog.Raised) -> IncidentRaised:
    """The message the relay publishes for a recorded incident (its fields by name)."""
    return publish_one(IncidentRaised, event)


def with_incidents(mapper: Callable[[Any], Sequence[Any]]) -> Callable[[Any], Sequence[Any]]:
    """Wrap a service's ``to_messages``: recorded incidents are published too."""

    def mapped(event: Any) -> Sequence[Any]:
        if isinstance(event, IncidentLog.Raised):
            return [incident_message(event)]
        if isinstance(event, IncidentLog.Started):
            return []
        return mapper(event)

    return mapped


def without_seals(mapper: Callable[[Any], Sequence[Any]]) -> Callable[[Any], Sequence[Any]]:
    """Wrap ``to_messages``: seal events publish nothing (the in-process simulation; a running
    service publishes their anchors instead, ``anchors.with_anchors``)."""

    def mapped(event: Any) -> Sequence[Any]:
        if isinstance(event, SealLedger.Started | SealLedger.Sealed):
            return []
        return mapper(event)

    return mapped
