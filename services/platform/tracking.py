"""Where a Kafka record stands in its source's order: the consumer's tracking position.

eventsourcing 9.5 records tracking in ONE row per ``application_name`` and
refuses a ``notification_id`` that is not greater than the recorded one, so
every name must see strictly increasing positions:

- a message published by a project relay (headers ``pb-source``,
  ``pb-notification-id``, ``pb-message-index``) is tracked as
  ``"<source>:<logical topic>:<partition>"`` at ``notification_id * 2**20 + index``
  (the relay publishes in notification order and one stored event may become
  many messages, so this increases within a partition);
- any other message (an external command) as
  ``"<cluster id>:<kafka topic>:<partition>"`` at ``offset + 1``.

Why the two differ: an offset only means something in ONE Kafka log, so an
offset-based name holds the Kafka cluster's id and the topic's real (prefixed)
name. A store reused with a new Kafka, or with a new topic prefix, then starts
a new name at 0 instead of skipping the new log's first offsets as "already
handled". A relayed position counts the upstream store's notification log,
which does not start again with a new Kafka or prefix (the relay records its
own position in that store), so its name stays free of the cluster and the
prefix: a message republished to another cluster is still recognised.
Without a cluster id (tests, in-memory simulation) the offset-based name is
``"<kafka topic>:<partition>"``.
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


def offset_tracking_name(cluster_id: str | None, topic: str, partition: int) -> str:
    """The tracking name of records tracked by offset (see the module docstring)."""
    where = f"{topic}:{partition}"
    return f"{cluster_id}:{where}" if cluster_id else where


def position_of(
    logical_topic: str,
    partition: int,
    offset: int,
    headers: Headers,
    *,
    topic: str | None = None,
    cluster_id: str | None = None,
) -> Tracking:
    """The tracking name and position of a Kafka record (see the module docstring).

    ``topic`` is the record's real (prefixed) topic, ``logical_topic`` without it when
    omitted; ``cluster_id`` the Kafka cluster's id.
    """
    source = notification = index_raw = None
    for key, value in headers or ():  # one pass: this runs for every record consumed
        if key == SOURCE_HEADER:
            source = value
        elif key == NOTIFICATION_HEADER:
            notification = value
        elif key == INDEX_HEADER:
            index_raw = value
    if source and isinstance(notification, bytes) and notification.isdigit():
        index = int(index_raw) if isinstance(index_raw, bytes) and index_raw.isdigit() else 0
        if index < MESSAGES_PER_NOTIFICATION:
            try:
                name = source.decode("utf-8")
            except (UnicodeDecodeError, AttributeError):
                name = ""
            if name:
                return Tracking(
                    f"{name}:{logical_topic}:{partition}",
                    int(notification) * MESSAGES_PER_NOTIFICATION + index,
                )
    return Tracking(offset_tracking_name(cluster_id, topic or logical_topic, partition), offset + 1)
