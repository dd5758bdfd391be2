"""The simulated shoe over real TCP on 127.0.0.1: a client reads the whole shoe line by line,
heartbeats keep coming, a disconnect fault closes the connection and the next connection goes
on with the sequence, and the device serves one client at a time."""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import sys
from asyncio.subprocess import PIPE

from services.studio.protocol import (
    CardRead,
    Event,
    LineDecoder,
    Parser,
    Signal,
    Signalled,
    parse,
)
from services.studio.simulator import Device, Fault, LoopbackServer

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

    async def until(self, signal: Signal) -> list[Event]:
        events: list[Event] = []
        while True:
            event = await self.next()
            assert event is not None, f"closed before {signal}"
            events.append(event)
            if isinstance(event, Signalled) and event.signal is signal:
                return events

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


def card_reads(events: list[Event]) -> list[CardRead]:
    return [event for event in events if isinstance(event, CardRead)]


async def test_a_client_reads_the_whole_shoe_then_heartbeats() -> None:
    device = Device("table-7", source=random.Random(11))
    async with LoopbackServer(device, heartbeat=0.2) as server:
        assert server.port > 0
        client = await Client.connect(server.port)
        events = await client.until(Signal.SHOE_OUT)
        assert [read.card for read in card_reads(events)] == list(device.order)
        assert all(event.device == "table-7" for event in events)
        beat = await client.next()
        assert beat == Signalled("table-7", events[-1].seq, Signal.HEARTBEAT)
        await client.close()


async def test_a_disconnect_fault_closes_the_connection_and_the_next_one_goes_on() -> None:
    device = Device(faults={100: Fault.DISCONNECT}, source=random.Random(12))
    async with LoopbackServer(device, heartbeat=60) as server:
        first = await Client.connect(server.port)
        before: list[Event] = []
        while (event := await first.next()) is not None:
            before.append(event)
        await first.close()
        assert [read.card for read in card_reads(before)] == list(device.order[:100])

        second = await Client.connect(server.port)
        after = await second.until(Signal.SHOE_OUT)
        await second.close()
        assert isinstance(after[0], CardRead) and after[0].card == device.order[100]
        seqs = [event.seq for event in before + after]
        assert seqs == list(range(1, len(seqs) + 1))
        assert [read.card for read in card_reads(before + after)] == list(device.order)


async def test_the_device_serves_one_client_at_a_time_and_the_next_goes_on() -> None:
    device = Device(source=random.Random(13))
    async with LoopbackServer(device, pace=0.01, heartbeat=60) as server:
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
    options = ["--decks", "1", "--pace", "0", "--heartbeat", "60", "--fault", "10=dropped"]
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
        assert len(reads) == 52 - 1  # one dropped: its seq is the one gap, after the 10th read
        [gap] = set(range(1, events[-1].seq + 1)) - {event.seq for event in events}
        assert reads[9].seq < gap < reads[10].seq
        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), TIMEOUT) == 0  # Ctrl-C: a clean stop
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
