"""A service process: its Application, outbox relay, consumer and timers, and clean shutdown.

A service describes itself with a :class:`ServiceDefinition` (see PLATFORM.md);
``serve(definition, settings)`` runs it until SIGTERM/SIGINT, and
:class:`ServiceHost` runs it inside an existing event loop (tests, ``up``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Generic, TypeVar

from services.shared.platform.application import ServiceApplication
from services.shared.platform.consumer import ConsumerRuntime, Subscription
from services.shared.platform.http import HttpServer, ReadinessChecks, service_routes
from services.shared.platform.incidents import with_incidents
from services.shared.platform.kafka import ensure_topics
from services.shared.platform.keys import load_keyring, signer_for
from services.shared.platform.logs import configure_logging as configure_log_format
from services.shared.platform.metrics import ServiceMetrics
from services.shared.platform.persistence import open_application
from services.shared.platform.relay import EventMapper, OutboxRelay
from services.shared.platform.sealing import seal_periodically, seal_store, without_seals
from services.shared.platform.settings import Settings
from services.shared.platform.worker import AppWorker

log = logging.getLogger(__name__)

TApp = TypeVar("TApp", bound=ServiceApplication)


@dataclass
class ServiceContext(Generic[TApp]):
    """What a running service's timers and tasks get."""

    app: TApp
    settings: Settings
    worker: AppWorker
    stopping: asyncio.Event

    async def call(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run a blocking Application call in the service's worker thread."""
        return await self.worker.call(fn, *args, **kwargs)


Task = Callable[[ServiceContext[Any]], Awaitable[None]]


@dataclass(frozen=True)
class ServiceDefinition(Generic[TApp]):
    """Everything the platform needs to run a service.

    - ``application``: builds the service's Application from the eventsourcing env
      (``lambda env: ShoeApplication(env=env)``).
    - ``to_messages``: stored domain event -> contract messages the relay publishes
      (topic from ``contracts.topic_for``, key = table id); None: publishes nothing.
    - ``subscriptions``: given the Application, the topics it consumes and their handlers.
    - ``tasks``: coroutines run alongside (timers, e.g. closing betting windows);
      each gets a :class:`ServiceContext` and should return when ``ctx.stopping`` is set.
    """

    name: str
    application: Callable[[dict[str, str]], TApp]
    to_messages: EventMapper | None = None
    subscriptions: Callable[[TApp], Sequence[Subscription]] = field(default=lambda app: ())
    tasks: Sequence[Task] = ()


class ServiceHost(Generic[TApp]):
    """Start and stop one service inside the running event loop."""

    def __init__(
        self,
        definition: ServiceDefinition[TApp],
        settings: Settings,
        *,
        create_topics: bool = True,
    ) -> None:
        if settings.service != definition.name:
            raise ValueError(f"settings are for {settings.service!r}, not {definition.name!r}")
        self.definition = definition
        self.settings = settings
        self.create_topics = create_topics
        self.stopping = asyncio.Event()
        self.worker = AppWorker(definition.name)
        self._app: TApp | None = None
        self.relay: OutboxRelay | None = None
        self.consumer: ConsumerRuntime | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.failed = False
        # Operations (http.py, metrics.py): /health /ready /metrics /asyncapi on loopback.
        self.metrics = ServiceMetrics(definition.name)
        self.http: HttpServer | None = None
        self._readiness = ReadinessChecks(self)

    @property
    def app(self) -> TApp:
        if self._app is None:
            raise RuntimeError("service not started")
        return self._app

    async def start(self) -> None:
        settings = self.settings
        # Record signatures (keys.py): no key or keyring, no service (KeysError says what to run).
        keyring = load_keyring(settings) if self.definition.to_messages else None
        signer = signer_for(settings, keyring) if keyring is not None else None
        if signer is not None and keyring is not None:
            log.info("%s: signs with key %s (%s)", settings.service, signer.kid, keyring.path)
        if self.create_topics:
            await ensure_topics(settings)
        self._app = await self.worker.call(open_application, self.definition.application, settings)
        log.info(
            "%s: store %s, kafka %s",
            settings.service,
            settings.describe_store(),
            settings.kafka_bootstrap_servers,
        )
        if self.definition.to_messages is not None:
            # Seal events (tamper evidence, see sealing.py) are internal: never published.
            # Seal events are internal; incidents are published for the operators.
            mapper = with_incidents(without_seals(self.definition.to_messages))
            self.relay = OutboxRelay(self.app, settings, mapper, signer=signer)
            self.relay.on_published = self.metrics.observe_published  # operations hooks
            self.relay.on_quarantined = self.metrics.observe_quarantined
            await self.relay.start()
            self._spawn("relay", self.relay.run(self.stopping))
        subscriptions = self.definition.subscriptions(self.app)
        if subscriptions:
            self.consumer = ConsumerRuntime(
                self.app,
                settings,
                subscriptions,
                self.worker,
                keyring=keyring if keyring is not None else load_keyring(settings),
            )
            self.consumer.on_delivered = self.metrics.observe_delivered  # operations hooks
            self.consumer.stops.on_change = self.metrics.observe_stopped
            await self.consumer.start()
            self._spawn("consumer", self.consumer.run(self.stopping))
        context: ServiceContext[TApp] = ServiceContext(
            self.app, settings, self.worker, self.stopping
        )
        for task in self.definition.tasks:
            self._spawn(getattr(task, "__name__", "task"), task(context))
        # Tamper evidence: every service seals its notification log periodically (sealing.py).
        self._spawn("sealer", seal_periodically(context))
        await self._start_http()

    async def _start_http(self) -> None:
        """Operations: the HTTP endpoints (http.py); a busy port is a warning, not a failure."""
        if self.settings.http_port is None:
            return
        server = HttpServer(
            service_routes(self, self._readiness),
            self.settings.http_host,
            self.settings.http_port,
            name=self.settings.service,
        )
        try:
            await server.start()
        except OSError as error:
            log.warning(
                "%s: no HTTP endpoints (%s:%s: %s); set PB_HTTP_PORT_%s to a free port",
                self.settings.service,
                self.settings.http_host,
                self.settings.http_port,
                error,
                self.settings.service.upper(),
            )
            return
        self.http = server

    def _spawn(self, name: str, coro: Awaitable[None]) -> None:
        async def guarded() -> None:
            try:
                await coro
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: %s crashed; stopping the service", self.settings.service, name)
                self.failed = True
                self.stopping.set()

        self._tasks.append(asyncio.create_task(guarded(), name=f"{self.settings.service}-{name}"))

    async def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until the consumer has its partitions (or the service is stopping)."""
        if self.consumer is None:
            return
        ready = asyncio.create_task(self.consumer.ready.wait())
        stopping = asyncio.create_task(self.stopping.wait())
        done, pending = await asyncio.wait(
            {ready, stopping}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        for task in pending:
            task.cancel()
        if not done:
            raise TimeoutError(f"{self.settings.service}: no Kafka partitions within {timeout} s")

    async def wait_stopping(self) -> None:
        await self.stopping.wait()

    async def stop(self) -> None:
        self.stopping.set()
        if self.http is not None:  # operations endpoints first
            await _quietly(self.http.stop(), "stopping the HTTP endpoints")
            self.http = None
        await _quietly(self._readiness.close(), "closing the readiness client")
        if self._tasks:
            _done, pending = await asyncio.wait(self._tasks, timeout=10)
            for task in pending:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*pending, return_exceptions=True)
        self._tasks.clear()
        if self.consumer is not None:
            await _quietly(self.consumer.stop(), "stopping the consumer")
        if self.relay is not None:
            await _quietly(self.relay.stop(), "stopping the relay")
        if self._app is not None:
            # Tamper evidence: seal everything recorded, now that nothing else writes.
            try:
                await self.worker.call(seal_store, self._app, self.settings.service)
            except Exception:
                log.exception("%s: sealing on shutdown failed", self.settings.service)
        self.worker.shutdown()
        if self._app is not None:
            self._app.close()
        log.info("%s: stopped", self.settings.service)

    async def __aenter__(self) -> ServiceHost[TApp]:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


async def _quietly(step: Awaitable[None], what: str, timeout: float = 15.0) -> None:
    """Await a shutdown step; log (do not raise) its failure, so the next steps still run.

    aiokafka may raise CancelledError from ``stop()`` when the broker is gone (its
    fetcher's cancelled tasks); that is swallowed unless this task itself is cancelled.
    """
    try:
        await asyncio.wait_for(step, timeout)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        log.warning("%s was interrupted (is Kafka down?)", what)
    except Exception as error:
        log.warning("%s failed: %r", what, error)


def configure_logging(settings: Settings) -> None:
    # Text or JSON lines (PB_LOG_FORMAT), with table/coup/bet ids: see logs.py.
    configure_log_format(settings.service, settings.log_level, settings.log_format)


async def run_service(definition: ServiceDefinition[Any], settings: Settings) -> int:
    """Run until SIGTERM/SIGINT (or a crashed component); returns the process exit code."""
    host = ServiceHost(definition, settings)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, host.stopping.set)
    try:
        await host.start()
        try:
            await host.wait_ready(timeout=60)
        except TimeoutError:
            log.warning("%s: no partitions assigned after 60 s; serving anyway", settings.service)
        # The line below is what `punto-banco up` waits for: keep its wording.
        log.info("%s: serving", settings.service)
        await host.wait_stopping()
    finally:
        await host.stop()
    return 1 if host.failed else 0


def serve(definition: ServiceDefinition[Any], settings: Settings) -> int:
    """Process entry point of a service."""
    configure_logging(settings)
    return asyncio.run(run_service(definition, settings))
