"""Dead letters: a refused Kafka record, byte for byte, with the reason and its origin."""

from __future__ import annotations

import base64
import re
from typing import Any

from aiokafka import ConsumerRecord

from contracts import DeadLetter

MAX_DEAD_LETTER_PAYLOAD = 600_000
"""Original bytes kept in a dead letter at most (base64 grows them by a third)."""

_TABLE_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


def dead_letter_for(record: ConsumerRecord[Any, Any], error: str, service: str) -> DeadLetter:
    """The dead letter describing ``record`` and why ``service`` refused it."""
    key = as_text(record.key)
    value = record.value if isinstance(record.value, bytes) else b""
    if len(value) > MAX_DEAD_LETTER_PAYLOAD:  # keep the dead letter under Kafka's 1 MB limit
        value = value[:MAX_DEAD_LETTER_PAYLOAD]
        error = f"{error} (payload truncated to its first {MAX_DEAD_LETTER_PAYLOAD} bytes)"
    return DeadLetter(
        table_id=key if key is not None and _TABLE_ID.match(key) else None,
        original_topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        key=key,
        headers={k: v.decode("utf-8", "replace") for k, v in (record.headers or ())},
        payload_b64=base64.b64encode(value).decode("ascii"),
        error=error,
        service=service,
    )


def as_text(raw: object) -> str | None:
    """A Kafka key as text (bad UTF-8 replaced), or None."""
    if raw is None:
        return None
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "replace")
    return str(raw)
