"""Dead letters: a refused record, its reason and its origin, always within bounds.

:func:`dead_letter_for` never fails whatever the record holds: the value's first 256 KiB in
base64 with the whole original's size and SHA-256, key and headers as text (bounded, at most 32
headers), the error cut to 2,000 characters; under 512 KiB encoded. :class:`DeadLetterSender`
publishes each refused record once per reading.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer, ConsumerRecord, TopicPartition

from contracts import DEAD_LETTERS, DeadLetter, encode, partition_key
from contracts.dead_letter import MAX_DEAD_LETTER_PAYLOAD, MAX_HEADER_CHARS, MAX_HEADERS
from services.shared.platform.consumer.intake import TABLE_ID, valid_as
from services.shared.platform.settings import Settings

log = logging.getLogger(__name__)

MAX_ERROR_CHARS = 2000
"""Characters of ``DeadLetter.error`` (its contract's bound)."""

MAX_TOPIC_CHARS = 249


def dead_letter_for(record: ConsumerRecord[Any, Any], error: str, service: str) -> DeadLetter:
    """The dead letter describing ``record`` and why ``service`` refused it."""
    notes: list[str] = []
    key = bounded_text(record.key)
    headers = _headers(record.headers, notes)
    payload, size, digest = _payload(record.value)
    if size is not None and size > len(payload):
        notes.append(f"payload truncated to its first {len(payload)} of {size} bytes")
    return DeadLetter(
        table_id=valid_as(TABLE_ID, key),
        original_topic=bounded_text(record.topic, MAX_TOPIC_CHARS) or "?",
        partition=_clamp(record.partition, 2**31 - 1),
        offset=_clamp(record.offset, 2**63 - 1),
        key=key,
        headers=headers,
        payload_b64=base64.b64encode(payload).decode("ascii"),
        payload_size=size,
        payload_sha256=digest,
        error=_error(error, notes),
        service=service,
    )


class DeadLetterSender:
    """Publishes a consumer's dead letters: each refused record once while it is being read."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._sent: dict[TopicPartition, set[int]] = {}

    async def send(
        self, producer: AIOKafkaProducer, items: Sequence[tuple[ConsumerRecord[Any, Any], str]]
    ) -> int:
        """Publish a dead letter for each (record, error) not sent yet; how many were sent."""
        futures = []
        sent: list[tuple[TopicPartition, int]] = []
        for record, error in items:
            tp = TopicPartition(record.topic, record.partition)
            if record.offset in self._sent.get(tp, ()):
                continue
            letter = dead_letter_for(record, error, self.settings.service)
            log.warning(
                "dead letter: %s:%d@%d: %s",
                record.topic,
                record.partition,
                record.offset,
                letter.error,
                extra={"table_id": letter.table_id},  # structured logs (logs.py)
            )
            futures.append(
                await producer.send(
                    self.settings.topic(DEAD_LETTERS),
                    value=encode(letter),
                    key=partition_key(letter),  # its table id, else its bounded key
                )
            )
            sent.append((tp, record.offset))
        await asyncio.gather(*futures)
        for tp, offset in sent:
            self._sent.setdefault(tp, set()).add(offset)
        return len(sent)

    def done(self, tp: TopicPartition) -> None:
        """``tp``'s batch is done (or the partition went elsewhere): forget its offsets."""
        self._sent.pop(tp, None)


def bounded_text(raw: object, limit: int = MAX_HEADER_CHARS) -> str | None:
    """``raw`` (bytes or text) as text of at most ``limit`` characters; None stays None."""
    if raw is None:
        return None
    if isinstance(raw, bytes | bytearray | memoryview):
        text = bytes(raw[: limit * 4]).decode("utf-8", "replace")
    else:
        text = str(raw)[:limit].encode("utf-8", "replace").decode("utf-8")
    return text[:limit]


def _headers(raw: Iterable[tuple[Any, Any]] | None, notes: list[str]) -> dict[str, str | None]:
    every = list(raw or ())
    headers: dict[str, str | None] = {}
    for name, value in every[:MAX_HEADERS]:
        text = bounded_text(name) or ""
        seen = 1
        unique = text
        while unique in headers:
            seen += 1
            suffix = f" ({seen})"
            unique = text[: MAX_HEADER_CHARS - len(suffix)] + suffix
        headers[unique] = bounded_text(value)
    if len(every) > MAX_HEADERS:
        notes.append(f"{len(every)} headers, the first {MAX_HEADERS} kept")
    return headers


def _payload(value: object) -> tuple[bytes, int | None, str | None]:
    if value is None:
        return b"", None, None
    if isinstance(value, bytes | bytearray | memoryview):
        whole = bytes(value)
    else:
        whole = str(value).encode("utf-8", "replace")
    return whole[:MAX_DEAD_LETTER_PAYLOAD], len(whole), hashlib.sha256(whole).hexdigest()


def _error(error: str, notes: list[str]) -> str:
    tail = f" ({'; '.join(notes)})" if notes else ""
    text = bounded_text(error, MAX_ERROR_CHARS) or ""
    if len(text) + len(tail) > MAX_ERROR_CHARS:
        cut = "..."
        text = text[: MAX_ERROR_CHARS - len(tail) - len(cut)] + cut
    return (text + tail)[:MAX_ERROR_CHARS]


def _clamp(number: object, top: int) -> int:
    return min(max(number, 0), top) if isinstance(number, int) else 0
