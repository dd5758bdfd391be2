"""Helpers for a service's messages.py: stable envelopes for relayed messages.

A relay may publish the same stored event twice (after a crash); the message
must then be identical, so its ``event_id`` and ``occurred_at`` are derived from
the stored event, never generated at publish time.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid5

NAMESPACE = UUID("6f1c1d2e-9a57-4b53-8a43-2f0c1b7d9e10")


def message_id(originator_id: UUID, originator_version: int, index: int = 0) -> UUID:
    """Deterministic id of the ``index``-th message published for a stored event."""
    return uuid5(NAMESPACE, f"{originator_id}:{originator_version}:{index}")


def envelope(event: Any, index: int = 0) -> dict[str, Any]:
    """``event_id`` and ``occurred_at`` for the ``index``-th message made from ``event``."""
    timestamp: datetime = event.timestamp
    if timestamp.tzinfo is None:
        timestamp = timestamp.replace(tzinfo=UTC)
    return {
        "event_id": message_id(event.originator_id, event.originator_version, index),
        "occurred_at": timestamp,
    }
