"""The dashboard process: follow the event topics into the read model, serve the page.

- :class:`EventFollower` reads the shoe, table and bet event topics, the studio reads, the
  incidents and the dead letters from the beginning (no consumer group: a restarted
  dashboard rebuilds its state), decodes them with :mod:`contracts` and applies them to the model.
- :func:`dashboard_app` is the Starlette app: ``/`` the page (plain HTML/CSS/JS package
  files, no build step), ``/api/state`` the snapshot as JSON, ``/events`` server-sent events
  (sse-starlette: a ``state`` event with the whole snapshot at most every ``push_interval``
  seconds while something changed, and every 2 s anyway), ``/health``. The Host header must
  be an allowed one (``PB_HTTP_ALLOWED_HOSTS``; default the bind address, localhost, 127.0.0.1).
- :class:`Dashboard` runs both, the app under uvicorn (``webserver.AsgiServer``) on
  ``PB_HTTP_HOST`` (default 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from contracts import (
    DEAD_LETTERS,
    HOUSE,
    INCIDENTS,
    SHOE_EVENTS,
    STUDIO_READS,
    TABLE_EVENTS,
    ContractError,
    bet_events_topic,
    decode,
)
from services.shared.platform.host import AsgiServer, Started
from services.shared.platform.kafka import SafeFetch
from services.shared.platform.settings import (
    KafkaAuth,
    SettingsError,
    check_allowed_hosts,
    check_http_host,
    check_operators,
    default_allowed_hosts,
    http_port,
)
from services.tools.dashboard.model import DashboardModel

log = logging.getLogger(__name__)


def event_topics(operators: Sequence[str] = (HOUSE,)) -> tuple[str, ...]:
    """What the dashboard follows: the shoe's and tables' events, every operator's bet
    events (``PB_OPERATORS``), the studio tables' device reads, the incidents (a studio shoe's
    holds) and the dead letters."""
    return (
        SHOE_EVENTS,
        TABLE_EVENTS,
        *map(bet_events_topic, operators),
        STUDIO_READS,
        INCIDENTS,
        DEAD_LETTERS,
    )


NOBODY = KafkaAuth()

TOPICS = event_topics()
DEFAULT_PORT = 8100
RETRY_MS = 2000  # how long a browser waits before it reconnects to /events
PING_S = 15  # an SSE comment line that keeps idle proxies from closing the stream
NO_STORE = {"Cache-Control": "no-store"}


class EventFollower:
    """Apply every record of the event topics (from the beginning) to ``model``."""

    def __init__(
        self,
        model: DashboardModel,
        bootstrap: str,
        topic_prefix: str = "",
        operators: Sequence[str] = (HOUSE,),
        auth: KafkaAuth = NOBODY,
    ) -> None:
        self.model = model
        self.topics = event_topics(operators)
        self.bootstrap = bootstrap
        self.auth = auth  # the ``dashboard`` principal: reads every topic, writes none
        self.prefix = topic_prefix
        self.undecodable = 0
        self.changed = asyncio.Event()
        self._consumer: AIOKafkaConsumer | None = None
        self._assigned: set[TopicPartition] = set()
        self._fetch = SafeFetch(snapshot=True)  # no record stops it (it commits nothing)

    async def start(self, timeout: float = 30.0) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            client_id="pb-dashboard",
            **self.auth.client_options(),
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
        for topic in self.topics:
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
            missing = len(self.topics) > len({tp.topic for tp in self._assigned})
            if missing and loop.time() > next_check:
                await self._assign()
                next_check = loop.time() + 2.0
            if not self._assigned:
                await asyncio.sleep(0.5)
                continue
            records = await self._fetch(consumer, 200, 5000)
            for record in records:
                if record.value is None:  # a tombstone, or a record the client cannot read
                    self.undecodable += 1
                    continue
                try:
                    message = decode(record.topic[len(self.prefix) :], record.value)
                except ContractError:
                    self.undecodable += 1
                    continue
                self.model.apply(message, record.timestamp / 1000.0)
            if records:
                self.changed.set()


def dashboard_app(
    model: DashboardModel,
    stopping: asyncio.Event,
    allowed_hosts: Sequence[str],
    push_interval: float = 0.5,
) -> Starlette:
    """The dashboard's pages over ``model``; ``/events`` streams end when ``stopping`` is set."""

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "alive", "service": "dashboard"}, headers=NO_STORE)

    async def state(request: Request) -> Response:
        return JSONResponse(model.snapshot(), headers=NO_STORE)

    async def events(request: Request) -> Response:
        return EventSourceResponse(
            state_events(model, stopping, push_interval), ping=PING_S, send_timeout=30
        )

    routes = [
        Route("/api/state", state, methods=["GET"]),
        Route("/events", events, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Mount("/", StaticFiles(packages=[("services.tools.dashboard", "static")], html=True)),
    ]
    hosts = list(check_allowed_hosts(allowed_hosts))
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=hosts, www_redirect=False)]
    return Starlette(routes=routes, middleware=middleware)


