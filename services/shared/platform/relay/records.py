"""The records of a relay batch: stored events -> signed, keyed Kafka records, and quarantine.

:class:`RecordEncoder` maps each event to its messages, encodes them with the relay headers
(``pb-source``, ``pb-notification-id``, ``pb-message-index``, ``pb-type``) and, on
:data:`SIGNED_TOPICS`, ``pb-sig``; the key is the table id. A partition cell writes the topics
services read in its own partition. Dealing's marks go to every operator's bet-commands topic,
first. A record the broker can never take (too large, refused) is replaced by a
``MessageQuarantined`` on the dead-letter topic (:func:`quarantine_record`), and the relay goes on.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid5

import aiokafka.errors as kafka_errors
from aiokafka.errors import (
    BrokerResponseError,
    CorruptRecordException,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
)
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from contracts import (
    BET_COMMANDS,
    BOOK_EVENTS,
    COMMAND_EVENTS,
    SEALS,
    SHOE_COMMANDS,
    SHOE_EVENTS,
    STUDIO_READS,
    TABLE_EVENTS,
    Message,
    MessageQuarantined,
    TableMessage,
    base_topic,
    bet_commands_topic,
    encode,
    partition_key,
    topics_for,
)
from services.shared.platform.kafka import (
    INDEX_HEADER,
    NOTIFICATION_HEADER,
    SIGNATURE_HEADER,
    SOURCE_HEADER,
    TYPE_HEADER,
    key_partition,
)
from services.shared.platform.relay.lines import Lines, LineView
from services.shared.platform.security.signing import Signer, Where
from services.shared.platform.settings import Settings

CHUNK_MESSAGES = 250
"""Messages encoded per step of a batch. The encoder runs on the event loop and gives it back
after each chunk (a few milliseconds), so the batches of the chunks before are sent and
acknowledged meanwhile (BENCHMARKS.md, issue 25: 1,000 or 100 were slower)."""

MAX_MESSAGES_PER_BATCH = 50_000
"""A batch stops after the notification that brings it to this many messages."""

MAX_RECORD_BYTES = 1024 * 1024
"""The largest one-record batch the relay sends: aiokafka's ``max_request_size`` (1 MiB), just
under the broker's default ``max.message.bytes`` (1 MiB + 12 bytes)."""

SIGNED_TOPICS: frozenset[str] = frozenset(
    {
        TABLE_EVENTS,
        COMMAND_EVENTS,
        SHOE_EVENTS,
        SHOE_COMMANDS,
        BOOK_EVENTS,
        BET_COMMANDS,
        SEALS,
        STUDIO_READS,
    }
)
"""Logical topics whose records the relay signs: every owned topic a service reads (the studio
bridge's device reads, for the shoe), dealing's answers to table commands (few, read by the
house's tools), the marks on bet-commands (an operator's topic is signed as its base topic is,
its signature bound to the operator's topic), and the seal anchors (an unsigned anchor proves
nothing). ``BET_EVENTS`` (owned, read by no service: 10,000 BetSettled in one coup) is not
signed by default; ``OutboxRelay(signed_topics=...)`` can add it."""

CELL_TOPICS: frozenset[str] = frozenset(
    {TABLE_EVENTS, SHOE_EVENTS, SHOE_COMMANDS, BOOK_EVENTS, BET_COMMANDS}
)
"""(Base) logical topics the services read: a partition cell writes them in its own partition."""

_SIGNATURE_OVERHEAD = len(SIGNATURE_HEADER) + 10
"""Bytes of the ``pb-sig`` header besides its value, at most (the varints of a record header)."""

Targets = tuple[tuple[str, bytes, bool, bool], ...]
"""Where one message goes: per record, its topic, ``pb-type``, whether it is signed and
whether it goes to the cell's partition."""

EventMapper = Callable[[Any], Sequence[Message]]
"""Stored domain event -> the contract messages to publish (empty: an internal event)."""


@dataclass(slots=True)  # not frozen: built 10,000 at a time, a frozen init costs 3x
class OutgoingRecord:
    notification_id: int
    index: int
    topic: str
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]
    size: int  # an upper bound of a record batch holding only this record
    message: Message | LineView  # for the operations hooks and the quarantine record
    replaces: OutgoingRecord | None = None  # set on a quarantine record: the one it replaces
    partition: int | None = None  # chosen by the encoder (signed, or a cell's); else the producer


@dataclass(slots=True)
class Chunk:
    """Records encoded in one step: the markers (sent and acknowledged first), then the rest."""

    markers: list[OutgoingRecord] = field(default_factory=list)
    others: list[OutgoingRecord] = field(default_factory=list)


Quarantine = Callable[[OutgoingRecord, str], OutgoingRecord]
"""(record, reason) -> the quarantine record that replaces it (``relay/records.py``)."""


