"""A simulated card-reading shoe: one shuffled physical shoe dealt over PB1, with faults.

:class:`Device` is the shoe and the lines it sends, its faults scheduled by card (:class:`Fault`,
:func:`random_schedule`); :class:`LoopbackServer` serves it over TCP on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Self, TypeAlias

from services.shared.rules import (
    Card,
    burn_count,
    check_decks,
    composition,
    cut_card_index,
    shuffle,
)
from services.studio import protocol as pb1

DEFAULT_DECKS: Final = 8
DEFAULT_CUT_CARD_FROM_END: Final = 16
MAX_BURN: Final = 11
"""The most cards a burn takes: the shown card and ten behind it (a 0-value card)."""
WRITE_TIMEOUT: Final = 30.0
"""A client that has not taken a line for this long is dropped (it holds the only slot)."""


class Fault(StrEnum):
    """What can go wrong with one card's read (docs/studio.md, "Fault injection")."""

    UNREADABLE = "unreadable"
    """``UNREADABLE``, the dealer's ``BUTTON RESCAN``, then the card's read."""
    DOUBLED = "doubled"
    """The card's line is sent twice, with the same ``seq``."""
    DROPPED = "dropped"
    """The card's line is never sent: its ``seq`` is a gap (a later ``HEARTBEAT`` shows it)."""
    OUT_OF_ORDER = "out-of-order"
    """The card's line is sent after the next line."""
    DISCONNECT = "disconnect"
    """The connection is closed before the card's line; the next connection sends it first."""


@dataclass(frozen=True)
class Dropped:
    """A read the device made (its ``seq`` is used) whose line is never sent."""

    event: pb1.CardRead


class Disconnect:
    """Close the connection here; the next connection goes on from the following step."""


DISCONNECT: Final = Disconnect()
Step: TypeAlias = pb1.Event | Dropped | Disconnect


@dataclass(frozen=True)
class FaultRates:
    """The chance, per card, of each fault; at most one fault per card, so they sum to <= 1."""

    unreadable: float = 0.0
    doubled: float = 0.0
    dropped: float = 0.0
    out_of_order: float = 0.0
    disconnect: float = 0.0

    def __post_init__(self) -> None:
        rates = list(self.by_fault().values())
        if any(not 0.0 <= rate <= 1.0 for rate in rates) or math.fsum(rates) > 1.0 + 1e-9:
            raise ValueError(f"fault rates must be 0 to 1 and sum to at most 1, not {rates}")

    def by_fault(self) -> dict[Fault, float]:
        return {fault: getattr(self, fault.name.lower()) for fault in Fault}


def random_schedule(rates: FaultRates, cards: int, source: random.Random) -> dict[int, Fault]:
    """A fault schedule for a shoe of ``cards`` cards: each card draws at most one fault."""
    schedule: dict[int, Fault] = {}
    for index in range(cards):
        draw = source.random()
        for fault, rate in rates.by_fault().items():
            if draw < rate:
                schedule[index] = fault
                break
            draw -= rate
    return schedule


def script(
    device: str, order: list[Card], cut_card_from_end: int, faults: Mapping[int, Fault]
) -> list[Step]:
    """Every step of dealing ``order``, sequence numbers from 1.

    ``SHOE-IN``; ``BURN-START``, the shown card and the cards it burns, ``BURN-END``; the cards,
    with ``CUT-CARD`` before the first card behind the cut card; ``SHOE-OUT``. Each scheduled
    fault changes its card's read as :class:`Fault` says.
    """
    burn_end = 1 + burn_count(order[0])
    cut_index = cut_card_index(len(order), cut_card_from_end)
    seq = itertools.count(1)
    steps: list[Step] = []
    held: list[Step] = []  # an out-of-order read, sent after the next line

    def put(step: Step) -> None:
        steps.append(step)
        steps.extend(held)
        held.clear()

    def signal(signal: pb1.Signal) -> None:
        put(pb1.Signalled(device, next(seq), signal))

    signal(pb1.Signal.SHOE_IN)
    signal(pb1.Signal.BURN_START)
    for index, card in enumerate(order):
        if index == burn_end:
            signal(pb1.Signal.BURN_END)
        if index == cut_index:
            signal(pb1.Signal.CUT_CARD)
        fault = faults.get(index)
        if fault is Fault.DISCONNECT:
            steps.append(DISCONNECT)
        elif fault is Fault.UNREADABLE:
            signal(pb1.Signal.UNREADABLE)
            put(pb1.ButtonPressed(device, next(seq), pb1.Button.RESCAN))
        read = pb1.CardRead(device, next(seq), card)
        if fault is Fault.DROPPED:
            steps.append(Dropped(read))
        elif fault is Fault.OUT_OF_ORDER:
            held.append(read)
        else:
            put(read)
            if fault is Fault.DOUBLED:
                steps.append(read)
    signal(pb1.Signal.SHOE_OUT)
    return steps


