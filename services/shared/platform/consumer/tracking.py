"""Where a Kafka record stands in its source's order: the consumer's tracking position.

eventsourcing 9.5 records tracking in ONE row per ``application_name`` and
refuses a ``notification_id`` that is not greater than the recorded one, so
every name must see strictly increasing positions. A partition has one name:

- on a topic with an owner (``contracts.TOPIC_OWNERS``: the one service whose
  outbox relay writes it) a record is tracked as ``"<owner>:<logical topic>:<partition>"``
  at ``notification_id * 2**20 + index``, from the relay's headers ``pb-source``,
  ``pb-notification-id`` and ``pb-message-index`` (the relay publishes in notification
  order and one stored event may become many messages, so this increases within a
  partition; one writer numbers it: the record's signature binds its partition, and only that
  partition's cell of the owner, or its one unpartitioned instance, signs for it
  (``relay_records.py``), so no other cell's positions reach this name). Those headers are
  checked strictly (:func:`relayed_position`): each exactly once, ``pb-source`` equal to the
  owner, the id 1-15 digits (no sign, no leading zero, at least 1), the index 1-7 digits
  below 2**20, the position below 2**63 (a PostgreSQL ``bigint``, a SQLite integer). A
  record that fails is refused (:class:`UntrustedHeaders`, a dead letter), never a position;
- on every other topic (commands from outside, which any client may write) the
  ``pb-*`` headers mean nothing: a record is tracked by its offset, as
  ``"<cluster id>:<kafka topic>:<topic id>:<partition>"`` at ``offset + 1``.

An offset only means something in ONE Kafka log: a new cluster, a new topic prefix
or a topic deleted and created again under the same name (a new topic id,
``topic_ids.py``) starts a new name at 0, instead of skipping the new log's first
offsets as "already handled". A relayed position counts the upstream store's
notification log, which none of these restart, so its name holds none of them: a
message republished to another cluster is still recognised.

Stores written before topic ids named offsets ``"<cluster id>:<kafka topic>:<partition>"``.
:func:`adopt_legacy_position` carries such a position over to the topic-id name ONCE,
for the topic that was being read: the first time a partition is read with topic ids,
the legacy name is claimed for the current topic id by a marker row (one tracking row,
so the claim is atomic); only the claiming id ever takes the legacy position. A topic
whose log ends before the legacy position cannot be the one it was read from, so the
claim then goes to no topic (the marker says so). The one case it cannot tell: a topic
deleted and recreated (and refilled past the old position) between the last run without
topic ids and the first run with them.

Without a cluster id (tests, in-memory simulation) the offset-based name has no
cluster part; without a topic id, no topic-id part.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Sequence

from eventsourcing.persistence import IntegrityError, Tracking

from contracts import TOPIC_OWNERS
from services.shared.platform.kafka import INDEX_HEADER, NOTIFICATION_HEADER, SOURCE_HEADER
from services.shared.platform.store.application import ServiceApplication

MESSAGES_PER_NOTIFICATION = 2**20
"""Positions of relayed messages: notification_id * this + message index."""

MAX_POSITION = 2**63 - 1
"""The largest tracking position a store keeps (PostgreSQL bigint, SQLite integer)."""

Headers = Sequence[tuple[str, bytes | None]] | None

_RELAY_HEADERS = (SOURCE_HEADER, NOTIFICATION_HEADER, INDEX_HEADER)
_NOTIFICATION = re.compile(rb"[1-9][0-9]{0,14}")  # 1-15 digits, no leading zero, >= 1
_INDEX = re.compile(rb"0|[1-9][0-9]{0,6}")  # 1-7 digits, no leading zero
_SHOWN = 40  # characters of a refused header value quoted in the error

CLAIM_SUFFIX = ":topic-id-claim"
"""Suffix of the marker naming which topic id took over a legacy offset name."""

UNCLAIMED = 1
"""Marker value: the legacy position belongs to no topic read since."""


class UntrustedHeaders(ValueError):
    """A record on an owned topic whose relay headers cannot be trusted; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def header(headers: Headers, name: str) -> str | None:
    """The value of header ``name`` as text (its first occurrence), or None."""
    for key, value in headers or ():
        if key == name:
            try:
                return value.decode("utf-8") if isinstance(value, bytes) else None
            except UnicodeDecodeError:
                return None
    return None


def relayed_tracking_name(owner: str, logical_topic: str, partition: int) -> str:
    """The tracking name of a relayed topic's partition (see the module docstring)."""
    return f"{owner}:{logical_topic}:{partition}"


def offset_tracking_name(
    cluster_id: str | None, topic: str, partition: int, topic_id: str | None = None
) -> str:
    """The tracking name of records tracked by offset (see the module docstring)."""
    parts = [part for part in (cluster_id, topic, topic_id) if part]
    return ":".join([*parts, str(partition)])


