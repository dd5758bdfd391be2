"""A service as the platform runs it: its definition, and the parts that start and stop.

:class:`ServiceDefinition` says how to build the service's Application, how its stored events
become messages, which topics it handles and its timers (``task(ctx)`` coroutines, given a
:class:`ServiceContext`, returning once ``ctx.stopping`` is set). :class:`ServiceLifespan` holds
the running parts and the four hooks its FastStream app runs (``faststream.py``):

- on_startup, before the consumer: the writer lease (a standby waits here, in no consumer
  group), the keys, the topics, the store, the relay, the batch processor;
- after_startup: the relay, the timers, the sealer and the watchdogs as tasks;
- on_shutdown: ``stopping`` is set and the tasks end (the relay publishes what is pending);
- after_shutdown, the consumer stopped: :meth:`ServiceLifespan.close` seals the store, lets the
  relay anchor that seal, closes everything and lets the lease go (also after a failed start).

A task that crashes stops the service: ``failed`` is set, and so is ``stopping``. /ready asks
:class:`ServiceReadiness`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from aiokafka.client import AIOKafkaClient

from services.shared.platform.consumer import BatchProcessor, RebalanceListener, Subscription
from services.shared.platform.host.endpoints import READY_TIMEOUT
from services.shared.platform.host.metrics import ServiceMetrics
from services.shared.platform.kafka import client_options, ensure_topics
from services.shared.platform.relay import EventMapper, OutboxRelay, with_anchors, with_incidents
from services.shared.platform.security import load_keyring, signer_for
from services.shared.platform.settings import Settings
from services.shared.platform.store import (
    MAX_ROWS_PER_ROUND,
    AppWorker,
    Sealer,
    ServiceApplication,
    StoppedAsStandby,
    WriterLease,
    open_application,
    seal_store,
    watch_worker,
    writer_lease,
)

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
"""A coroutine run alongside the service (a timer); returns once ``ctx.stopping`` is set."""


@dataclass(frozen=True)
class ServiceDefinition(Generic[TApp]):
    """What the platform runs of a service (``subscriptions``: in the order each fetch's
    partitions are applied; ``to_messages`` None: it publishes nothing)."""

    name: str
    application: Callable[[dict[str, str]], TApp]  # the eventsourcing env -> its Application
    to_messages: EventMapper | None = None
    subscriptions: Callable[[TApp], Sequence[Subscription]] = field(default=lambda app: ())
    tasks: Sequence[Task] = ()


class ServiceLifespan(Generic[TApp]):
    """The parts of one running service and the hooks that start and stop them."""

    def __init__(
        self, definition: ServiceDefinition[TApp], settings: Settings, *, create_topics: bool
    ) -> None:
        if settings.service != definition.name:
            raise ValueError(f"settings are for {settings.service!r}, not {definition.name!r}")
        self.definition = definition
        self.settings = settings
        self.create_topics = create_topics
        self.worker = AppWorker(definition.name)
        self.stopping = asyncio.Event()
        self.failed = False
        self.metrics = ServiceMetrics(definition.name)
        self.lease: WriterLease = writer_lease(settings)  # one writer per store
        self.readiness = ServiceReadiness(self)  # /ready
        self.relay: OutboxRelay | None = None
        self.consumer: BatchProcessor | None = None
        # Extra arguments of the relay and the batch processor (tests: fake producers...).
        self.relay_options: dict[str, Any] = {}
        self.consumer_options: dict[str, Any] = {}
        self.inputs: tuple[str, ...] = ()  # the logical topics the subscriber reads
        self.listener = RebalanceListener()  # the subscriber's, given the batch processor
        # Run once the writer lease is held (a cell's starting offsets: cells/membership.py).
        self.after_lease: Callable[[], Awaitable[object]] | None = None
        self._app: TApp | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def app(self) -> TApp:
        if self._app is None:
            raise RuntimeError("service not started")
        return self._app

    def _kafka_consumer(self) -> Any:
        raise NotImplementedError

    async def _on_startup(self) -> None:
        settings, definition = self.settings, self.definition
        # One writer per store: a standby waits here, before the store or the consumer group.
        if not await self.lease.acquire(self.stopping):
            raise StoppedAsStandby(f"{self.name}: stopped while a standby (it never wrote)")
        if self.after_lease is not None:
            await self.after_lease()
        # No key or keyring, no service (KeysError says what to run).
        keyring = load_keyring(settings) if definition.to_messages else None
        signer = signer_for(settings, keyring) if keyring is not None else None
        if signer is not None and keyring is not None:
            log.info("%s: signs with key %s (%s)", self.name, signer.kid, keyring.path)
        if self.create_topics:
            await ensure_topics(settings)
        self._app = await self.worker.call(
            open_application, definition.application, settings, self.lease.fence_env()
        )
        log.info(
            "%s: store %s, kafka %s (%s)",
            self.name,
            settings.describe_store(),
            settings.kafka_bootstrap_servers,
            settings.kafka_auth.describe(),
        )
        if definition.to_messages is not None:
            # Seals are anchored outside the store; incidents are published for the operators.
            anchored = with_anchors(definition.to_messages, self.name, settings.partition)
            mapper = with_incidents(anchored)
            options = {"signer": signer, **self.relay_options}
            self.relay = OutboxRelay(self.app, settings, mapper, **options)
            self.relay.on_published = self.metrics.observe_published  # operations hooks
            self.relay.on_quarantined = self.metrics.observe_quarantined
            await self.relay.start()
        subscriptions = list(definition.subscriptions(self.app))
        topics = tuple(subscription.topic for subscription in subscriptions)
        if subscriptions:
            if keyring is None:  # who may write what: every service's public keys
                keyring = load_keyring(settings)
            options = {"keyring": keyring, **self.consumer_options}
            self.consumer = BatchProcessor(
                self.app, settings, subscriptions, self.worker, **options
            )
            self.consumer.on_delivered = self.metrics.observe_delivered  # operations hooks
            self.consumer.stops.on_change = self.metrics.observe_stopped
            await self.consumer.start()
            self.listener.processor = self.consumer
        if set(topics) != set(self.inputs):
            raise RuntimeError(
                f"{self.name}: the subscriber reads {sorted(self.inputs)} but the handlers "
                f"are for {sorted(topics)}"
            )

    async def _after_startup(self) -> None:
        if self.consumer is not None:
            self.consumer.consumer = self._kafka_consumer()
            if self.settings.partition is not None:  # a cell is assigned its partition
                self.consumer.ready.set()
        if self.relay is not None:
            self._spawn("relay", self.relay.run(self.stopping))
        context: ServiceContext[TApp] = ServiceContext(
            self.app, self.settings, self.worker, self.stopping
        )
        for task in self.definition.tasks:
            self._spawn(getattr(task, "__name__", "task"), task(context))
        self._spawn("sealer", seal_periodically(context))
        if self.consumer is not None:
            self._spawn("stops", self.consumer.watch_stops(self.stopping))
        self._spawn("lease", self.lease.watch(self.stopping))
        self.worker.watching = True  # from now on a call that never returns is reported
        self._spawn("worker", watch_worker(self.worker, self.stopping))

    async def _on_shutdown(self) -> None:
        self.stopping.set()
        await _quietly(self.readiness.close(), "closing the readiness client")
        if self._tasks:
            _done, pending = await asyncio.wait(self._tasks, timeout=10)
            for task in pending:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*pending, return_exceptions=True)
        self._tasks.clear()
        if self.consumer is not None:  # its Kafka consumer stops after these hooks
            await _quietly(self.consumer.commit_pending(), "committing the offsets handled")

    async def close(self) -> None:
        """Stop the producers, seal and close the store (once; also after a failed start)."""
        if self._closed:
            return
        self._closed = True
        self.stopping.set()
        for task in self._tasks:
            task.cancel()
        if self.consumer is not None:
            await _quietly(self.consumer.stop(), "stopping the consumer")
        sealed = 0
        if self._app is not None:
            # Tamper evidence: seal everything recorded, now that nothing else writes.
            try:
                sealed = await self.worker.call(seal_store, self._app, self.name)
            except Exception:
                log.exception("%s: sealing on shutdown failed", self.name)
        if self.relay is not None:
            if sealed and self.relay.started:  # anchor the last seal now, not at the next start
                await _quietly(self.relay.publish_pending(), "anchoring the last seal")
            await _quietly(self.relay.stop(), "stopping the relay")
        self.worker.shutdown()
        if self._app is not None:
            self._app.close()
        await _quietly(self.lease.release(), "letting the writer lease go")
        log.info("%s: stopped", self.name)

    def _spawn(self, name: str, coro: Awaitable[None]) -> None:
        async def guarded() -> None:
            try:
                await coro
            except Exception:  # not a cancellation (a BaseException)
                log.exception("%s: %s crashed; stopping the service", self.name, name)
                self.failed = True
                self.stopping.set()

        self._tasks.append(asyncio.create_task(guarded(), name=f"{self.name}-{name}"))


class ServiceReadiness:
    """The checks of /ready of one running service: the writer lease, the broker, the store,
    the partitions, no partition stopped and no stuck store call."""

    def __init__(self, service: ServiceLifespan[Any]) -> None:
        self.service = service
        self._client: AIOKafkaClient | None = None

    def alive(self) -> str | None:
        """Why the process should be restarted (a store call that never returns), else None."""
        return self.service.worker.stuck()

    async def checks(self) -> dict[str, str | None]:
        standby = self.service.lease.standby_reason()
        broker: str | None
        store: str | None
        if standby is not None:  # the store is not opened: nothing else to check yet
            broker, store = await self.broker(), "not opened by a standby"
        else:
            broker, store = await asyncio.gather(self.broker(), self.store())
        consumer = self.service.consumer
        partitions = handling = None
        if consumer is not None and not consumer.ready.is_set():
            partitions = "no Kafka partitions assigned yet"
        if consumer is not None and len(consumer.stops):
            handling = "; ".join(stopped.describe() for stopped in consumer.stops)
        stuck = self.service.worker.stuck()
        if stuck is not None:
            handling = stuck if handling is None else f"{stuck}; {handling}"
        return {
            "writer": standby,
            "broker": broker,
            "store": store,
            "partitions": partitions,
            "handling": handling,
            "running": "stopping" if self.service.stopping.is_set() else None,
        }

    async def broker(self) -> str | None:
        """None if the broker answered, else why not."""
        settings = self.service.settings
        try:
            if self._client is None:
                client = AIOKafkaClient(
                    **client_options(settings),
                    client_id=f"pb-{settings.service}-ready",
                    request_timeout_ms=int(READY_TIMEOUT * 1000),
                )
                try:
                    await asyncio.wait_for(client.bootstrap(), READY_TIMEOUT)
                except BaseException:
                    await client.close()  # not yet ours to close in close()
                    raise
                self._client = client
            metadata = await asyncio.wait_for(self._client.fetch_all_metadata(), READY_TIMEOUT)
            if not metadata.brokers():
                raise RuntimeError("no broker in the cluster metadata")
            return None
        except Exception as error:
            await self.close()
            return f"Kafka at {settings.kafka_bootstrap_servers}: {error!r}"

    async def store(self) -> str | None:
        """None if the event store answered a query, else why not."""
        try:
            app = self.service.app
            await asyncio.wait_for(
                asyncio.to_thread(app.recorder.max_notification_id), READY_TIMEOUT
            )
            return None
        except Exception as error:
            return f"event store ({self.service.settings.describe_store()}): {error!r}"

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), READY_TIMEOUT)


async def _quietly(step: Awaitable[object], what: str, timeout: float = 15.0) -> None:
    """Await a shutdown step; log (do not raise) its failure, so the next steps still run
    (aiokafka's ``stop()`` may raise CancelledError when the broker is gone)."""
    try:
        await asyncio.wait_for(step, timeout)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        log.warning("%s was interrupted (is Kafka down?)", what)
    except Exception as error:
        log.warning("%s failed: %r", what, error)


async def seal_periodically(ctx: ServiceContext[Any]) -> None:
    """A service task: seal new rows every ``PB_SEAL_INTERVAL`` seconds until stopping."""
    interval = ctx.settings.seal_interval
    if interval is None:
        return
    sealer: Sealer = await ctx.call(Sealer, ctx.app, ctx.settings.service)
    while not ctx.stopping.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ctx.stopping.wait(), timeout=interval)
        if ctx.stopping.is_set():
            return  # the host seals once more after everything else has stopped
        try:
            await ctx.call(sealer.seal, MAX_ROWS_PER_ROUND)
        except Exception:  # a busy or failing store: the service goes on, next round retries
            log.exception("%s: sealing failed; retrying in %.1f s", ctx.settings.service, interval)
            sealer = await ctx.call(Sealer, ctx.app, ctx.settings.service)
