"""Scale-out: N processes of one service share its partitions, a cell per partition.

``PB_PARTITIONED=yes punto-banco serve settlement`` started N times with the same settings
shares the work the way Kafka Streams does: the partition is the unit of work (a table lives
in one partition number on every topic: every record is keyed by its table id, and every
project topic has the same partition count, ``docs/scaling.md``).

- Each process is a member of the service's consumer group (``group_membership.py``): the
  group only says which partition NUMBERS the process owns; the same number of every input
  topic goes with it.
- For each partition number it owns, the process runs a **cell** (:class:`CellHost`): the
  service itself, unchanged, on ``Settings.for_partition(n)``: its own store (SQLite file
  ``<service>-p<n>.sqlite``, PostgreSQL schema ``<service>_p<n>``: events, tracking, relay
  position, seal chain), its own writer lease (``writer_lease.py``: a cell waits for the
  lease of its store until the previous owner's cell let it go or died, and every write
  transaction is fenced, so a zombie can commit nothing), its Kafka consumer ASSIGNED
  partition n of every input topic (offsets under the group's name + ``.p<n>``, a group
  the ACLs let it use), its relay (a table's records keep their partition: same key, same
  count), its timers (the betting clock, the sealer) and seal anchors
  (``SealAnchored.partition``).
- When the group moves a partition (a member joins, leaves or dies: its session times out),
  the old owner stops that cell (it publishes what is pending, seals and closes the store,
  lets the lease go) and the new owner starts one on the same store: no state is shared in
  memory, none is judged with another cell's, and the store's tracking records absorb the
  redelivery of what was handled but not yet committed to Kafka.

The process serves one set of operations endpoints for all its cells (``/ready`` names each
cell, ``/metrics`` labels each sample with its ``cell``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer

from services.shared.platform.cell_offsets import seed_cell_offsets
from services.shared.platform.endpoints import ops_app
from services.shared.platform.group_membership import GroupMembership
from services.shared.platform.kafka import client_options, ensure_topics
from services.shared.platform.partitioned_ops import CellsReadiness, merged_metrics
from services.shared.platform.runner import ServiceHost, configure_logging
from services.shared.platform.service_app import KafkaService
from services.shared.platform.settings import Settings
from services.shared.platform.webserver import AsgiServer
from services.shared.platform.writer_lease import StoppedAsStandby

log = logging.getLogger(__name__)

BuildService = Callable[[Settings], KafkaService[Any]]
"""A service's ``build_service(settings)`` (its ``service.py``)."""


