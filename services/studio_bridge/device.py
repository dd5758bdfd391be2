"""The bridge's connection to its device: PB1 lines in, each event taken by the Application.

:class:`DeviceLink` is a service task: it connects to the device over TCP, splits what it
sends into lines (:class:`~services.studio.protocol.LineDecoder`), parses each
(:data:`~services.studio.protocol.Parser`: PB1's ``parse`` unless an adapter's) and hands each
event of its device to :meth:`BridgeApplication.take` in the service's worker thread. A
connection that closes or falls silent for ``silence`` seconds after bringing something is
opened again at once; one refused, or closed before a byte, after a back-off (``BACKOFF_FIRST``
doubling up to ``BACKOFF_MAX`` seconds, back to the first once a connection brings something).
Every line is counted by what became of it (``outcome``): recorded, duplicate, heartbeat,
malformed (a :class:`~services.studio.protocol.ProtocolError`, logged with its reason),
wrong-device (a line of another device: refused, never recorded), backwards (a ``seq`` far
behind: the device restarted its count; logged) or ahead (a ``seq`` far past: a garbled line;
logged, never recorded).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from services.shared.platform.host import ServiceContext
from services.studio.protocol import LineDecoder, Parser, ProtocolError, parse
from services.studio_bridge.application import BridgeApplication
from services.studio_bridge.domain import Taken

log = logging.getLogger(__name__)

BACKOFF_FIRST = 0.2
BACKOFF_MAX = 5.0
READ_BYTES = 4096


@dataclass
class DeviceLink:
    """The one device of one table, at ``host``:``port``."""

    table_id: str
    device: str
    host: str
    port: int
    silence: float = 30.0
    parser: Parser = parse
    counts: Counter[str] = field(default_factory=Counter)
    on_line: Callable[[str], None] = lambda outcome: None  # the service's metrics
    connections: int = 0
    _between_chunks: asyncio.Event = field(init=False, default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self._between_chunks.set()

    @property
    def where(self) -> str:
        return f"device {self.device} at {self.host}:{self.port}"

    async def run(self, ctx: ServiceContext[Any]) -> None:
        """Connect, read and reconnect until the service stops; the lines received by then are
        taken first."""
        linking = asyncio.create_task(self._link(ctx))
        stopping = asyncio.create_task(ctx.stopping.wait())
        await asyncio.wait({linking, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        try:
            await self._between_chunks.wait()  # a chunk being taken is taken whole
        finally:
            linking.cancel()  # waiting for the device, or for the next try
        with contextlib.suppress(asyncio.CancelledError):
            await linking  # a crash of the link is the service's (it stops)

    async def _link(self, ctx: ServiceContext[Any]) -> None:
        delay = BACKOFF_FIRST
        while not ctx.stopping.is_set():
            heard = False
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port), self.silence
                )
            except (OSError, TimeoutError) as error:
                log.warning("studio-bridge: %s: %r", self.where, error)
            else:
                self.connections += 1
                log.info("studio-bridge: connected to %s", self.where)
                try:
                    heard = await self._read(ctx, reader)
                finally:
                    writer.close()
                    with contextlib.suppress(OSError):
                        await writer.wait_closed()
            if heard:  # a connection that brought something: open the next one at once
                delay = BACKOFF_FIRST
                continue
            log.warning("studio-bridge: %s: connecting again in %.1f s", self.where, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX)

    async def _read(self, ctx: ServiceContext[Any], reader: asyncio.StreamReader) -> bool:
        """Take the connection's lines until it closes or falls silent; whether it brought
        any byte."""
        decoder = LineDecoder()
        app: BridgeApplication = ctx.app
        heard = False
        while not ctx.stopping.is_set():
            try:
                data = await asyncio.wait_for(reader.read(READ_BYTES), self.silence)
            except TimeoutError:
                log.warning("studio-bridge: %s silent %.0f s", self.where, self.silence)
                return heard
            except OSError as error:
                log.warning("studio-bridge: %s: %r", self.where, error)
                return heard
            if not data:
                unterminated = decoder.close()
                if unterminated is not None:
                    self._count("malformed", unterminated)
                log.warning("studio-bridge: %s closed the connection", self.where)
                return heard
            heard = True
            self._between_chunks.clear()
            try:
                for line in decoder.feed(data):
                    if isinstance(line, ProtocolError):
                        self._count("malformed", line)
                        continue
                    await self._take(ctx, app, line)
            finally:
                self._between_chunks.set()
        return heard

    async def _take(self, ctx: ServiceContext[Any], app: BridgeApplication, line: str) -> None:
        try:
            reported = self.parser(line)
        except ProtocolError as error:
            self._count("malformed", error)
            return
        if reported.device != self.device:
            self._count("wrong-device", f"{reported.device!r} is not {self.device!r}")
            return
        taken = await ctx.call(app.take, self.table_id, reported, datetime.now(UTC))
        why = None
        if taken is Taken.BACKWARDS:
            why = (
                f"seq {reported.seq} is far behind the reads recorded: the device counts again "
                "from the start (a power cycle?); give it a new id (PB_STUDIO_DEVICE)"
            )
        if taken is Taken.AHEAD:
            why = f"seq {reported.seq} is far past the reads recorded: a garbled line?"
        self._count(taken.value, why)

    def _count(self, outcome: str, why: object = None) -> None:
        self.counts[outcome] += 1
        self.on_line(outcome)
        if why is not None:
            log.warning("studio-bridge: device %s: %s line refused: %s", self.device, outcome, why)
