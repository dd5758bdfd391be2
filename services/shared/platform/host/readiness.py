"""The checks behind a service's ``/ready``: what a running service must have to do its work.

:class:`ServiceReadiness` is the ``Readiness`` the operations endpoints ask
(``endpoints.ops_app``); each check is None when fine, else why not:

- ``writer``: this instance holds its store's writer lease (``writer_lease.py``), else it is
  a standby and says who writes;
- ``broker``: Kafka answers a metadata request (with the service's own client options);
- ``store``: the event store answers a query;
- ``partitions``: the consumer has its partitions (a service without inputs has none to wait for);
- ``handling``: no partition is stopped (``stops.py``: a handler failing on an internal
  message), else each stopped partition, its record and the error; and no store call has
  run too long (``worker.py``: stuck, which also fails ``/health`` through :meth:`alive`);
- ``running``: the service is not stopping.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from aiokafka.client import AIOKafkaClient

from services.shared.platform.consumer.batch_processor import BatchProcessor
from services.shared.platform.kafka import client_options
from services.shared.platform.settings import Settings
from services.shared.platform.store.application import ServiceApplication
from services.shared.platform.store.worker import AppWorker
from services.shared.platform.store.writer_lease import WriterLease

READY_TIMEOUT = 3.0
"""Seconds each check may take."""


class RunningService(Protocol):
    """What the checks read of the running service."""

    @property
    def settings(self) -> Settings: ...

    @property
    def app(self) -> ServiceApplication: ...

    @property
    def consumer(self) -> BatchProcessor | None: ...

    @property
    def stopping(self) -> asyncio.Event: ...

    @property
    def lease(self) -> WriterLease: ...

    @property
    def worker(self) -> AppWorker: ...


class ServiceReadiness:
    """The real checks of one running service (see the module docstring)."""

    def __init__(self, service: RunningService) -> None:
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
                await asyncio.wait_for(client.bootstrap(), READY_TIMEOUT)
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