class CellHost:
    """One process of a partitioned service: its group membership and one cell per partition
    it owns (see the module docstring)."""

    def __init__(self, build: BuildService, settings: Settings) -> None:
        if settings.partition is not None:
            raise ValueError("a partitioned service's settings, not one cell's")
        self.build = build
        self.settings = settings
        self.template = build(settings)  # never started: its inputs and AsyncAPI document
        if not self.template.inputs:
            raise ValueError(f"{settings.service} reads no topic: nothing to partition")
        self.membership = GroupMembership(settings, self.template.inputs[0])
        self.cells: dict[int, ServiceHost[Any]] = {}
        self._starting: dict[int, asyncio.Task[None]] = {}
        self.stopping = asyncio.Event()
        self.failed = False
        self._task: asyncio.Task[None] | None = None
        self._member_task: asyncio.Task[None] | None = None
        self.readiness = CellsReadiness(self)
        self.http: AsgiServer | None = None

    @property
    def name(self) -> str:
        return self.settings.service

    async def start(self) -> None:
        """Serve the endpoints, create the topics, join the group; the cells start as
        partitions are assigned."""
        await self._start_http()
        await ensure_topics(self.settings)
        await self._check_partition_counts()
        await self.membership.start()
        self._member_task = asyncio.create_task(self._guard("membership", self._membership()))
        self._task = asyncio.create_task(self._guard("cells", self._reconcile()))

    async def _start_http(self) -> None:
        settings = self.settings
        if settings.http_port is None:
            return

        async def metrics() -> bytes:
            return await merged_metrics(self)

        app = ops_app(
            self.readiness,
            metrics,
            self.template.asyncapi_json,
            service=settings.service,
            allowed_hosts=settings.allowed_hosts,
        )
        server = AsgiServer(app, settings.http_host, settings.http_port, name=settings.service)
        try:
            await server.start()
        except OSError as error:
            log.warning("%s: no HTTP endpoints (%s)", settings.service, error)
            await server.stop()
            return
        self.http = server

    async def _check_partition_counts(self) -> None:
        """Every input topic must have the same partition count (docs/scaling.md)."""
        consumer = AIOKafkaConsumer(**client_options(self.settings))
        await consumer.start()
        try:
            await consumer.topics()  # the cluster's metadata
            counts = {}
            for topic in self.template.inputs:
                partitions = consumer.partitions_for_topic(self.settings.topic(topic))
                counts[topic] = len(partitions or ())
        finally:
            await consumer.stop()
        if len(set(counts.values())) != 1:
            raise RuntimeError(
                f"{self.name}: a partitioned service needs the same partition count on every "
                f"input topic, not {counts} (docs/scaling.md)"
            )

    async def _membership(self) -> None:
        await self.membership.run(self.stopping)

    async def _guard(self, what: str, step: Any) -> None:
        try:
            await step
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: %s crashed; stopping the process", self.name, what)
            self.failed = True
            self.stopping.set()

    async def _reconcile(self) -> None:
        """Run a cell for each partition owned, and none for the others."""
        changed = self.membership.changed
        while not self.stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), 0.5)
            changed.clear()
            self._check_cells()
            owned = self.membership.owned
            gone = [p for p in set(self.cells) | set(self._starting) if p not in owned]
            if gone:
                await asyncio.gather(*(self._stop_cell(p) for p in gone))
            for partition in sorted(owned):
                if partition not in self.cells and partition not in self._starting:
                    self._starting[partition] = asyncio.create_task(self._start_cell(partition))

    def _check_cells(self) -> None:
        """A cell whose task crashed (or that stopped by itself) stops the process."""
        for partition, cell in self.cells.items():
            if cell.stopping.is_set():
                log.error("%s: the cell of partition %d stopped; stopping", self.name, partition)
                self.failed = True
                self.stopping.set()

    async def _start_cell(self, partition: int) -> None:
        settings = self.settings.for_partition(partition)
        cell = ServiceHost(self.build(settings), settings, create_topics=False)
        try:
            await seed_cell_offsets(self.settings, partition, self.template.inputs)
            await cell.start()  # waits for the store's writer lease (the previous owner)
            await cell.wait_ready()
        except StoppedAsStandby:
            await cell.stop()
            return
        except asyncio.CancelledError:
            await cell.stop()
            raise
        except Exception:
            log.exception("%s: the cell of partition %d failed to start", self.name, partition)
            await cell.stop()
            self.failed = True
            self.stopping.set()
            return
        finally:
            self._starting.pop(partition, None)
        self.cells[partition] = cell
        log.info("%s: partition %d: serving", self.name, partition)

    async def _stop_cell(self, partition: int) -> None:
        starting = self._starting.pop(partition, None)
        if starting is not None:
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
        cell = self.cells.pop(partition, None)
        if cell is not None:
            log.info("%s: partition %d moved away: stopping its cell", self.name, partition)
            await cell.stop()

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until the process owns its first partitions and runs their cells."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        await asyncio.wait_for(self.membership.assigned_once.wait(), timeout)
        while set(self.cells) != set(self.membership.owned) and not self.stopping.is_set():
            if loop.time() > deadline:
                raise TimeoutError(f"{self.name}: cells not serving within {timeout} s")
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        """Leave the group first (the others take over), then stop every cell."""
        self.stopping.set()
        http, self.http = self.http, None
        if http is not None:
            await http.stop()
        await self.readiness.close()
        for task in (self._member_task, self._task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        try:
            await self.membership.stop()
        except Exception:
            log.exception("%s: leaving the consumer group failed", self.name)
        partitions = set(self.cells) | set(self._starting)
        await asyncio.gather(*(self._stop_cell(p) for p in partitions))


async def run_partitioned(build: BuildService, settings: Settings) -> int:
    """Run one process of a partitioned service until SIGTERM/SIGINT (or a cell's crash)."""
    host = CellHost(build, settings)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, host.stopping.set)
    try:
        await host.start()
        try:
            await host.wait_ready(timeout=120)
        except TimeoutError:
            log.warning("%s: cells not all serving after 120 s; serving anyway", host.name)
        # The line below is what `punto-banco up` waits for: keep its wording.
        log.info("%s: serving", settings.service)
        await host.stopping.wait()
    finally:
        await host.stop()
    return 1 if host.failed else 0


def serve_partitioned(build: BuildService, settings: Settings) -> int:
    """Process entry point of a partitioned service (``PB_PARTITIONED``)."""
    configure_logging(settings)
    return asyncio.run(run_partitioned(build, settings))
