"""FastStream, behind this one module: the only one of the project that imports it.

A service is a FastStream application (:class:`KafkaService`: broker, subscriber, publishers,
lifespan hooks, ASGI app, AsyncAPI document), but the consumer's path is the platform's: the
batch processor needs the raw records of a fetch, one store transaction per partition and
offsets committed after the store (docs/architecture.md says why). So the subscriber gets
``ack_policy=MANUAL`` (FastStream never commits), :func:`keep_raw` as parser and decoder (no
header is decoded: one bad header would fail the whole fetch), ``apply_types=False`` and a
handler that never raises; the relay and the dead letters send with aiokafka's producers. What
this relies on of FastStream 0.7 (pinned ``<0.8``) is held by
tests/unit/platform/test_platform_faststream_pins.py.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol

from aiokafka import ConsumerRecord
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from faststream.asgi import AsgiFastStream
from faststream.kafka import KafkaBroker, TopicPartition
from faststream.kafka.message import FAKE_CONSUMER, KafkaAckableMessage
from faststream.kafka.subscriber.usecase import BatchSubscriber
from faststream.middlewares import AckPolicy
from faststream.security import BaseSecurity, SASLScram256, SASLScram512
from faststream.specification import AsyncAPI

from contracts import DEAD_LETTERS, INCIDENTS, SEALS
from services.shared.platform.consumer import RebalanceListener
from services.shared.platform.host.asyncapi import (
    SYSTEM_DESCRIPTION,
    VERSION,
    complete,
    published_union,
)
from services.shared.platform.host.endpoints import ASYNCAPI_PATHS, ops_app
from services.shared.platform.host.runner import AsgiServer, Started, start_endpoints
from services.shared.platform.host.service import ServiceDefinition, ServiceLifespan, TApp
from services.shared.platform.kafka import SafeFetch
from services.shared.platform.settings import Settings

log = logging.getLogger(__name__)

METADATA_MAX_AGE_MS = 15_000
"""How often the consumer refreshes topic metadata: a topic deleted and created again is
assigned again within about this long."""
MAX_PARTITION_FETCH_BYTES = 8 * 1024 * 1024
FETCH_MAX_WAIT_MS = 100
IDLE_WAIT_MS = 40
"""The subscriber's ``batch_timeout_ms``: how long an idle fetch waits before the loop goes
round again. Records end the wait as they arrive (:func:`fetch_promptly`), so it sets only how
often an idle service wakes: as often as before that function (a 20 ms fetch, then FastStream's
20 ms sleep)."""


def kafka_security(settings: Settings) -> BaseSecurity | None:
    """FastStream's security object of the service's Kafka login (None: PLAINTEXT); what the
    AsyncAPI document states and the broker connects with."""
    auth = settings.kafka_auth
    auth.check_principal()
    context = auth.ssl_context() if auth.tls else None
    if auth.sasl:
        scram = SASLScram512 if auth.mechanism == "SCRAM-SHA-512" else SASLScram256
        return scram(auth.username, auth.password, ssl_context=context, use_ssl=auth.tls)
    return BaseSecurity(ssl_context=context, use_ssl=True) if auth.tls else None


BROKER_LOG = logging.getLogger("services.shared.platform.broker")
# FastStream's warning that it creates no topic is dropped: ``kafka.ensure_topics`` does.
BROKER_LOG.addFilter(
    lambda record: not str(record.msg).startswith("Auto create topics is disabled")
)


def service_broker(settings: Settings) -> KafkaBroker:
    """The service's broker: its consumer's connection and AsyncAPI's server (consumer only,
    no topic created, nothing validated: the handler gets the raw records)."""
    return KafkaBroker(
        [server.strip() for server in settings.kafka_bootstrap_servers.split(",")],
        security=kafka_security(settings),
        client_id=f"pb-{settings.service}-consumer",
        metadata_max_age_ms=METADATA_MAX_AGE_MS,
        consumer_only=True,
        allow_auto_create_topics=False,
        apply_types=False,
        graceful_timeout=30.0,
        logger=BROKER_LOG,
        log_level=logging.DEBUG,  # FastStream's "Received" / "Processed" per fetched batch
        description="The Kafka cluster the services meet on.",
    )


async def keep_raw(message: Any) -> Any:
    """Parser and decoder of the batch subscriber: as the parser it wraps one fetch's records
    without reading a header; as the decoder it returns them (the handler's body)."""
    if isinstance(message, KafkaAckableMessage):
        return message.raw_message
    records: tuple[ConsumerRecord[Any, Any], ...] = tuple(message)
    return KafkaAckableMessage(
        raw_message=records,
        body=records,
        message_id=(f"{records[0].topic}:{records[0].partition}@{records[0].offset}+{len(records)}")
        if records
        else None,
        consumer=FAKE_CONSUMER,  # never used: offsets are committed by the processor
    )


def fetch_promptly(subscriber: Any, fetched: Callable[[int], Awaitable[None]]) -> None:
    """Give ``subscriber`` (FastStream's batch subscriber) a fetch that hands records over as
    they arrive, then tells ``fetched`` how many it got (awaited in the consume loop, before
    the records are handled). FastStream's own (``BatchSubscriber.get_msg``) sleeps
    ``batch_timeout_ms`` after an empty fetch, so a record arriving during that sleep waited for
    it at every service it crossed: a bet's answer, a coup's CoupResolved (BENCHMARKS.md, "A
    fetch without FastStream's idle sleep"). Its consume loop calls ``self.get_msg``: the
    instance's attribute replaces the class's method."""
    if not isinstance(subscriber, BatchSubscriber):  # its loop would die on every fetch
        raise TypeError(f"fetch_promptly needs FastStream's batch subscriber, not {subscriber!r}")

    fetch = SafeFetch()  # a record aiokafka cannot parse would end the consume loop

    async def get_msg(consumer: Any) -> tuple[ConsumerRecord[Any, Any], ...]:
        records = await fetch(consumer, subscriber.batch_timeout_ms, subscriber.max_records)
        await fetched(len(records))
        return records

    subscriber.get_msg = get_msg  # type: ignore[method-assign]


def subscriber_options(
    settings: Settings, listener: RebalanceListener, *, title: str, description: str
) -> dict[str, Any]:
    """The arguments of ``broker.subscriber(*topics, **...)`` for a service's one batch
    subscriber; a group member reads the same partition of every input topic (range)."""
    assigned = settings.partition is not None  # a partition cell: no group membership
    return {
        "batch": True,
        "group_id": settings.consumer_group,
        "ack_policy": AckPolicy.MANUAL,
        "parser": keep_raw,
        "decoder": keep_raw,
        "max_records": settings.consumer_max_records,
        "batch_timeout_ms": IDLE_WAIT_MS,
        "auto_offset_reset": "earliest",
        "max_partition_fetch_bytes": MAX_PARTITION_FETCH_BYTES,
        "fetch_max_wait_ms": FETCH_MAX_WAIT_MS,
        **(
            {}
            if assigned
            else {"partition_assignment_strategy": (RangePartitionAssignor,), "listener": listener}
        ),
        "title": title,
        "description": description,
    }


def asyncapi_json(
    brokers: Sequence[KafkaBroker],
    *,
    title: str = "punto-banco",
    topic_prefix: str = "",
    description: str = SYSTEM_DESCRIPTION,
) -> str:
    """The AsyncAPI 3.0 document (JSON) of ``brokers``, FastStream's completed (asyncapi.py)."""
    spec = AsyncAPI(*brokers, title=title, version=VERSION, description=description)
    document = complete(json.loads(spec.to_specification().to_json()), topic_prefix)
    return json.dumps(document, separators=(",", ":"))


OPS_PATHS = ("/health", "/ready", "/metrics", *ASYNCAPI_PATHS)


class KafkaService(ServiceLifespan[TApp], Started):
    """One service's FastStream application: ``broker``, its one batch subscriber, the
    publishers that document what its relay writes, and ``fast`` (the ASGI app with the
    operations endpoints mounted, whose lifespan hooks start and stop the service); started
    and stopped inside the running event loop (``async with``: tests, ``up``, a cell)."""

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
        self.http: AsgiServer | None = None  # the operations endpoints, once started
        self.batch_subscriber: Any = None  # FastStream's (its ``consumer``: the Kafka consumer)
        self._stopped = False
        self._frozen = False
        self._nothing_fetched = False
        self.fast = AsgiFastStream(
            self.broker,
            logger=log,
            on_startup=[self._on_startup],
            after_startup=[self._after_startup],
            on_shutdown=[self._on_shutdown],
            after_shutdown=[self.close],
        )
        ops = ops_app(
            self.readiness,
            functools.partial(self.metrics.render, self),
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

    def subscriber(
        self, *topics: str, description: str
    ) -> Callable[[Callable[..., Awaitable[None]]], object]:
        """The service's one batch subscriber over the logical ``topics`` (a decorator for
        its handler, which calls :meth:`consume`)."""
        if self.batch_subscriber is not None:
            raise RuntimeError(f"{self.name} has its subscriber already (over {self.inputs})")
        self.inputs = topics
        names = [self.settings.topic(topic) for topic in topics]
        partition = self.settings.partition
        where: dict[str, Any] = {}
        if partition is not None:  # a partition cell: assigned, no member of the group
            where["partitions"] = [TopicPartition(name, partition) for name in names]
        self.batch_subscriber = subscriber = self.broker.subscriber(
            *(names if partition is None else ()),
            **where,
            **subscriber_options(
                self.settings,
                self.listener,
                # FastStream names a channel after the title, with ":<topic>" when several
                title=f"{self.name} consumes"
                + (f" {self.settings.topic(topics[0])}" if len(topics) == 1 else ""),
                description=description,
            ),
        )
        fetch_promptly(subscriber, self._fetched)
        return subscriber  # type: ignore[no-any-return]

    async def _fetched(self, count: int) -> None:
        """After each fetch: when it brought nothing, the offsets handled are committed (the
        consumer is idle) and, once the whole process is idle, garbage collected."""
        self._nothing_fetched = count == 0
        if self._nothing_fetched and self.consumer is not None:
            await self.consumer.commit_pending()
        collect_when_due()

    def idle(self) -> bool:
        """Its last fetch brought nothing, and its relay has nothing to publish (a gateway's
        HTTP requests and wallet calls are not counted: a collection may fall among them, as
        it could before)."""
        fetching = self.batch_subscriber is not None and not self._nothing_fetched
        return not fetching and (self.relay is None or self.relay.idle)

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

    def _kafka_consumer(self) -> Any:
        return self.batch_subscriber.consumer if self.batch_subscriber is not None else None

    async def start(self) -> None:
        """Serve the operations endpoints, run the startup hooks and start the broker. The
        endpoints first: a standby waiting for its store's writer lease (in the startup hooks)
        answers /health, and /ready says it is a standby."""
        self.http = await start_endpoints(self.fast, self.settings)
        await self.fast.start()
        _freeze(self)
        self._frozen = True
        if self.relay is not None:  # its outbox drained: maybe all is idle now
            self.relay.on_idle = collect_when_due

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
            raise TimeoutError(f"{self.name}: no Kafka partitions within {timeout} s")

    async def stop(self) -> None:
        """Stop the endpoints, run the shutdown hooks and stop the broker; then close whatever
        is left (once)."""
        if self._stopped:
            return
        self._stopped = True
        self.stopping.set()
        http, self.http = self.http, None
        if http is not None:  # operations endpoints first (AsgiServer.stop logs its failures)
            await http.stop()
        try:
            await self.fast.stop()
        except Exception:
            log.exception("%s: stopping failed", self.name)
        finally:
            try:
                await self.close()
            finally:
                if self._frozen:  # stopped: its objects may go
                    self._frozen = False
                    _thaw(self)

    def asyncapi_json(self) -> str:
        """This service's AsyncAPI 3.0 document (JSON)."""
        return asyncapi_json(
            [self.broker],
            title=f"punto-banco {self.name}",
            topic_prefix=self.settings.topic_prefix,
            description=f"{self.description} {SYSTEM_DESCRIPTION}".strip(),
        )


GC_THRESHOLDS = (10_000, 10, 10)
"""The collector's thresholds in a process that runs services, applied between bursts of work
(:func:`collect_when_due`). Python's are (700, 10, 10): a coup makes tens of thousands of
objects at once (a 10,000-bet coup's lines, records and messages), which at 700 were promoted
through every generation and set off full collections of the whole heap (BENCHMARKS.md, "The
garbage collector's thresholds")."""
BUSY_COLLECTION = 200_000
"""Objects pending (the first generation's count) at which a busy process collects on its own
(Python's automatic collection, at this threshold while services run): a load without a pause
keeps its garbage bounded, and settling a 10,000-bet coup makes fewer."""


class Idle(Protocol):
    def idle(self) -> bool:
        """Whether the service has nothing to do now (nothing fetched, nothing to publish)."""


_running: list[Idle] = []
"""The services running in this process (a partitioned process runs several)."""
_thresholds_before = gc.get_threshold()


def _freeze(service: Idle) -> None:
    """A service started: what exists now (modules, FastStream's and the app's objects) lives
    as long as it runs, so the garbage collector stops scanning it (``gc.freeze``: a full
    collection then costs a fraction; measured: GC during a 10,000-bet flood 0.30 s -> 0.08 s).
    The process collects on its own only at :data:`BUSY_COLLECTION`; :func:`collect_when_due`
    does the rest between bursts of work."""
    global _thresholds_before
    if _running:  # a cell starts beside others: their garbage is not to be frozen
        gc.collect()
    else:
        _thresholds_before = gc.get_threshold()
    _running.append(service)
    gc.freeze()
    gc.set_threshold(BUSY_COLLECTION, *GC_THRESHOLDS[1:])


def _thaw(service: Idle) -> None:
    """A service stopped: once none runs in this process, collect as usual (``gc.unfreeze``,
    the thresholds as they were); while others run (a partitioned process's cells), collect the
    stopped one's objects now and freeze what remains (else they would stay frozen, never
    collected)."""
    if service not in _running:
        return
    _running.remove(service)
    gc.unfreeze()
    if _running:
        gc.collect()
        gc.freeze()
    else:
        gc.set_threshold(*_thresholds_before)


def collect_when_due() -> int | None:
    """Once every service of the process is idle, collect the generation :data:`GC_THRESHOLDS`
    make due, the oldest whose count reached its threshold (Python's own rule, without its
    guard that puts off a full collection while the old generation grew by less than a
    quarter); the generation collected, or None. Called after each fetch of every service and
    when a relay has published all it had. A collection costs tens of ms once a coup's objects
    are live: one falling in a coup's settling delayed its last BetSettled by as much
    (BENCHMARKS.md, "Collecting between bursts of work")."""
    counts = gc.get_count()
    if not _running or counts[0] < GC_THRESHOLDS[0]:
        return None
    if not all(service.idle() for service in _running):
        return None
    generation = next((g for g in (2, 1) if counts[g] >= GC_THRESHOLDS[g]), 0)
    gc.collect(generation)
    return generation
