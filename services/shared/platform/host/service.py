"""What a service tells the platform about itself, and what its timers get while it runs.

:class:`ServiceDefinition`: how to build its Application, how its stored events become
published messages, which topics it handles and how, and its timers. A service's ``tasks``
(dealing's betting clock) and the platform's own (the sealer, ``sealing.py``) are coroutines
``task(ctx)`` started once the service runs (``service_app.py``), given a
:class:`ServiceContext`, and expected to return soon after ``ctx.stopping`` is set.

The running parts of a service, started and stopped by its FastStream lifespan hooks.

:class:`ServiceLifespan` holds what a running service is made of (its Application in the
worker thread, the outbox relay, the batch processor, the timers, the metrics) and the four
hooks its FastStream application runs (``service_app.py``):

- on_startup, before the consumer starts: the store's writer lease (``writer_lease.py``: a
  second instance waits here as a standby, in no consumer group, until the writer stops or
  dies), the keys (a service that publishes signs), the topics, the event store, the relay's
  producer, the batch processor (the cluster's and the topics' ids, the dead letters'
  producer);
- after_startup, the consumer running: the relay, the service's timers, the sealer, the
  stop watcher, the lease watcher and the worker's watchdog (``worker.py``) as tasks;
- on_shutdown: ``stopping`` is set and the tasks end (the relay publishes what is pending);
- after_shutdown, once the consumer has stopped: :meth:`ServiceLifespan.close` seals the
  store a last time (``sealing.py``), lets the relay publish that seal's anchor
  (``anchors.py``), stops the producers, closes the store and lets the writer lease go.
  ``close`` also cleans up after a start that failed half way.

A task that crashes stops the service: ``failed`` is set, and so is ``stopping``.

A service as a FastStream application: its broker, its subscriber and its publishers.

:class:`KafkaService` is what each service's ``build_service(settings)`` returns and what
``punto-banco serve`` runs (``runner.py``):

- ``broker``: the service's FastStream ``KafkaBroker`` (``kafka.service_broker``);
- ONE batch subscriber over all its input topics (:meth:`KafkaService.subscriber`, declared
  in the service's ``service.py`` with the contract unions it reads, for AsyncAPI); its
  handler hands the raw records of each fetch to :meth:`KafkaService.consume`, the batch
  processor (``consumer.py``, ``batch_processor.py``);
- publishers (:meth:`KafkaService.publisher`) for what the outbox relay writes, with the
  contract messages the service may send there (``asyncapi.py`` adds the relay's headers and
  the key to the document), plus the dead letters and incidents every service writes. The
  relay itself sends with aiokafka's record-batch API (``relay_producer.py`` says why);
- ``fast``: the FastStream application (``AsgiFastStream``): its lifespan hooks start and stop
  the service's parts (``lifespan.py``), and it is an ASGI app with the operations endpoints
  (``endpoints.ops_app``: /health, /ready, /metrics, /asyncapi) mounted, which ``runner.py``
  serves under uvicorn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from faststream.asgi import AsgiFastStream
from faststream.kafka import KafkaBroker, TopicPartition
from faststream.kafka.subscriber.usecase import BatchSubscriber

from contracts import DEAD_LETTERS, INCIDENTS, SEALS
from services.shared.platform.consumer.deliveries import Subscription
from services.shared.platform.consumer.processor import (
    BatchProcessor,
    RebalanceListener,
    subscriber_options,
)
from services.shared.platform.host.asyncapi import (
    SYSTEM_DESCRIPTION,
    asyncapi_json,
    published_union,
    read_union,
)
from services.shared.platform.host.endpoints import ServiceReadiness, ops_app
from services.shared.platform.host.metrics import ServiceMetrics
from services.shared.platform.kafka import ensure_topics, service_broker
from services.shared.platform.relay.publishing import with_anchors, with_incidents
from services.shared.platform.relay.records import EventMapper
from services.shared.platform.relay.relay import OutboxRelay
from services.shared.platform.security.keys import load_keyring, signer_for
from services.shared.platform.settings import Settings
from services.shared.platform.store.application import (
    AppWorker,
    ServiceApplication,
    open_application,
    watch_worker,
)
from services.shared.platform.store.lease import StoppedAsStandby, WriterLease, writer_lease
from services.shared.platform.store.sealing import (
    MAX_ROWS_PER_ROUND,
    Sealer,
    seal_store,
)

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
    """What the platform runs of a service.

    - ``application``: builds the service's Application from the eventsourcing env
      (``lambda env: ShoeApplication(env=env)``).
    - ``to_messages``: stored domain event -> contract messages the relay publishes
      (topic from ``contracts.topic_for``, key = table id); None: publishes nothing.
    - ``subscriptions``: given the Application, the topics it consumes and their handlers
      (the order is the order each fetch's partitions are applied in).
    - ``tasks``: coroutines run alongside (timers, e.g. closing betting windows);
      each gets a :class:`ServiceContext` and should return when ``ctx.stopping`` is set.
    """

    name: str
    application: Callable[[dict[str, str]], TApp]
    to_messages: EventMapper | None = None
    subscriptions: Callable[[TApp], Sequence[Subscription]] = field(default=lambda app: ())
    tasks: Sequence[Task] = ()


log = logging.getLogger(__name__)


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
        # Run once the writer lease is held, before the store and the consumer (a partition
        # cell's starting offsets: cell_offsets.py).
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

    def _take_inputs(self, topics: Sequence[str]) -> None:
        """The batch processor is made: give it to the subscriber (``service_app.py``)."""
        raise NotImplementedError

    def _kafka_consumer(self) -> Any:
        """The running Kafka consumer (FastStream's), for the batch processor."""
        raise NotImplementedError

    async def _on_startup(self) -> None:
        settings, definition = self.settings, self.definition
        # One writer per store: a standby waits here, before the store or the consumer group.
        if not await self.lease.acquire(self.stopping):
            raise StoppedAsStandby(f"{self.name}: stopped while a standby (it never wrote)")
        if self.after_lease is not None:
            await self.after_lease()
        # Record signatures (keys.py): no key or keyring, no service (KeysError says what to run).
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
            self._take_inputs(topics)
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
        # Tamper evidence: every service seals its notification log periodically (sealing.py).
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

    async def _after_shutdown(self) -> None:
        await self.close()

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
                await _quietly(self._publish_pending(), "anchoring the last seal")
            await _quietly(self.relay.stop(), "stopping the relay")
        self.worker.shutdown()
        if self._app is not None:
            self._app.close()
        await _quietly(self.lease.release(), "letting the writer lease go")
        log.info("%s: stopped", self.name)

    async def _publish_pending(self) -> None:
        if self.relay is not None:
            await self.relay.publish_pending()

    def _spawn(self, name: str, coro: Awaitable[None]) -> None:
        async def guarded() -> None:
            try:
                await coro
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: %s crashed; stopping the service", self.name, name)
                self.failed = True
                self.stopping.set()

        self._tasks.append(asyncio.create_task(guarded(), name=f"{self.name}-{name}"))


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


OPS_PATHS = ("/health", "/ready", "/metrics", "/asyncapi", "/asyncapi.json", "/asyncapi.html")
"""The operations endpoints' paths, mounted on the FastStream ASGI app."""


class KafkaService(ServiceLifespan[TApp]):
    """One service's FastStream application (see the module docstring)."""

    def __init__(
        self,
        definition: ServiceDefinition[TApp],
        settings: Settings,
        *,
        description: str = "",
        create_topics: bool = True,
    ) -> None:
        super().__init__(definition, settings, create_topics=create_topics)
        self.description = description
        self.broker: KafkaBroker = service_broker(settings)
        self.outputs: dict[str, Any] = {}  # logical topic -> the messages published there
        self._subscriber: Any = None
        self._listener = RebalanceListener()
        self.fast = AsgiFastStream(
            self.broker,
            logger=log,
            on_startup=[self._on_startup],
            after_startup=[self._after_startup],
            on_shutdown=[self._on_shutdown],
            after_shutdown=[self._after_shutdown],
        )
        ops = ops_app(
            self.readiness,
            self._metrics_text,
            self.asyncapi_json,
            service=definition.name,
            allowed_hosts=settings.allowed_hosts,
        )
        for path in OPS_PATHS:
            self.fast.mount(path, ops)
        self.publisher(
            DEAD_LETTERS,
            description=f"Records {definition.name} refused (DeadLetter: the original bytes, "
            "key and headers, and why) and messages its relay could not publish "
            "(MessageQuarantined).",
        )
        self.publisher(
            INCIDENTS,
            description=f"Facts {definition.name} refused to believe (IncidentRaised).",
        )
        self.publisher(
            SEALS,
            description=f"{definition.name}'s seal anchors (SealAnchored, key "
            f"{definition.name}, signed): each seal of its store, kept forever for the audit.",
        )

    # ---- declarations (service.py) ---------------------------------------------------------

    def subscriber(self, *topics: str, description: str) -> BatchSubscriber:
        """The service's one batch subscriber over the logical ``topics`` (a decorator for
        its handler, which calls :meth:`consume`)."""
        if self._subscriber is not None:
            raise RuntimeError(f"{self.name} has its subscriber already (over {self.inputs})")
        self.inputs = topics
        names = [self.settings.topic(topic) for topic in topics]
        partition = self.settings.partition
        where: dict[str, Any] = {}
        if partition is not None:  # a partition cell (partitioned.py): assigned, no member
            where["partitions"] = [TopicPartition(name, partition) for name in names]
        self._subscriber = subscriber = self.broker.subscriber(
            *(names if partition is None else ()),
            **where,
            **subscriber_options(
                self.settings,
                self._listener,
                # FastStream names a channel after the title, with ":<topic>" when several
                title=f"{self.name} consumes"
                + (f" {self.settings.topic(topics[0])}" if len(topics) == 1 else ""),
                description=description,
            ),
        )
        return cast(BatchSubscriber, subscriber)

    @property
    def batch_subscriber(self) -> BatchSubscriber | None:
        """The FastStream subscriber (its ``consumer``: the running Kafka consumer)."""
        return cast(BatchSubscriber | None, self._subscriber)

    def publisher(self, topic: str, *, description: str) -> Any:
        """Document that this service writes the logical ``topic`` (through its relay)."""
        schema = published_union(self.name, topic)
        self.outputs[topic] = schema
        return self.broker.publisher(
            self.settings.topic(topic),
            title=f"{self.name} publishes {topic}",
            description=description,
            schema=schema,
        )

    async def consume(self, batch: Iterable[Any]) -> None:
        """The subscriber's handler: the raw records of one fetch to the batch processor."""
        if self.consumer is None:  # the hooks make it before the consumer starts
            log.critical("%s: records fetched before the service started; stopping", self.name)
            self.failed = True
            self.stopping.set()
            return
        await self.consumer.consume(batch, self._kafka_consumer(), self.stopping)

    def _take_inputs(self, topics: Sequence[str]) -> None:
        """The batch processor is made: the rebalance listener gets it. A service whose
        ``service.py`` declared no subscriber (tests' services) gets one over ``topics``."""
        self._listener.processor = self.consumer
        if self._subscriber is not None:
            return

        async def consume(batch: list[Any]) -> None:
            await self.consume(batch)

        consume.__annotations__["batch"] = list[read_union(topics)]  # type: ignore[misc]
        self.subscriber(*topics, description=f"The {self.name} service handles these.")(consume)

    def _kafka_consumer(self) -> Any:
        return self._subscriber.consumer if self._subscriber is not None else None

    # ---- the FastStream lifespan ---------------------------------------------------------

    async def start(self) -> None:
        """Run the startup hooks and start the broker (FastStream's ``Application.start``)."""
        await self.fast.start()

    async def stop(self) -> None:
        """Run the shutdown hooks and stop the broker; then close whatever is left."""
        try:
            await self.fast.stop()
        except Exception:
            log.exception("%s: stopping failed", self.name)
        finally:
            await self.close()

    # ---- operations --------------------------------------------------------------------

    async def _metrics_text(self) -> bytes:
        body, _content_type = await self.metrics.render(self)
        return body

    def asyncapi_json(self) -> str:
        """This service's AsyncAPI 3.0 document (JSON), from its broker."""
        return asyncapi_json(
            [self.broker],
            title=f"punto-banco {self.name}",
            topic_prefix=self.settings.topic_prefix,
            description=f"{self.description} {SYSTEM_DESCRIPTION}".strip(),
        )