def relayed_position(headers: Headers, owner: str) -> int:
    """The position of a record published by ``owner``'s relay, from its headers.

    Raises :class:`UntrustedHeaders` when a header is missing, repeated, malformed, out of
    range, or names another source.
    """
    found: dict[str, bytes | None] = {}
    for key, value in headers or ():  # one pass: this runs for every record consumed
        if key in _RELAY_HEADERS:
            if key in found:
                raise UntrustedHeaders(f"header {key} appears more than once")
            found[key] = value
    for key in _RELAY_HEADERS:
        if key not in found:
            raise UntrustedHeaders(
                f"header {key} is missing (only {owner}'s outbox relay publishes here)"
            )
        if not isinstance(found[key], bytes):
            raise UntrustedHeaders(f"header {key} has no value")
    source = found[SOURCE_HEADER]
    if source != owner.encode():
        raise UntrustedHeaders(
            f"header {SOURCE_HEADER} is {_shown(source)}, but only {owner} publishes here"
        )
    notification = _number(found[NOTIFICATION_HEADER], NOTIFICATION_HEADER, _NOTIFICATION)
    index = _number(found[INDEX_HEADER], INDEX_HEADER, _INDEX)
    if index >= MESSAGES_PER_NOTIFICATION:
        raise UntrustedHeaders(
            f"header {INDEX_HEADER} is {index}, not below {MESSAGES_PER_NOTIFICATION}"
        )
    position = notification * MESSAGES_PER_NOTIFICATION + index
    if position > MAX_POSITION:
        raise UntrustedHeaders(
            f"header {NOTIFICATION_HEADER} is {notification}: its position "
            f"{notification} * 2**20 + {index} does not fit 63 bits"
        )
    return position


def _number(raw: bytes | None, name: str, pattern: re.Pattern[bytes]) -> int:
    if raw is None or pattern.fullmatch(raw) is None:
        wanted = "1-15 digits, from 1" if name == NOTIFICATION_HEADER else "1-7 digits"
        raise UntrustedHeaders(
            f"header {name} is {_shown(raw)}, not a decimal number ({wanted}, no leading zero)"
        )
    return int(raw)


def _shown(raw: bytes | None) -> str:
    text = repr(raw[: _SHOWN + 1]) if raw is not None else "null"
    return text if raw is None or len(raw) <= _SHOWN else text + "..."


def position_of(
    logical_topic: str,
    partition: int,
    offset: int,
    headers: Headers,
    *,
    topic: str | None = None,
    cluster_id: str | None = None,
    topic_id: str | None = None,
) -> Tracking:
    """The tracking name and position of a Kafka record (see the module docstring).

    ``topic`` is the record's real (prefixed) topic, ``logical_topic`` without it when
    omitted. Raises :class:`UntrustedHeaders` for a refused record of an owned topic.
    """
    owner = TOPIC_OWNERS.get(logical_topic)
    if owner is not None:
        name = relayed_tracking_name(owner, logical_topic, partition)
        return Tracking(name, relayed_position(headers, owner))
    name = offset_tracking_name(cluster_id, topic or logical_topic, partition, topic_id)
    return Tracking(name, offset + 1)


# ---- stores written before topic ids -----------------------------------------------------


def topic_id_claim(topic_id: str) -> int:
    """The marker value naming ``topic_id``: 62 bits of its SHA-256, from 2 (1 is UNCLAIMED)."""
    digest = hashlib.sha256(topic_id.encode("utf-8")).digest()
    return 2 + (int.from_bytes(digest[:8], "big") >> 2)


def adopt_legacy_position(
    app: ServiceApplication, legacy: str, name: str, topic_id: str, end_offset: int
) -> int:
    """Carry ``legacy``'s position over to ``name`` once, for the topic it was read from.

    ``end_offset`` is the partition's current end (its high watermark). Returns the
    position taken over (0 when none). Idempotent; safe when two processes race.
    """
    position = app.tracked_position(legacy)
    if not position:
        return 0
    marker = legacy + CLAIM_SUFFIX
    claim = app.tracked_position(marker)
    if not claim:
        # The record at offset position - 1 was read: a log that ends before it is not the
        # log the legacy name counted (a topic deleted and created again).
        wanted = topic_id_claim(topic_id) if end_offset >= position else UNCLAIMED
        claim = _record_once(app, marker, wanted)
    if claim != topic_id_claim(topic_id):
        return 0
    if app.tracked_position(name) < position:
        _record_once(app, name, position)
    return position


def _record_once(app: ServiceApplication, name: str, position: int) -> int:
    """Record ``position`` for a new ``name``; what is recorded if another did it first."""
    with contextlib.suppress(IntegrityError):
        app.record_position(name, position)
    return app.tracked_position(name)
