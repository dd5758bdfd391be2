"""A service as a FastStream application: its broker, its subscriber and its publishers.

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

import logging
from collections.abc import Iterable, Sequence
from typing import Any, cast

from faststream.asgi import AsgiFastStream
from faststream.kafka import KafkaBroker, TopicPartition
from faststream.kafka.subscriber.usecase import BatchSubscriber

from contracts import DEAD_LETTERS, INCIDENTS, SEALS
from services.shared.platform.consumer.consumer import RebalanceListener, subscriber_options
from services.shared.platform.host.asyncapi import (
    SYSTEM_DESCRIPTION,
    asyncapi_json,
    published_union,
    read_union,
)
from services.shared.platform.host.definition import ServiceDefinition
from services.shared.platform.host.endpoints import ops_app
from services.shared.platform.host.lifespan import ServiceLifespan, TApp
from services.shared.platform.kafka import service_broker
from services.shared.platform.settings import Settings

log = logging.getLogger(__name__)

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
