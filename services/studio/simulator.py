"""A simulated card-reading shoe: one shuffled physical shoe dealt coup by coup over PB1, with
faults.

:class:`Device` is the shoe and the lines it sends, its faults scheduled by card (:class:`Fault`,
:func:`random_schedule`), each coup dealt when released (:meth:`Device.release`);
:class:`LoopbackServer` serves it over TCP on 127.0.0.1, releasing coups on demand or after a
pause.
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
    Side,
    burn_count,
    check_decks,
    composition,
    cut_card_index,
    next_side,
    shuffle,
)
from services.studio import protocol as pb1

DEFAULT_DECKS: Final = 8
DEFAULT_CUT_CARD_FROM_END: Final = 16
MAX_BURN: Final = 11
"""The most cards a burn takes: the shown card and ten behind it (a 0-value card)."""
MAX_COUP: Final = 6
"""The most cards a coup takes: a coup starts only when the shoe holds this many."""
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
    EXTRA = "extra"
    """The card's coup reads one more card (the next of the shoe) after its last, before
    ``BUTTON CONFIRM``: a card the tableau did not ask for. Nothing on a card no coup deals."""


@dataclass(frozen=True)
class Dropped:
    """A read the device made (its ``seq`` is used) whose line is never sent."""

    event: pb1.CardRead


class Disconnect:
    """Close the connection here; the next connection goes on from the following step."""


class Release:
    """A coup starts here: it is dealt when one is released (:meth:`Device.release`)."""


DISCONNECT: Final = Disconnect()
RELEASE: Final = Release()
Step: TypeAlias = pb1.Event | Dropped | Disconnect | Release


@dataclass(frozen=True)
class FaultRates:
    """The chance, per card, of each fault; at most one fault per card, so they sum to <= 1."""

    unreadable: float = 0.0
    doubled: float = 0.0
    dropped: float = 0.0
    out_of_order: float = 0.0
    disconnect: float = 0.0
    extra: float = 0.0

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
    """Every step of dealing ``order`` as a dealer does, sequence numbers from 1.

    ``SHOE-IN``; ``BURN-START``, the shown card and the cards it burns, ``BURN-END``; then coup
    after coup, each behind a :data:`RELEASE`: its cards as the tableau asks (P, B, P, B, then
    the third cards), ``BUTTON CONFIRM``. ``CUT-CARD`` comes before the first card behind the cut
    card; the coup it came out in is finished and one more is played. A coup starts only when
    :data:`MAX_COUP` cards are left. Then ``SHOE-OUT``. Each scheduled fault changes its card's
    read as :class:`Fault` says; a card no coup deals is never read.
    """
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

    def read(index: int) -> None:
        """The card at ``index`` leaves the shoe and is read, with its fault."""
        if index == cut_index:
            signal(pb1.Signal.CUT_CARD)
        fault = faults.get(index)
        if fault is Fault.DISCONNECT:
            steps.append(DISCONNECT)
        elif fault is Fault.UNREADABLE:
            signal(pb1.Signal.UNREADABLE)
            put(pb1.ButtonPressed(device, next(seq), pb1.Button.RESCAN))
        card_read = pb1.CardRead(device, next(seq), order[index])
        if fault is Fault.DROPPED:
            steps.append(Dropped(card_read))
        elif fault is Fault.OUT_OF_ORDER:
            held.append(card_read)
        else:
            put(card_read)
            if fault is Fault.DOUBLED:
                steps.append(card_read)

    signal(pb1.Signal.SHOE_IN)
    signal(pb1.Signal.BURN_START)
    index = 1 + burn_count(order[0])
    for burned in range(index):
        read(burned)
    signal(pb1.Signal.BURN_END)
    last_coup = False
    while not last_coup and len(order) - index >= MAX_COUP:
        last_coup = index > cut_index  # the cut card came out in the coup before
        steps.append(RELEASE)
        hands: dict[Side, list[Card]] = {Side.PLAYER: [], Side.BANKER: []}
        first = index
        while (side := next_side(hands[Side.PLAYER], hands[Side.BANKER])) is not None:
            hands[side].append(order[index])
            read(index)
            index += 1
        # one more card for each card of the coup with an extra fault (an extra card's too)
        end = index + [faults.get(dealt) for dealt in range(first, index)].count(Fault.EXTRA)
        while index < min(end, len(order)):
            if faults.get(index) is Fault.EXTRA:
                end += 1
            read(index)
            index += 1
        put(pb1.ButtonPressed(device, next(seq), pb1.Button.CONFIRM))
    signal(pb1.Signal.SHOE_OUT)
    return steps


class Device:
    """A card-reading shoe holding one shuffled shoe; :meth:`next_step` is what it sends next.

    The burn is sent at once; each coup only once released (:meth:`release`), as a dealer deals
    the next coup only after "no more bets".
    """

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
        self._released = 0

    @property
    def finished(self) -> bool:
        return self._next >= len(self.steps)

    @property
    def waiting(self) -> bool:
        """The next coup waits to be released."""
        return not self.finished and self.steps[self._next] is RELEASE and not self._released

    def release(self, coups: int = 1) -> None:
        """Let ``coups`` more coups be dealt (releases past the shoe's last coup are unused)."""
        if coups < 1:
            raise ValueError(f"release at least one coup, not {coups}")
        self._released += coups

    def next_step(self) -> pb1.Event | Disconnect | None:
        """The next event to send, a disconnect, or None when there is none: the shoe is out, or
        the next coup is not released yet (:attr:`waiting`). Dropped reads are skipped, their
        ``seq`` counted in :attr:`latest_seq`."""
        while not self.finished and not self.waiting:
            step = self.steps[self._next]
            self._next += 1
            if isinstance(step, Release):
                self._released -= 1
                continue
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
    closed at once. Each coup is dealt when released: with ``coup_pause`` None, on demand
    (:meth:`release`); with ``coup_pause`` seconds, by the server itself that long after the
    coup before (or the burn). Use as ``async with LoopbackServer(device) as server: ...
    server.port``.
    """

    def __init__(
        self,
        device: Device,
        port: int = 0,
        *,
        pace: float = 0.0,
        coup_pause: float | None = None,
        heartbeat: float = 5.0,
    ) -> None:
        if pace < 0 or (coup_pause is not None and coup_pause < 0) or heartbeat <= 0:
            raise ValueError(
                f"pace and coup_pause must be >= 0 and heartbeat > 0, not {pace}, {coup_pause} "
                f"and {heartbeat}"
            )
        self.device = device
        self.port = port
        self.pace = pace
        self.coup_pause = coup_pause
        self.heartbeat = heartbeat
        self._server: asyncio.Server | None = None
        self._client: asyncio.StreamWriter | None = None
        self._released = asyncio.Event()

    def release(self, coups: int = 1) -> None:
        """Deal ``coups`` more coups (each its cards and ``BUTTON CONFIRM``) to the client."""
        self.device.release(coups)
        self._released.set()

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
            if self.coup_pause is not None and self.device.waiting:
                self.device.release()  # the dealer's own pause for bets
                next_read = max(next_read, now + self.coup_pause)
            if now >= next_beat:
                line = pb1.format(self.device.heartbeat())
                next_beat = now + self.heartbeat
            elif now >= next_read and (step := self.device.next_step()) is not None:
                if isinstance(step, Disconnect):
                    return
                line = pb1.format(step)
                next_read = now + self.pace
            else:
                due = next_beat
                if not self.device.finished and not self.device.waiting:
                    due = min(due, next_read)
                self._released.clear()  # a release from now on wakes this wait
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._released.wait(), due - now)
                continue
            writer.write(line.encode("ascii"))
            await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT)


async def _until_eof(reader: asyncio.StreamReader) -> None:
    """Returns when the client has closed its side (what it sends is ignored)."""
    with contextlib.suppress(ConnectionError):
        while await reader.read(1024):
            pass
