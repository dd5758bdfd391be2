"""The dashboard process: follow the event topics into the read model, serve the page.

- :class:`EventFollower` reads the shoe, table and bet event topics and the dead
  letters from the beginning (no consumer group: a restarted dashboard rebuilds
  its state), decodes them with :mod:`contracts` and applies them to the model.
- :class:`Dashboard` serves on loopback (``services.shared.platform.http``): ``/`` the page
  (plain HTML/CSS/JS package files, no build step), ``/api/state`` the snapshot
  as JSON, ``/events`` server-sent events (a ``state`` event with the whole
  snapshot at most every ``push_interval`` seconds while something changed),
  ``/health``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from importlib import resources

from aiokafka import AIOKafkaConsumer, TopicPartition

from contracts import BET_EVENTS, DEAD_LETTERS, SHOE_EVENTS, TABLE_EVENTS, ContractError, decode
from services.shared.platform.http import EventStream, Handler, HttpServer, Request, Response
from services.tools.dashboard.model import DashboardModel

log = logging.getLogger(__name__)

TOPICS = (SHOE_EVENTS, TABLE_EVENTS, BET_EVENTS, DEAD_LETTERS)
DEFAULT_PORT = 8100
STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/style.css": ("style.css", "text/css; charset=utf-8"),
}


class EventFollower:
    """Apply every record of the event topics (from the beginning) to ``model``."""

    def __init__(self, model: DashboardModel, bootstrap: str, topic_prefix: str = "") -> None:
        self.model = model
        self.bootstrap = bootstrap
        self.prefix = topic_prefix
        self.undecodable = 0
        self.changed = asyncio.Event()
        self._consumer: AIOKafkaConsumer | None = None
        self._assigned: set[TopicPartition] = set()

    async def start(self, timeout: float = 30.0) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            client_id="pb-dashboard",
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=15_000,
        )
        await asyncio.wait_for(consumer.start(), timeout)
        self._consumer = consumer
        await self._assign()

    async def _assign(self) -> None:
        """Assign the partitions of the topics that exist (new ones are picked up later)."""
        consumer = self._consumer
        if consumer is None:
            return
        await consumer._client.force_metadata_update()
        partitions = set(self._assigned)
        for topic in TOPICS:
            found = consumer.partitions_for_topic(self.prefix + topic)
            for partition in found or ():
                partitions.add(TopicPartition(self.prefix + topic, partition))
        if partitions != self._assigned:
            new = partitions - self._assigned
            positions = {tp: await consumer.position(tp) for tp in self._assigned}
            consumer.assign(sorted(partitions, key=lambda tp: (tp.topic, tp.partition)))
            for tp, offset in positions.items():
                consumer.seek(tp, offset)
            if new:
                await consumer.seek_to_beginning(*new)
            self._assigned = partitions

    async def stop(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(consumer.stop(), 15)

    async def run(self, stopping: asyncio.Event) -> None:
        consumer = self._consumer
        if consumer is None:
            raise RuntimeError("follower not started")
        loop = asyncio.get_running_loop()
        next_check = loop.time() + 2.0
        while not stopping.is_set():
            missing = len(TOPICS) > len({tp.topic for tp in self._assigned})
            if missing and loop.time() > next_check:
                await self._assign()
                next_check = loop.time() + 2.0
            if not self._assigned:
                await asyncio.sleep(0.5)
                continue
            batches = await consumer.getmany(timeout_ms=200, max_records=5000)
            for tp, records in batches.items():
                logical = tp.topic[len(self.prefix) :]
                for record in records:
                    try:
                        message = decode(logical, record.value)
                    except ContractError:
                        self.undecodable += 1
                        continue
                    self.model.apply(message, record.timestamp / 1000.0)
            if batches:
                self.changed.set()


class Dashboard:
    """The dashboard: follower + HTTP server on loopback."""

    def __init__(
        self,
        bootstrap: str,
        topic_prefix: str = "",
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        push_interval: float = 0.5,
    ) -> None:
        self.model = DashboardModel()
        self.follower = EventFollower(self.model, bootstrap, topic_prefix)
        self.push_interval = push_interval
        self.stopping = asyncio.Event()
        self.server = HttpServer(self._routes(), host, port, name="dashboard")
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return self.server.url + "/"

    async def start(self) -> None:
        await self.follower.start()
        await self.server.start()
        self._task = asyncio.create_task(self.follower.run(self.stopping), name="dashboard-feed")

    async def stop(self) -> None:
        self.stopping.set()
        await self.server.stop()
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, 5)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()
            except Exception:
                log.exception("dashboard feed failed")
        await self.follower.stop()

    async def __aenter__(self) -> Dashboard:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _routes(self) -> dict[str, Handler]:
        routes: dict[str, Handler] = {
            "/api/state": self._state,
            "/events": self._events,
            "/health": self._health,
        }
        for path, (name, content_type) in STATIC.items():
            routes[path] = _static(name, content_type)
        return routes

    async def _health(self, request: Request) -> Response:
        return Response.json({"status": "alive", "service": "dashboard"})

    async def _state(self, request: Request) -> Response:
        return Response.json(self.model.snapshot())

    async def _events(self, request: Request) -> EventStream:
        return EventStream(self._stream())

    async def _stream(self) -> AsyncIterator[tuple[str, str]]:
        loop = asyncio.get_running_loop()
        sent = -1
        last = 0.0
        while not self.stopping.is_set():
            now = loop.time()
            # On a change, and every 2 s anyway (bets per second move when nothing arrives).
            if self.model.version != sent or now - last >= 2.0:
                sent, last = self.model.version, now
                yield "state", json.dumps(self.model.snapshot(), separators=(",", ":"))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), self.push_interval)


def _static(name: str, content_type: str) -> Handler:
    body = resources.files("services.tools.dashboard").joinpath("static", name).read_bytes()

    async def handler(request: Request) -> Response:
        return Response(200, body, content_type)

    return handler


async def start_for_up(
    bootstrap: str, topic_prefix: str, say: Callable[[str], None], env: Mapping[str, str]
) -> Dashboard | None:
    """The dashboard of `punto-banco up`: port ``PB_HTTP_PORT_DASHBOARD`` (default 8100, any free
    port if that one is taken, ``off`` for none); says its URL. Never fails the run."""
    raw = env.get("PB_HTTP_PORT_DASHBOARD", "").strip().lower()
    if raw in ("off", "none", "-", "no", "false"):
        return None
    wanted = int(raw) if raw.isdigit() else DEFAULT_PORT
    for port in dict.fromkeys((wanted, 0)):
        dashboard = Dashboard(bootstrap, topic_prefix, port=port)
        try:
            await dashboard.start()
        except OSError:
            await dashboard.stop()
            continue
        except Exception as error:
            await dashboard.stop()
            say(f"dashboard not started: {error!r}")
            return None
        say(f"dashboard: {dashboard.url}")
        return dashboard
    return None
