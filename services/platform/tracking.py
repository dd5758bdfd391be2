"""Where a Kafka record stands in its source's order: the consumer's tracking position.

eventsourcing 9.5 records tracking in ONE row per ``application_name`` and
refuses a ``notification_id`` that is not greater than the recorded one, so
every name must see strictly increasing positions:

- a message published by a project relay (headers ``pb-source``,
  ``pb-notification-id``, ``pb-message-index``) is tracked as
  ``"<source>:<topic>:<partition>"`` at ``notification_id * 2**20 + index``
  (the relay publishes in notification order and one stored event may become
  many messages, so this increases within a partition);
- any other message (an external command) as ``"<topic>:<partition>"`` at
  ``offset + 1``.
"""

from __future__ import annotations

from collections.abc import Sequence

from eventsourcing.persistence import Tracking

from services.platform.kafka import INDEX_HEADER, NOTIFICATION_HEADER, SOURCE_HEADER

MESSAGES_PER_NOTIFICATION = 2**20
"""Positions of relayed messages: notification_id * this + message index."""

Headers = Sequence[tuple[str, bytes]] | None


def header(headers: Headers, name: str) -> str | None:
    """The value of header ``name`` as text, or None."""
    for key, value in headers or ():
        if key == name:
            try:
                return value.decode("utf-8")
            except (UnicodeDecodeError, AttributeError):
                return None
    return None


def position_of(logical_topic: str, partition: int, offset: int, headers: Headers) -> Tracking:
    """The tracking name and position of a Kafka record (see the module docstring)."""
    source = header(headers, SOURCE_HEADER)
    notification = header(headers, NOTIFICATION_HEADER)
    if source and notification and notification.isdigit():
        index_raw = header(headers, INDEX_HEADER) or "0"
        index = int(index_raw) if index_raw.isdigit() else 0
        if index < MESSAGES_PER_NOTIFICATION:
            return Tracking(
                f"{source}:{logical_topic}:{partition}",
                int(notification) * MESSAGES_PER_NOTIFICATION + index,
            )
    return Tracking(f"{logical_topic}:{partition}", offset + 1)