class RecordEncoder:
    """Turns a service's stored events into the records its relay sends (module docstring)."""

    def __init__(
        self,
        settings: Settings,
        mapper: EventMapper,
        quarantine: Quarantine,
        *,
        signer: Signer | None,
        signed_topics: frozenset[str],
        partitions: Callable[[str], Awaitable[int]],
    ) -> None:
        self.settings = settings
        self.mapper = mapper
        self.quarantine = quarantine
        self.signer = signer  # None: nothing is signed (tests of the relay alone)
        self.signed_topics = signed_topics  # logical topics
        self.partitions = partitions  # Kafka topic -> its partition count (awaited)
        self.cluster = ""  # the Kafka cluster's id, bound by the signatures (set at start)
        self.max_record_bytes = MAX_RECORD_BYTES  # larger records are quarantined unsent
        self.marker_topics = frozenset(
            settings.topic(bet_commands_topic(operator)) for operator in settings.operators
        )

    async def chunks(
        self, events: Sequence[tuple[int, Any]], done: list[int]
    ) -> AsyncGenerator[Chunk, None]:
        """The records of ``events`` in chunks; ``done[0]``: the last notification mapped.
        It runs on the event loop: the relay sends a chunk's batches while the next is made."""
        # (message class, operator) -> its targets: topic, pb-type, signed, the cell's
        kinds: dict[tuple[type[Any], str | None], Targets] = {}
        places: dict[tuple[str, int], Where] = {}
        cell = self.settings.partition
        marker_topics = self.marker_topics
        source = (SOURCE_HEADER, self.settings.service.encode())
        overhead = self.record_overhead
        largest = self.max_record_bytes
        sign = self.signer.sign if self.signer is not None else None
        chunk = Chunk()
        count = 0
        released = False  # a chunk with other records has been handed out
        for notification_id, event in events:
            if count >= MAX_MESSAGES_PER_BATCH:
                break
            messages = self.mapper(event)
            lines = messages if isinstance(messages, Lines) else None
            # each message's targets, key and whether it is a line (of a fact's Lines)
            where: list[tuple[Targets, bytes, bool]] = []
            shared: tuple[Targets, bytes, bool] | None = None  # a fact's lines': its sample's
            for i in range(len(messages)):
                if lines is not None and lines.is_line(i):
                    if shared is None:
                        sample = lines.sample()
                        shared = (self._targets(sample, kinds), partition_key(sample), True)
                    where.append(shared)
                else:
                    item = messages[i]
                    where.append((self._targets(item, kinds), partition_key(item), False))
            if lines is not None:  # a line is read and written without making its message
                view, encoded = functools.partial(lines.shape.view, lines), lines.encoded
            order: Sequence[int] = range(len(messages))
            marks = {i for i, (targets, _, _) in enumerate(where) if targets[0][0] in marker_topics}
            if marks:  # dealing's marks on bet-commands: sent and acknowledged first
                if released:
                    break
                order = sorted(order, key=lambda i: i not in marks)
            position = (NOTIFICATION_HEADER, str(notification_id).encode())
            message: Message | LineView
            for index in order:
                targets, key, line = where[index]
                if line:
                    message = view(index)
                    value = encoded(index)
                else:
                    message = messages[index]
                    value = encode(message)
                numbered = (INDEX_HEADER, b"%d" % index)
                for topic, kind, signed, own in targets:
                    headers = [source, position, numbered, (TYPE_HEADER, kind)]
                    size = len(key) + len(value) + overhead
                    partition = cell if own else None
                    if signed and sign is not None:
                        if partition is None:
                            partition = key_partition(key, await self.partitions(topic))
                        place = places.get((topic, partition))
                        if place is None:
                            place = places[(topic, partition)] = Where(
                                self.cluster, topic, partition
                            )
                        signature = sign(place, key, value, notification_id, index)
                        headers.append((SIGNATURE_HEADER, signature))
                        size += len(signature) + _SIGNATURE_OVERHEAD
                    record = OutgoingRecord(
                        notification_id,
                        index,
                        topic,
                        key,
                        value,
                        headers,
                        size,
                        message,
                        partition=partition,
                    )
                    if record.size > largest:
                        record = self.checked(record)
                    if topic in marker_topics and record.replaces is None:
                        chunk.markers.append(record)
                    else:
                        chunk.others.append(record)
                    count += 1
                if len(chunk.markers) + len(chunk.others) >= CHUNK_MESSAGES:
                    released = released or bool(chunk.others)
                    yield chunk
                    chunk = Chunk()
            done[0] = notification_id
        if chunk.markers or chunk.others:
            yield chunk

    def _targets(
        self, message: Message, kinds: dict[tuple[type[Any], str | None], Targets]
    ) -> Targets:
        """Where ``message`` goes (worked out once per message class and operator)."""
        kind = (type(message), getattr(message, "operator", None))
        found = kinds.get(kind)
        if found is not None:
            return found
        cell = self.settings.partition is not None
        targets = kinds[kind] = tuple(
            (
                self.settings.topic(logical),
                message.type.encode(),
                base_topic(logical) in self.signed_topics,
                cell and base_topic(logical) in CELL_TOPICS,
            )
            for logical in topics_for(message, self.settings.operators)
        )
        return targets

    @property
    def record_overhead(self) -> int:
        """Bytes of a one-record batch besides its key and value, at most (its headers'
        values taken at their largest: 20 digits, a 64-character type)."""
        headers = [
            (SOURCE_HEADER, self.settings.service.encode()),
            (NOTIFICATION_HEADER, b"9" * 20),
            (INDEX_HEADER, b"9" * 20),
            (TYPE_HEADER, b"T" * 64),
        ]
        return int(DefaultRecordBatchBuilder.estimate_size_in_bytes(b"", b"", headers)) + 8

    def checked(self, record: OutgoingRecord) -> OutgoingRecord:
        """``record`` with its exact size, or its quarantine record when it is too large."""
        record.size = DefaultRecordBatchBuilder.estimate_size_in_bytes(
            record.key, record.value, record.headers
        )
        if record.size <= self.max_record_bytes:
            return record
        return self.quarantine(
            record,
            f"{record.size} bytes as a Kafka record, more than the {self.max_record_bytes} "
            "bytes the relay sends",
        )


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
        table_id=original.table_id if isinstance(original, TableMessage | LineView) else None,
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
