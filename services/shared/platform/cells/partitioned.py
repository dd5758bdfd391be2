"""The partitioned mode (``PB_PARTITIONED``): N processes of a service share its partitions.

Each process is a member of the service's consumer group that only learns which partition
numbers it owns (``membership.py``), and runs a cell (its ``KafkaService`` on
``Settings.for_partition(n)``: its own store, writer lease, assigned consumer, relay, timers
and seal anchors) for each. A cell that moves is stopped (pending work published, sealed, its
lease let go) and started by its new owner; one that does not stop in time ends the process.
The process serves one set of endpoints for all its cells (docs/scaling.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from services.shared.platform.cells.membership import (
    GroupMembership,
    keep_offsets_alive,
    seed_cell_offsets,
)
from services.shared.platform.host.endpoints import ops_app
from services.shared.platform.host.faststream import KafkaService
from services.shared.platform.host.runner import AsgiServer, run_host, start_endpoints
from services.shared.platform.kafka import client_options, ensure_topics
from services.shared.platform.logs import configure_logging
from services.shared.platform.settings import MAX_PARTITIONS, Settings
from services.shared.platform.store.lease import StoppedAsStandby, writer_lease


class _MergedCells(Collector):
    """The samples of every cell's registry, each labelled with its ``cell``, and the
    process's own ``pb_cells{service}`` (how many cells it runs: 0 for a spare process)."""

    def __init__(self, service: str, registries: Iterable[tuple[int, CollectorRegistry]]) -> None:
        self.service = service
        self.registries = list(registries)

    def collect(self) -> Iterable[Metric]:
        cells = GaugeMetricFamily(
            "pb_cells", "Partition cells this process runs.", labels=["service"]
        )
        cells.add_metric([self.service], len(self.registries))
        merged: dict[str, Metric] = {"pb_cells": cells}
        for partition, registry in self.registries:
            for metric in registry.collect():
                into = merged.get(metric.name)
                if into is None:
                    into = Metric(metric.name, metric.documentation, metric.type, metric.unit)
                    merged[metric.name] = into
                for sample in metric.samples:
                    if CELL_LABEL in sample.labels:
                        raise ValueError(f"{metric.name} has a label {CELL_LABEL!r} already")
                    labels = {**sample.labels, CELL_LABEL: str(partition)}
                    into.add_sample(sample.name, labels, sample.value, sample.timestamp)
        return merged.values()


CELL_LABEL = "cell"


async def merged_metrics(host: CellHost) -> bytes:
    """The Prometheus exposition of every cell of the process (gauges refreshed first)."""
    cells = dict(host.cells)
    await asyncio.gather(  # each render refreshes its gauges; the merge reads the registries
        *(cell.metrics.render(cell) for cell in cells.values()), return_exceptions=True
    )
    return merged_registry(
        host.name, ((partition, cell.metrics.registry) for partition, cell in cells.items())
    )


