"""What the broker will never accept from the relay, and the quarantine record put in its place.

A message the broker can never accept is not retried forever:

- before sending, a record whose single-record batch would exceed the relay's
  ``max_record_bytes`` (1 MiB: the producer's ``max_request_size`` and, with 12 bytes to
  spare, the broker's default ``max.message.bytes``) is replaced at once
  (``relay_records.py``);
- when the broker refuses a batch with one of :data:`REFUSALS` (a topic configured with a
  lower ``max.message.bytes``, a record it finds invalid), the records of that batch are sent
  again one per batch; one refused alone is replaced (``relay_pipeline.py``). After a batch is
  refused as too large, the topic's batches are kept to half its size (halved again on every
  such refusal, until the relay restarts: ``relay_producer.py``).

A replaced message stays in the event store; in its place :func:`quarantine_record` makes a
:class:`contracts.MessageQuarantined` (type, id, size, SHA-256, reason, notification id and
index) for the dead-letters topic, with the original key and the original's ``pb-*`` position
headers, and the relay goes on with the messages behind it. The alarm: an ERROR log at once,
and once the batch is recorded the relay's ``quarantined`` counter and its ``on_quarantined``
hook (the quarantine records, for the metrics). Nothing else is taken as a refusal: an
unreachable broker only delays (the idempotent producer retries the batches in flight, in
order, until it answers), and any other failure (a timeout, an authorisation or unknown server
error, a timestamp out of the topic's range) fails the relay batch, which is published again
from the recorded position after a back-off, with a new producer.
"""

from __future__ import annotations

import hashlib
import logging
from uuid import uuid5

import aiokafka.errors as kafka_errors
from aiokafka.errors import (
    BrokerResponseError,
    CorruptRecordException,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
)
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from contracts import MessageQuarantined, TableMessage, encode
from services.shared.platform.kafka import TYPE_HEADER
from services.shared.platform.relay.relay_records import OutgoingRecord

log = logging.getLogger(__name__)


class InvalidRecordError(BrokerResponseError):  # type: ignore[misc]
    """INVALID_RECORD (87): the broker refused a record as invalid (e.g. no key on a compacted
    topic). aiokafka 0.14 has no class for this code and reports an UnknownError, which also
    stands for transient server errors; registering it lets the relay tell the two apart."""

    errno = 87
    message = "INVALID_RECORD"
    description = "The broker refused a record of the batch as invalid."


kafka_errors.kafka_errors.setdefault(InvalidRecordError.errno, InvalidRecordError)

SIZE_REFUSALS: tuple[type[Exception], ...] = (MessageSizeTooLargeError, RecordListTooLargeError)
"""The broker refused a batch as larger than the topic allows."""

REFUSALS: tuple[type[Exception], ...] = (
    *SIZE_REFUSALS,
    InvalidRecordError,
    CorruptRecordException,  # what brokers older than INVALID_RECORD answer for an invalid record
)
"""The broker will never append this batch: its records are tried alone, then quarantined.

Every other failure is taken as transient (retried from the recorded position): an unknown
server error, a timestamp out of the topic's range (the relay's clock), authorisation..."""


def quarantine_record(
    record: OutgoingRecord, reason: str, *, service: str, dead_letter_topic: str, relay: str
) -> OutgoingRecord:
    """The MessageQuarantined record (``dead_letter_topic``, same key and position headers)
    that replaces ``record``; logs the alarm (``relay``: the relay's name, for the log)."""
    original = record.message
    log.error(
        "relay %s QUARANTINED %s %s (notification %d, message %d, %d bytes) meant for %s: "
        "%s; a MessageQuarantined goes to %s instead and the relay goes on",
        relay,
        original.type,
        original.event_id,
        record.notification_id,
        record.index,
        len(record.value),
        record.topic,
        reason,
        dead_letter_topic,
    )
    message = MessageQuarantined(
        event_id=uuid5(original.event_id, MessageQuarantined.__name__),  # same every time
        occurred_at=original.occurred_at,
        causation_id=original.event_id,
        correlation_id=original.correlation_id,
        table_id=original.table_id if isinstance(original, TableMessage) else None,
        service=service,
        original_topic=record.topic,
        message_type=original.type,
        message_id=original.event_id,
        notification_id=record.notification_id,
        message_index=record.index,
        size=len(record.value),
        sha256=hashlib.sha256(record.value).hexdigest(),
        reason=_bounded(reason),
    )
    value = encode(message)
    headers = [*record.headers[:3], (TYPE_HEADER, message.type.encode())]
    return OutgoingRecord(
        notification_id=record.notification_id,
        index=record.index,
        topic=dead_letter_topic,
        key=record.key,
        value=value,
        headers=headers,
        size=DefaultRecordBatchBuilder.estimate_size_in_bytes(record.key, value, headers),
        message=message,
        replaces=record,
    )


def _bounded(reason: str, limit: int = 2000) -> str:
    """``reason`` cut to the length a MessageQuarantined takes."""
    return reason if len(reason) <= limit else reason[: limit - 3] + "..."
