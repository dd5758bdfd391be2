"""PB1, the line protocol of a card-reading shoe (grammar and error codes: docs/studio.md).

One ASCII line per event, at most ``MAX_LINE_BYTES`` bytes with its ``\\n``::

    PB1 <device> <seq> <event>

``device`` matches ``[A-Za-z0-9_-]{1,32}``; ``seq`` is the device's sequence number, decimal
without leading zeros, below ``2**63``; ``event`` is ``CARD <rank><suit>``, ``UNREADABLE``,
``SHOE-IN``, ``SHOE-OUT``, ``CUT-CARD``, ``BURN-START``, ``BURN-END``,
``BUTTON CONFIRM|RESCAN|SUPERVISOR`` or ``HEARTBEAT``. Every line has one spelling:
``format(parse(line)) == line`` for every valid line.

This module is the adapter for PB1. Another shoe's format is another module whose parser is a
:data:`Parser` (a line in, an :class:`Event` out, :class:`ProtocolError` when malformed).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Final, TypeAlias

from services.shared.rules import RANKS, SUITS, Card

VERSION: Final = "PB1"
MAX_LINE_BYTES: Final = 80
"""The longest line, its ``\\n`` included."""
MAX_SEQ: Final = 2**63 - 1
_DEVICE: Final = re.compile(r"[A-Za-z0-9_-]{1,32}")
_SEQ: Final = re.compile(r"0|[1-9][0-9]{0,18}")


class Reason(StrEnum):
    """Why a line was refused: the ``reason`` of a :class:`ProtocolError`."""

    TOO_LONG = "too-long"
    TRUNCATED = "truncated"
    BAD_CHARACTER = "bad-character"
    MISSING_FIELD = "missing-field"
    EXTRA_FIELD = "extra-field"
    BAD_VERSION = "bad-version"
    BAD_DEVICE = "bad-device"
    BAD_SEQUENCE = "bad-sequence"
    UNKNOWN_EVENT = "unknown-event"
    BAD_CARD = "bad-card"
    BAD_BUTTON = "bad-button"


class ProtocolError(ValueError):
    """A malformed line: ``reason`` says which rule it broke, the message says how."""

    def __init__(self, reason: Reason, detail: str) -> None:
        self.reason = reason
        super().__init__(f"{reason}: {detail}")


def _check_device(device: object) -> None:
    if not isinstance(device, str) or not _DEVICE.fullmatch(device):
        raise ProtocolError(Reason.BAD_DEVICE, f"{device!r} is not 1 to 32 of A-Z a-z 0-9 _ -")


class Button(StrEnum):
    """The dealer's buttons on the shoe: ``BUTTON <name>``."""

    CONFIRM = "CONFIRM"
    RESCAN = "RESCAN"
    SUPERVISOR = "SUPERVISOR"


class Signal(StrEnum):
    """The events without an argument: the line's event word."""

    UNREADABLE = "UNREADABLE"
    """A card left the shoe and could not be read; the dealer re-scans it."""
    SHOE_IN = "SHOE-IN"
    """A shoe of shuffled cards was put in the reader."""
    SHOE_OUT = "SHOE-OUT"
    """The shoe was taken out of the reader."""
    CUT_CARD = "CUT-CARD"
    """The cut card came out: the next card read is the first behind it."""
    BURN_START = "BURN-START"
    """The cards read from now on are burned, until ``BURN-END``."""
    BURN_END = "BURN-END"
    """The burn is over: the next card read is dealt."""
    HEARTBEAT = "HEARTBEAT"
    """The device is alive; its ``seq`` is the highest the device has used, not a new one."""


@dataclass(frozen=True, slots=True)
class Event:
    """What the device ``device`` reported, numbered ``seq``: a :class:`CardRead`, a
    :class:`ButtonPressed` or a :class:`Signalled`."""

    device: str
    seq: int
    ARGUMENT: ClassVar[tuple[str, type, Reason] | None] = None
    """A subclass's argument: its field, the type it must have, the reason if not."""

    def __post_init__(self) -> None:  # an event built by an adapter is checked as a parsed one
        _check_device(self.device)
        if type(self.seq) is not int or not 0 <= self.seq <= MAX_SEQ:
            raise ProtocolError(Reason.BAD_SEQUENCE, f"seq {self.seq!r} is not an int 0..2**63-1")
        if self.ARGUMENT is not None:
            name, kind, reason = self.ARGUMENT
            if not isinstance(value := getattr(self, name), kind):
                raise ProtocolError(reason, f"{value!r} is not a {kind.__name__}")


@dataclass(frozen=True, slots=True)
class CardRead(Event):
    """``CARD <rank><suit>``: a card read as it left the shoe."""

    card: Card
    ARGUMENT = ("card", Card, Reason.BAD_CARD)


@dataclass(frozen=True, slots=True)
class ButtonPressed(Event):
    """``BUTTON <name>``: the dealer pressed one of the shoe's buttons."""

    button: Button
    ARGUMENT = ("button", Button, Reason.BAD_BUTTON)


