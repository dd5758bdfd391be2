"""Log setup of a service process: readable text (default) or JSON lines.

``PB_LOG_FORMAT=json`` (settings ``log_format``) writes one JSON object per line
on standard error::

    {"ts": "2026-11-30T04:30:00.123Z", "level": "INFO", "service": "settlement",
     "logger": "services.shared.platform.consumer", "message": "...",
     "table_id": "demo-1", "coup_id": "c-12", "bet_id": "b-7"}

The ids come from the message being handled: the consumer's adapters
(``per_message``, ``with_unit_of_work``) wrap each handler call in
:func:`message_context`, so anything a service logs while handling a message
carries its ``table_id``, ``coup_id`` and ``bet_id`` (when the message has them);
``extra={"table_id": ...}`` on a log call works too. Text logs append them as
``[table=... coup=... bet=...]``.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime

IDS = ("table_id", "coup_id", "bet_id")
_context: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "pb_log_context", default=None
)


def ids_of(message: object) -> dict[str, str]:
    """The table, coup and bet ids a message carries (those it has)."""
    out: dict[str, str] = {}
    for name in IDS:
        value = getattr(message, name, None)
        if isinstance(value, str) and value:
            out[name] = value
    return out


@contextlib.contextmanager
def message_context(message: object) -> Iterator[None]:
    """Log records made inside carry the ids of ``message``."""
    token = _context.set(ids_of(message))
    try:
        yield
    finally:
        _context.reset(token)


def _ids(record: logging.LogRecord) -> dict[str, str]:
    ids = dict(_context.get() or {})
    for name in IDS:
        value = record.__dict__.get(name)
        if value:
            ids[name] = str(value)
    return ids


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring)."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.fromtimestamp(record.created, UTC)
        data: dict[str, object] = {
            "ts": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "service": self.service,
            "logger": record.name,
            "message": record.getMessage(),
        }
        data.update(_ids(record))
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """The classic line, with the message ids appended when there are any."""

    def __init__(self, service: str) -> None:
        super().__init__(f"%(asctime)s %(levelname)s [{service}] %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ids = _ids(record)
        if not ids:
            return line
        tail = " ".join(f"{name.removesuffix('_id')}={value}" for name, value in ids.items())
        first, newline, rest = line.partition("\n")
        return f"{first} [{tail}]{newline}{rest}"


def configure_logging(service: str, level: str = "INFO", fmt: str = "text") -> None:
    """Root logging of a service process: level, text or JSON lines, on standard error."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service) if fmt == "json" else TextFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
