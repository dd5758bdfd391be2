"""The simulated shoe over real TCP on 127.0.0.1: a client reads the whole shoe coup by coup,
each coup released on demand or after the server's pause, heartbeats keep coming, a disconnect
fault closes the connection and the next connection goes on with the sequence, and the device
serves one client at a time."""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import sys
from asyncio.subprocess import PIPE

from services.shared.rules import Card, burn_count, resolve_coup
from services.studio.protocol import (
    Button,
    ButtonPressed,
    CardRead,
    Event,
    LineDecoder,
    Parser,
    Signal,
    Signalled,
    parse,
)
from services.studio.simulator import RELEASE, Device, Fault, LoopbackServer

TIMEOUT = 10.0
STARTUP = 60.0  # a process importing the command, on a busy machine


class Client:
    """A bridge's reading side, as simple as it gets: lines in, events out (through the device
    format's adapter, a ``Parser``: PB1's ``parse`` here)."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, parser: Parser = parse
    ) -> None:
        self.reader, self.writer, self.parser = reader, writer, parser
        self.decoder = LineDecoder()
        self.pending: list[Event] = []

    @classmethod
    async def connect(cls, port: int) -> Client:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def next(self) -> Event | None:
        """The next event, None when the device closed the connection."""
        while not self.pending:
            chunk = await asyncio.wait_for(self.reader.read(4096), TIMEOUT)
            if not chunk:
                assert self.decoder.close() is None
                return None
            for line in self.decoder.feed(chunk):
                assert isinstance(line, str), line
                self.pending.append(self.parser(line))
        return self.pending.pop(0)

    async def until(self, signal: Signal | Button) -> list[Event]:
        """The events up to ``signal`` (a signal or a button) included, heartbeats left out."""
        events: list[Event] = []
        async with asyncio.timeout(TIMEOUT):  # heartbeats alone do not keep it waiting
            while True:
                event = await self.next()
                assert event is not None, f"closed before {signal}"
                if isinstance(event, Signalled) and event.signal is Signal.HEARTBEAT:
                    continue
                events.append(event)
                said = event.signal if isinstance(event, Signalled) else None
                if said is signal or (isinstance(event, ButtonPressed) and event.button is signal):
                    return events

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


def card_reads(events: list[Event]) -> list[CardRead]:
    return [event for event in events if isinstance(event, CardRead)]


def cards_in(events: list[Event]) -> list[Card]:
    return [read.card for read in card_reads(events)]


def is_heartbeat(event: Event | None) -> bool:
    return isinstance(event, Signalled) and event.signal is Signal.HEARTBEAT


async def test_a_client_reads_the_whole_shoe_paced_coup_by_coup_then_heartbeats() -> None:
    device = Device("table-7", source=random.Random(11))
    async with LoopbackServer(device, coup_pause=0.0, heartbeat=0.2) as server:
        assert server.port > 0
        client = await Client.connect(server.port)
        events = await client.until(Signal.SHOE_OUT)
        cards = cards_in(events)
        assert cards == list(device.order[: len(cards)])
        assert [type(event) for event in events].count(ButtonPressed) > 40  # a CONFIRM a coup
        assert all(event.device == "table-7" for event in events)
        beat = await client.next()
        assert beat == Signalled("table-7", events[-1].seq, Signal.HEARTBEAT)
        await client.close()


async def test_on_demand_each_release_deals_exactly_one_coup_and_its_confirm() -> None:
    extra = 20  # a card whose coup reads one card more, before its CONFIRM
    device = Device(decks=1, faults={extra: Fault.EXTRA}, source=random.Random(14))
    coups = device.steps.count(RELEASE)
    async with LoopbackServer(device, heartbeat=0.1) as server:  # coup_pause None: on demand
        client = await Client.connect(server.port)
        burn = await client.until(Signal.BURN_END)
        assert cards_in(burn) == list(device.order[: 1 + burn_count(device.order[0])])
        dealt = len(cards_in(burn))
        for _ in range(coups):
            assert is_heartbeat(await client.next())  # nothing but heartbeats until released
            server.release()  # as a test of the services would on each BettingClosed
            coup = await client.until(Button.CONFIRM)
            cards = cards_in(coup)
            assert cards == list(device.order[dealt : dealt + len(cards)])
            asked = resolve_coup(cards).cards_used
            assert asked == len(cards) - (dealt <= extra < dealt + len(cards))
            dealt += len(cards)
        assert len(await client.until(Signal.SHOE_OUT)) == 1  # no release: the shoe is out
        assert coups > 5 and dealt > extra and device.finished
        await client.close()


async def test_paced_each_coup_comes_after_the_pause() -> None:
    device = Device(decks=1, source=random.Random(15))
    async with LoopbackServer(device, coup_pause=0.5, heartbeat=0.1) as server:
        client = await Client.connect(server.port)
        await client.until(Signal.BURN_END)
        for _ in range(2):  # a heartbeat (due within 0.1 s) comes before the paused coup
            assert is_heartbeat(await client.next())
            assert cards_in(await client.until(Button.CONFIRM))
        await client.close()


async def test_a_disconnect_fault_closes_the_connection_and_the_next_one_goes_on() -> None:
    device = Device(faults={100: Fault.DISCONNECT}, source=random.Random(12))
    async with LoopbackServer(device, coup_pause=0.0, heartbeat=60) as server:
        first = await Client.connect(server.port)
        before: list[Event] = []
        while (event := await first.next()) is not None:
            before.append(event)
        await first.close()
        assert cards_in(before) == list(device.order[:100])

        second = await Client.connect(server.port)
        after = await second.until(Signal.SHOE_OUT)
        await second.close()
        assert isinstance(after[0], CardRead) and after[0].card == device.order[100]
        seqs = [event.seq for event in before + after]
        assert seqs == list(range(1, len(seqs) + 1))
        cards = cards_in(before + after)
        assert cards == list(device.order[: len(cards)])


async def test_the_device_serves_one_client_at_a_time_and_the_next_goes_on() -> None:
    device = Device(source=random.Random(13))
    async with LoopbackServer(device, pace=0.01, coup_pause=0.0, heartbeat=60) as server:
        first = await Client.connect(server.port)
        [shoe_in, burn_start] = [await first.next(), await first.next()]
        assert isinstance(shoe_in, Signalled) and shoe_in.signal is Signal.SHOE_IN
        intruder = await Client.connect(server.port)
        assert await intruder.next() is None  # refused: closed at once
        await intruder.close()
        await first.close()  # the client leaves; the device is free again
        for _ in range(100):
            second = await Client.connect(server.port)
            event = await second.next()
            if event is not None:
                break
            await second.close()
            await asyncio.sleep(0.05)
        assert isinstance(event, Event) and burn_start is not None
        assert event.seq > burn_start.seq  # goes on from the device's place, never back
        await second.close()


async def test_the_command_serves_a_shoe_where_it_says_it_listens() -> None:
    command = [sys.executable, "-m", "services.tools.cli.main", "studio", "simulate"]
    options = ["--decks", "1", "--pace", "0", "--coup-pause", "0", "--heartbeat", "60"]
    options += ["--fault", "10=dropped"]
    process = await asyncio.create_subprocess_exec(
        *command, *options, stdout=PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    try:
        assert process.stdout is not None
        said = (await asyncio.wait_for(process.stdout.readline(), STARTUP)).decode()
        match = re.search(r"listening on 127\.0\.0\.1:(\d+) ", said)
        assert match, said
        client = await Client.connect(int(match[1]))
        events = await client.until(Signal.SHOE_OUT)
        await client.close()
        reads = card_reads(events)
        assert len({read.card for read in reads}) == len(reads)  # one deck: each card once
        # to the first card behind the cut card (37), one more coup (4 or more), one dropped
        assert len(reads) >= 37 + 4 - 1
        # one dropped: its seq is the one gap, after the 10th read
        [gap] = set(range(1, events[-1].seq + 1)) - {event.seq for event in events}
        assert reads[9].seq < gap < reads[10].seq
        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), TIMEOUT) == 0  # Ctrl-C: a clean stop
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