def merged_registry(service: str, registries: Iterable[tuple[int, CollectorRegistry]]) -> bytes:
    """The exposition of several cells' registries, each sample labelled with its ``cell``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_MergedCells(service, registries))
    return generate_latest(registry)


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
        # The unpartitioned store's lease, shared: no unpartitioned instance runs beside us.
        self.mode_lease = writer_lease(settings, shared=True)
        self.cells: dict[int, KafkaService[Any]] = {}
        self.leaving: dict[int, KafkaService[Any]] = {}  # cells being stopped
        self._starting: dict[int, asyncio.Task[None]] = {}
        self._stops: dict[int, asyncio.Task[None]] = {}
        self.stopping = asyncio.Event()
        self.failed = False
        self._tasks: list[asyncio.Task[None]] = []
        self.http: AsgiServer | None = None

    @property
    def name(self) -> str:
        return self.settings.service

    def alive(self) -> str | None:
        """/health: why the process should be restarted (a cell's store call never returns),
        else None."""
        cells = [*self.cells.items(), *self.leaving.items()]  # stopping ones too
        for partition, cell in sorted(cells, key=lambda item: item[0]):
            stuck = cell.worker.stuck()
            if stuck is not None:
                return f"p{partition}: {stuck}"
        return None

    async def checks(self) -> dict[str, str | None]:
        """/ready: each check's name -> None when fine, else why."""
        partitions: str | None = None
        if not self.membership.assignments:
            partitions = "not yet a member of the consumer group"
        # A member given no partition (more processes than partitions) is ready: it takes
        # a share when another leaves, and must not hold up a rolling update.
        waiting = sorted(self.membership.owned - set(self.cells))
        cells = dict(self.cells)
        results = await asyncio.gather(*(cell.readiness.checks() for cell in cells.values()))
        failing = [
            f"p{partition} {name}: {why}"
            for partition, checks in zip(cells, results, strict=True)
            for name, why in checks.items()
            if why is not None
        ]
        return {
            "writer": self.mode_lease.standby_reason(),
            "partitions": partitions,
            "cells": f"starting the cells of partitions {waiting}" if waiting else None,
            "handling": "; ".join(failing) or None,
            "running": "stopping" if self.stopping.is_set() else None,
        }

    async def start(self) -> None:
        """Serve the endpoints, take the mode lease, create the topics, join the group; the
        cells start as partitions are assigned."""
        ops = ops_app(
            self,
            functools.partial(merged_metrics, self),
            self.template.asyncapi_json,
            service=self.name,
            allowed_hosts=self.settings.allowed_hosts,
        )
        self.http = await start_endpoints(ops, self.settings)
        if not await self.mode_lease.acquire(self.stopping):
            return  # stopped while an unpartitioned instance wrote
        await ensure_topics(self.settings)
        await self._check_partition_counts()
        await self.membership.start()
        for what, step in (
            ("membership", self.membership.run(self.stopping)),
            ("cells", self._reconcile()),
            ("mode lease", self.mode_lease.watch(self.stopping)),
            ("offsets", keep_offsets_alive(lambda: list(self.cells.values()), self.stopping)),
        ):
            self._tasks.append(asyncio.create_task(self._guard(what, step)))

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
        if max(counts.values()) > MAX_PARTITIONS:
            raise RuntimeError(
                f"{self.name}: a partitioned service runs at most {MAX_PARTITIONS} partitions, "
                f"its topics have {counts} (docs/scaling.md)"
            )

    async def _guard(self, what: str, step: Any) -> None:
        try:
            await step
        except Exception:  # not a cancellation (a BaseException)
            log.exception("%s: %s crashed; stopping the process", self.name, what)
            self.failed = True
            self.stopping.set()

    async def _reconcile(self) -> None:
        """Run a cell for each partition owned, and none for the others. Never waits for a
        cell to start or stop: each is a task of its own (a stop that hangs is timed out)."""
        changed = self.membership.changed
        while not self.stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), 0.5)
            changed.clear()
            if self.stopping.is_set():
                return
            self._check_cells()
            owned = self.membership.owned
            for partition in [p for p in set(self.cells) | set(self._starting) if p not in owned]:
                self._stop_cell(partition, "moved away")
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
        cell: KafkaService[Any] | None = None
        try:  # building the cell too: whatever fails, the partition is not left "starting"
            settings = self.settings.for_partition(partition)
            cell = self.build(settings)
            cell.create_topics = False
            # Once its store's lease is held: where its consumer starts (cells/membership.py).
            cell.after_lease = functools.partial(
                seed_cell_offsets, self.settings, partition, self.template.inputs
            )
            await cell.start()  # waits for the store's writer lease (the previous owner)
            await cell.wait_ready()
        except BaseException as error:  # the cell stops; a cancellation goes on
            if cell is not None:
                await cell.stop()
            if isinstance(error, StoppedAsStandby):
                log.info("%s: partition %d left before its cell started", self.name, partition)
            elif isinstance(error, Exception):
                log.exception("%s: the cell of partition %d failed to start", self.name, partition)
                self.failed = True
                self.stopping.set()
            else:
                raise
            return
        finally:
            self._starting.pop(partition, None)
        self.cells[partition] = cell
        log.info("%s: partition %d: serving", self.name, partition)

    def _stop_cell(self, partition: int, why: str) -> None:
        """Stop the partition's cell (or its start) in a task of its own."""
        starting = self._starting.pop(partition, None)
        if starting is not None:
            starting.cancel()
        cell = self.cells.pop(partition, None)
        if cell is None:
            return
        log.info("%s: partition %d %s: stopping its cell", self.name, partition, why)
        self.leaving[partition] = cell
        self._stops[partition] = asyncio.create_task(self._stopped(partition, cell))

    async def _stopped(self, partition: int, cell: KafkaService[Any]) -> None:
        try:
            await asyncio.wait_for(cell.stop(), CELL_STOP_TIMEOUT)
        except Exception:
            # Its lease is held until this process ends: end it (the orchestrator restarts).
            log.exception(
                "%s: the cell of partition %d did not stop within %.0f s; stopping the process",
                self.name,
                partition,
                CELL_STOP_TIMEOUT,
            )
            self.failed = True
            self.stopping.set()
        finally:
            self.leaving.pop(partition, None)
            self._stops.pop(partition, None)

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until the process owns its first partitions and runs their cells (or stops)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self.stopping.is_set():
            membership = self.membership
            if membership.assignments and set(self.cells) == set(membership.owned):
                return
            if loop.time() > deadline:
                raise TimeoutError(f"{self.name}: cells not serving within {timeout} s")
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        """Leave the group first (the others take over), then stop every cell; a stop in
        progress is waited for, never cut short."""
        self.stopping.set()
        http, self.http = self.http, None
        if http is not None:
            await http.stop()
        if self._tasks:  # each ends on ``stopping`` (the membership within a poll)
            await asyncio.wait(self._tasks, timeout=5)
            for task in self._tasks:
                task.cancel()
        try:
            await self.membership.stop()
        except Exception:
            log.exception("%s: leaving the consumer group failed", self.name)
        for partition in list(self.cells) + list(self._starting):
            self._stop_cell(partition, "process stopping")
        stops = [task for task in self._stops.values() if not task.done()]
        if stops:
            await asyncio.wait(stops)
        await self.mode_lease.release()


CELL_STOP_TIMEOUT = 60.0
"""A cell that has not stopped by then (a store call that never returns) ends the process."""


def serve_partitioned(build: BuildService, settings: Settings) -> int:
    """Process entry point of a partitioned service (``PB_PARTITIONED``): one process, until
    SIGTERM/SIGINT (or a cell's crash)."""
    configure_logging(settings)
    return asyncio.run(run_host(CellHost(build, settings), ready_timeout=120))
