"""The reads of one device at one table, each device sequence number recorded once.

:meth:`DeviceReads.take` judges one PB1 event against what was recorded: a read whose ``seq``
was recorded already is a duplicate (nothing recorded); a ``seq`` past the highest one recorded
first records the numbers skipped as a gap (a ``HEARTBEAT`` carries the highest ``seq`` the
device used, so it shows a gap too, and is recorded as nothing else); a read that arrives late
into a gap is recorded (its number leaves the gap). The first read recorded sets where the
device starts: nothing before it is a gap. The gaps still open are kept, at most
:data:`MAX_OPEN_GAPS` (the oldest forgotten: a read into it counts as a duplicate). A ``seq``
more than :data:`MAX_REPEAT_BEHIND` behind the highest is the device counting again from the
start (a power cycle): nothing is recorded until its count passes the highest recorded (its
reads meanwhile never reach the shoe, which waits; the bridge logs each as an error: give the
device a new id, ``PB_STUDIO_DEVICE``, to take its new count). A ``seq`` more than
:data:`MAX_SKIP_AHEAD` past the highest, or past :data:`MAX_SEQ_TAKEN`, is a garbled line, not a
count: refused, or its gap would make every later read of the device a ``BACKWARDS`` one.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate, event

from services.shared.facts.studio import DeviceAttachedFact, StudioReadFact
from services.shared.facts.topics import record, register_stored_topics
from services.studio.protocol import ButtonPressed, CardRead, Event, Signal, Signalled

DEVICE_NAMESPACE = UUID("0c6f5a3e-1d2b-4c8e-9f47-b2d5e8a1c390")
MAX_OPEN_GAPS = 64
MAX_REPEAT_BEHIND = 1_000
"""How far behind the highest ``seq`` a line may be and still count as a read sent again
(after a reconnect); further back, the device's count went backwards (a power cycle):
``Taken.BACKWARDS``, not recorded either."""
MAX_SKIP_AHEAD = 1_000_000
"""How far past the highest ``seq`` a line may be and be taken (the numbers between are a gap):
a shoe reads a card a second at most, so a million reads lost is days of a dealing table with
no bridge. Further ahead: ``Taken.AHEAD``, not recorded."""
MAX_SEQ_TAKEN = 10**12
"""A ``seq`` no device reaches (30,000 years of a read a second): ``Taken.AHEAD`` however
the device started, so that a garbled first line does not set where it starts."""


class Taken(StrEnum):
    """What :meth:`DeviceReads.take` made of an event."""

    RECORDED = "recorded"
    DUPLICATE = "duplicate"
    BACKWARDS = "backwards"  # far behind the highest: the device restarted its count
    AHEAD = "ahead"  # far past the highest: a garbled line (not recorded)
    HEARTBEAT = "heartbeat"  # nothing to record (any gap it showed is recorded)


def device_uuid(table_id: str, device: str) -> UUID:
    """The aggregate id of a device's reads at a table."""
    return uuid5(DEVICE_NAMESPACE, f"{table_id}/{device}")


def read_kind(read: Event) -> tuple[str, str | None, str | None]:
    """``(what, card, button)`` of a PB1 event that is a read (not a heartbeat)."""
    if isinstance(read, CardRead):
        return "card", read.card.code, None
    if isinstance(read, ButtonPressed):
        return "button", None, str(read.button)
    if isinstance(read, Signalled) and read.signal is not Signal.HEARTBEAT:
        return read.signal.lower(), None, None
    raise ValueError(f"{read!r} is not a read")


class DeviceReads(Aggregate):
    """The reads recorded of one device at one table."""

    class Attached(DeviceAttachedFact, Aggregate.Created):
        TOPIC = DeviceAttachedFact.STORED_TOPIC

    class Read(StudioReadFact, Aggregate.Event):
        TOPIC = StudioReadFact.STORED_TOPIC

        def apply(self, reads: DeviceReads) -> None:
            last = self.seq if self.last_seq is None else self.last_seq
            if self.what == "gap":
                reads.gaps = [*reads.gaps, (self.seq, last)][-MAX_OPEN_GAPS:]
            else:
                reads.gaps = _without(reads.gaps, self.seq)
            reads.highest = max(reads.highest, last) if reads.highest is not None else last

    @staticmethod
    def create_id(table_id: str, device: str) -> UUID:
        return device_uuid(table_id, device)

    @event(Attached)
    def __init__(self, table_id: str, device: str) -> None:
        self.table_id = table_id
        self.device = device
        self.highest: int | None = None  # the highest seq recorded (of a read or a gap)
        self.gaps: list[tuple[int, int]] = []  # the open gaps, first to last seq, oldest first

    def take(self, reported: Event, read_at: datetime) -> Taken:
        """Record ``reported`` (an event of this device) unless it was recorded already."""
        if reported.device != self.device:
            raise ValueError(f"{reported.device!r} is not device {self.device!r}")
        seq, highest = reported.seq, self.highest
        if seq > MAX_SEQ_TAKEN or (highest is not None and seq > highest + MAX_SKIP_AHEAD):
            return Taken.AHEAD
        if isinstance(reported, Signalled) and reported.signal is Signal.HEARTBEAT:
            if highest is not None and seq > highest:  # its seq was used: never received
                self._record(highest + 1, "gap", None, None, seq, read_at)
            return Taken.HEARTBEAT
        if highest is not None and seq > highest + 1:
            self._record(highest + 1, "gap", None, None, seq - 1, read_at)
        if highest is not None and seq <= highest and not _within(self.gaps, seq):
            return Taken.BACKWARDS if seq < highest - MAX_REPEAT_BEHIND else Taken.DUPLICATE
        what, card, button = read_kind(reported)
        self._record(seq, what, card, button, None, read_at)
        return Taken.RECORDED

    def _record(
        self,
        seq: int,
        what: str,
        card: str | None,
        button: str | None,
        last_seq: int | None,
        read_at: datetime,
    ) -> None:
        fact = StudioReadFact(
            self.table_id, self.device, seq, what, card, button, last_seq, read_at
        )
        record(self, DeviceReads.Read, fact)


def _within(gaps: list[tuple[int, int]], seq: int) -> bool:
    return any(first <= seq <= last for first, last in gaps)


def _without(gaps: list[tuple[int, int]], seq: int) -> list[tuple[int, int]]:
    """``gaps`` with ``seq`` taken out (a gap it splits becomes two)."""
    kept: list[tuple[int, int]] = []
    for first, last in gaps:
        if not first <= seq <= last:
            kept.append((first, last))
            continue
        kept += [(a, b) for a, b in ((first, seq - 1), (seq + 1, last)) if a <= b]
    return kept


register_stored_topics(DeviceReads)