async def state_events(
    model: DashboardModel, stopping: asyncio.Event, push_interval: float
) -> AsyncIterator[ServerSentEvent]:
    """A ``state`` event with the whole snapshot on a change (at most every ``push_interval``
    seconds), and every 2 s anyway (bets per second move when nothing arrives)."""
    loop = asyncio.get_running_loop()
    sent = -1
    last = 0.0
    retry: int | None = RETRY_MS  # said once, with the first event
    while not stopping.is_set():
        now = loop.time()
        if model.version != sent or now - last >= 2.0:
            sent, last = model.version, now
            snapshot = json.dumps(model.snapshot(), separators=(",", ":"))
            yield ServerSentEvent(data=snapshot, event="state", retry=retry)
            retry = None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), push_interval)


class Dashboard(Started):
    """The dashboard: follower + HTTP server (``host``: any address, default loopback)."""

    def __init__(
        self,
        bootstrap: str,
        topic_prefix: str = "",
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        push_interval: float = 0.5,
        allowed_hosts: Sequence[str] = (),
        operators: Sequence[str] = (HOUSE,),
        auth: KafkaAuth = NOBODY,
    ) -> None:
        host = check_http_host(host)
        self.model = DashboardModel()
        self.follower = EventFollower(self.model, bootstrap, topic_prefix, operators, auth)
        self.push_interval = push_interval
        self.stopping = asyncio.Event()
        hosts = check_allowed_hosts(allowed_hosts) or default_allowed_hosts(host)
        self.app = dashboard_app(self.model, self.stopping, hosts, push_interval)
        self.server = AsgiServer(self.app, host, port, name="dashboard", lifespan="off")
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return self.server.url + "/"

    async def start(self) -> None:
        await self.follower.start()
        await self.server.start()
        self._task = asyncio.create_task(self.follower.run(self.stopping), name="dashboard-feed")

    async def stop(self) -> None:
        self.stopping.set()  # ends the event streams, so the server can close them
        await self.server.stop()
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, 5)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()
            except Exception:
                log.exception("dashboard feed failed")
        await self.follower.stop()


async def start_for_up(
    bootstrap: str,
    topic_prefix: str,
    say: Callable[[str], None],
    env: Mapping[str, str],
    auth: KafkaAuth = NOBODY,
) -> Dashboard | None:
    """The dashboard of `punto-banco up`: port ``PB_HTTP_PORT_DASHBOARD`` (default 8100, any free
    port if that one is taken, ``off`` for none) on ``PB_HTTP_HOST``, answering the Host names of
    ``PB_HTTP_ALLOWED_HOSTS``; says its URL. Never fails the run."""
    try:
        wanted = http_port("dashboard", {k: v for k, v in env.items() if k != "PB_HTTP_PORT"})
        host = check_http_host(env.get("PB_HTTP_HOST") or "127.0.0.1")
        allowed = check_allowed_hosts(env.get("PB_HTTP_ALLOWED_HOSTS", ""))
        operators = check_operators(env.get("PB_OPERATORS", ""))
    except (SettingsError, ValueError) as error:
        say(f"dashboard not started: {error}")
        return None
    if wanted is None:
        return None
    for port in dict.fromkeys((wanted, 0)):
        dashboard = Dashboard(
            bootstrap,
            topic_prefix,
            host,
            port,
            allowed_hosts=allowed,
            operators=operators,
            auth=auth,
        )
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