class Device:
    """A card-reading shoe holding one shuffled shoe; :meth:`next_step` is what it sends next."""

    def __init__(
        self,
        device: str = "shoe-1",
        *,
        decks: int = DEFAULT_DECKS,
        cut_card_from_end: int = DEFAULT_CUT_CARD_FROM_END,
        faults: Mapping[int, Fault] | None = None,
        source: random.Random | None = None,
    ) -> None:
        """``source`` is for tests only: production shuffles with ``random.SystemRandom``."""
        cards = 52 * check_decks(decks)
        if not 1 <= cut_card_from_end <= cards - MAX_BURN:
            raise ValueError(
                f"the cut card must sit 1 to {cards - MAX_BURN} cards from the end (behind the "
                f"longest burn), not {cut_card_from_end}"
            )
        randbelow = (source or random.SystemRandom()).randrange
        self.device = device
        self.order: tuple[Card, ...] = tuple(shuffle(composition(check_decks(decks)), randbelow))
        self.steps = tuple(script(device, list(self.order), cut_card_from_end, faults or {}))
        self.latest_seq = 0
        self._next = 0

    @property
    def finished(self) -> bool:
        return self._next >= len(self.steps)

    def next_step(self) -> pb1.Event | Disconnect | None:
        """The next event to send, a disconnect, or None when the shoe is out (dropped reads
        are skipped, their ``seq`` counted in :attr:`latest_seq`)."""
        while not self.finished:
            step = self.steps[self._next]
            self._next += 1
            if isinstance(step, Dropped):
                self.latest_seq = max(self.latest_seq, step.event.seq)
                continue
            if isinstance(step, pb1.Event):
                self.latest_seq = max(self.latest_seq, step.seq)
            return step
        return None

    def heartbeat(self) -> pb1.Signalled:
        return pb1.Signalled(self.device, self.latest_seq, pb1.Signal.HEARTBEAT)


class LoopbackServer:
    """Serves a :class:`Device` on 127.0.0.1 (``port`` 0: any free port), one client at a time.

    A connected client gets the device's next lines, one every ``pace`` seconds, and a
    ``HEARTBEAT`` every ``heartbeat`` seconds, until a disconnect fault or the client leaves;
    the next client goes on where that one stopped. A second client while one is connected is
    closed at once. Use as ``async with LoopbackServer(device) as server: ... server.port``.
    """

    def __init__(
        self, device: Device, port: int = 0, *, pace: float = 0.0, heartbeat: float = 5.0
    ) -> None:
        if pace < 0 or heartbeat <= 0:
            raise ValueError(f"pace must be >= 0 and heartbeat > 0, not {pace} and {heartbeat}")
        self.device = device
        self.port = port
        self.pace = pace
        self.heartbeat = heartbeat
        self._server: asyncio.Server | None = None
        self._client: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._server is not None:
            self._server.close()
            if self._client is not None:
                self._client.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._client is not None:
            writer.close()
            return
        self._client = writer
        sending = asyncio.create_task(self._send(writer))
        leaving = asyncio.create_task(_until_eof(reader))
        try:
            await asyncio.wait((sending, leaving), return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._client = None
            for task in (sending, leaving):
                task.cancel()
            writer.close()
            # what the tasks raised (a gone or stuck client) is theirs; our own cancel is not
            await asyncio.gather(sending, leaving, writer.wait_closed(), return_exceptions=True)

    async def _send(self, writer: asyncio.StreamWriter) -> None:
        clock = asyncio.get_running_loop().time
        next_beat = clock() + self.heartbeat
        next_read = clock()
        while True:
            now = clock()
            if now >= next_beat:
                line = pb1.format(self.device.heartbeat())
                next_beat = now + self.heartbeat
            elif now >= next_read and not self.device.finished:
                step = self.device.next_step()
                if isinstance(step, Disconnect):
                    return
                if step is None:
                    continue
                line = pb1.format(step)
                next_read = now + self.pace
            else:
                due = next_beat if self.device.finished else min(next_beat, next_read)
                await asyncio.sleep(due - now)
                continue
            writer.write(line.encode("ascii"))
            await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT)


async def _until_eof(reader: asyncio.StreamReader) -> None:
    """Returns when the client has closed its side (what it sends is ignored)."""
    with contextlib.suppress(ConnectionError):
        while await reader.read(1024):
            pass