@dataclass(frozen=True, slots=True)
class Signalled(Event):
    """An event without an argument (:class:`Signal`)."""

    signal: Signal
    ARGUMENT = ("signal", Signal, Reason.UNKNOWN_EVENT)


Parser: TypeAlias = Callable[[str], Event]
"""A device format's adapter: one line (without its ``\\n``) to an :class:`Event`."""


_SIGNALS: Final = frozenset(signal.value for signal in Signal)


def format(event: Event) -> str:
    """The line of ``event``, ``\\n`` included."""
    if isinstance(event, CardRead):
        what = f"CARD {event.card.code}"
    elif isinstance(event, ButtonPressed):
        what = f"BUTTON {event.button}"
    elif isinstance(event, Signalled):
        what = event.signal
    else:
        raise TypeError(f"{event!r} is not an event of {VERSION}")
    return f"{VERSION} {event.device} {event.seq} {what}\n"


def parse(line: str) -> Event:
    """The event of one PB1 line (its ``\\n`` optional); :class:`ProtocolError` if malformed."""
    text = line.removesuffix("\n")
    if len(text) >= MAX_LINE_BYTES:
        raise ProtocolError(Reason.TOO_LONG, f"{len(text) + 1} bytes, at most {MAX_LINE_BYTES}")
    if not (text.isascii() and text.isprintable()):
        raise ProtocolError(Reason.BAD_CHARACTER, f"{text!r} has a non-printable or non-ASCII")
    fields = text.split(" ")
    if len(fields) < 4:
        raise ProtocolError(Reason.MISSING_FIELD, f"{text!r}: want PB1 <device> <seq> <event>")
    version, device, seq, word, *arguments = fields
    if version != VERSION:
        raise ProtocolError(Reason.BAD_VERSION, f"{version!r} is not {VERSION}")
    _check_device(device)
    if not _SEQ.fullmatch(seq):
        raise ProtocolError(Reason.BAD_SEQUENCE, f"{seq!r} is not a decimal without leading 0")
    number = int(seq)
    if word == "CARD":
        [code] = _arguments(word, arguments, 1)
        if len(code) != 2 or code[0] not in RANKS or code[1] not in SUITS:
            raise ProtocolError(
                Reason.BAD_CARD, f"{code!r}: want a rank A 2-9 T J Q K, a suit SHDC"
            )
        return CardRead(device, number, Card(code[0], code[1]))
    if word == "BUTTON":
        [name] = _arguments(word, arguments, 1)
        if name not in Button.__members__:
            raise ProtocolError(Reason.BAD_BUTTON, f"{name!r}: want CONFIRM, RESCAN, SUPERVISOR")
        return ButtonPressed(device, number, Button(name))
    if word not in _SIGNALS:
        raise ProtocolError(Reason.UNKNOWN_EVENT, f"{word!r} is not an event of {VERSION}")
    _arguments(word, arguments, 0)
    return Signalled(device, number, Signal(word))


def _arguments(word: str, arguments: list[str], wanted: int) -> list[str]:
    if len(arguments) < wanted:
        raise ProtocolError(Reason.MISSING_FIELD, f"{word} takes {wanted} argument")
    if len(arguments) > wanted:
        raise ProtocolError(Reason.EXTRA_FIELD, f"{word} takes {wanted}, not {len(arguments)}")
    return arguments


class LineDecoder:
    """Splits a byte stream into lines, never holding more than one line's bytes.

    :meth:`feed` returns each complete line (ASCII text, without its ``\\n``) or, in its place,
    the :class:`ProtocolError` of a line that was too long (the rest of it is skipped up to its
    ``\\n``) or not ASCII. :meth:`close` returns the error of a line left unterminated.
    """

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self.limit = limit
        self._pending = bytearray()
        self._skipping = False

    def feed(self, data: bytes) -> list[str | ProtocolError]:
        results: list[str | ProtocolError] = []
        start = 0
        while start < len(data):
            end = data.find(b"\n", start)
            piece = data[start:] if end < 0 else data[start:end]
            start = len(data) if end < 0 else end + 1
            if not self._skipping:
                self._pending += piece[: self.limit]
                if len(self._pending) >= self.limit:
                    results.append(
                        ProtocolError(Reason.TOO_LONG, f"a line over {self.limit} bytes")
                    )
                    self._pending.clear()
                    self._skipping = True
            if end >= 0:
                if not self._skipping:
                    results.append(_decoded(bytes(self._pending)))
                self._pending.clear()
                self._skipping = False
        return results

    def close(self) -> ProtocolError | None:
        """The end of the stream: the error of an unterminated last line, if there is one."""
        pending, self._pending = bytes(self._pending), bytearray()
        if pending:
            return ProtocolError(Reason.TRUNCATED, f"the stream ended inside a line: {pending!r}")
        return None


def _decoded(line: bytes) -> str | ProtocolError:
    try:
        return line.decode("ascii")
    except UnicodeDecodeError:
        return ProtocolError(Reason.BAD_CHARACTER, f"{line!r} is not ASCII")
