"""Log setup of a process: readable text (default) or JSON lines (``PB_LOG_FORMAT=json``), each
carrying the table, coup and bet ids of the message being handled (:func:`message_context`).
A value may forge no line and drive no terminal: control characters, line separators and
bidirectional overrides are written as escapes.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import re
import sys
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime

from services.shared.platform.settings import Settings

IDS = ("table_id", "coup_id", "bet_id")
_context: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "pb_log_context", default=None
)


_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""Control characters (C0, DEL, C1), line and paragraph separators, bidirectional overrides."""
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(found: re.Match[str]) -> str:
    char = found.group()
    code = ord(char)
    return _SHORT.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def escaped(text: str) -> str:
    """``text`` with every character of :data:`_UNSAFE` written as its escape: one line, and
    nothing a terminal acts on."""
    return _UNSAFE.sub(_escape, text)


def _ids_of(source: object) -> dict[str, str]:
    """The table, coup and bet ids ``source`` (a message, a log record) carries, those it has."""
    values = {name: getattr(source, name, None) for name in IDS}
    return {name: str(value) for name, value in values.items() if value}


@contextlib.contextmanager
def message_context(message: object) -> Iterator[None]:
    """Log records made inside carry the ids of ``message``."""
    token = _context.set(_ids_of(message))
    try:
        yield
    finally:
        _context.reset(token)


def _ids(record: logging.LogRecord) -> dict[str, str]:
    """The ids of the message being handled, and those given to the record (``extra=``)."""
    return {**(_context.get() or {}), **_ids_of(record)}


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
        # json escapes C0 controls itself; the rest of _UNSAFE only appears inside strings
        line = json.dumps(data, ensure_ascii=False, default=str)
        return _UNSAFE.sub(lambda found: f"\\u{ord(found.group()):04x}", line)


class TextFormatter(logging.Formatter):
    """The classic line, with the message ids appended when there are any."""

    def __init__(self, service: str) -> None:
        super().__init__(f"%(asctime)s %(levelname)s [{service}] %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escaped(record.message)
        return super().formatMessage(record)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        first, newline, rest = line.partition("\n")
        if rest:  # a traceback or stack: each line indented, its characters escaped
            rest = "\n".join(f"    {escaped(part)}" for part in rest.split("\n"))
        ids = " ".join(
            f"{name.removesuffix('_id')}={escaped(value)}" for name, value in _ids(record).items()
        )
        return f"{first} [{ids}]{newline}{rest}" if ids else f"{first}{newline}{rest}"


def configure_logging(settings: Settings) -> None:
    """Root logging of a service process: ``PB_LOG_LEVEL``, text or JSON lines
    (``PB_LOG_FORMAT``), on standard error."""
    formatter = JsonFormatter if settings.log_format == "json" else TextFormatter
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(settings.service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level)
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
