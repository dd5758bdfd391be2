"""The operations endpoints of a partitioned service's process: one set for all its cells.

``/health`` and ``/ready`` (``endpoints.py``) ask :class:`CellsReadiness`: the process is a
member of its group and runs a cell for each partition it owns (owning none is ready: more
processes than partitions wait for a share), and each cell passes its own checks (``readiness.py``:
its writer lease, the broker, its store, its partitions, its handling); a check that fails
is named after its cell (``p3 store: ...``). ``/metrics`` merges the cells' registries
(:func:`merged_metrics`): every sample gets a ``cell`` label, the partition number.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from services.shared.platform.cells.group_membership import GroupMembership
from services.shared.platform.host.runner import ServiceHost
from services.shared.platform.store.writer_lease import WriterLease


class CellHost(Protocol):
    """What the endpoints read of a partitioned service's process (``partitioned.py``)."""

    @property
    def name(self) -> str: ...

    @property
    def cells(self) -> dict[int, ServiceHost[Any]]: ...

    @property
    def membership(self) -> GroupMembership: ...

    @property
    def stopping(self) -> asyncio.Event: ...

    @property
    def leaving(self) -> dict[int, ServiceHost[Any]]: ...

    @property
    def mode_lease(self) -> WriterLease: ...


class CellsReadiness:
    """The checks of a partitioned service's process (see the module docstring)."""

    def __init__(self, host: CellHost) -> None:
        self.host = host

    def alive(self) -> str | None:
        """Why the process should be restarted (a cell's store call never returns), else None."""
        cells = [*self.host.cells.items(), *self.host.leaving.items()]  # stopping ones too
        for partition, cell in sorted(cells, key=lambda item: item[0]):
            stuck = cell.worker.stuck()
            if stuck is not None:
                return f"p{partition}: {stuck}"
        return None

    async def checks(self) -> dict[str, str | None]:
        host = self.host
        owned = host.membership.owned
        partitions: str | None = None
        if not host.membership.assigned_once.is_set():
            partitions = "not yet a member of the consumer group"
        # A member given no partition (more processes than partitions) is ready: it takes
        # a share when another leaves, and must not hold up a rolling update.
        waiting = sorted(owned - set(host.cells))
        cells = dict(host.cells)
        results = await asyncio.gather(
            *(cell.service.readiness.checks() for cell in cells.values())
        )
        failing = [
            f"p{partition} {name}: {why}"
            for partition, checks in zip(cells, results, strict=True)
            for name, why in checks.items()
            if why is not None
        ]
        return {
            "writer": host.mode_lease.standby_reason(),
            "partitions": partitions,
            "cells": f"starting the cells of partitions {waiting}" if waiting else None,
            "handling": "; ".join(failing) or None,
            "running": "stopping" if host.stopping.is_set() else None,
        }


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
        *(cell.metrics.render(cell.service) for cell in cells.values()), return_exceptions=True
    )
    return merged_registry(
        host.name, ((partition, cell.metrics.registry) for partition, cell in cells.items())
    )


def merged_registry(service: str, registries: Iterable[tuple[int, CollectorRegistry]]) -> bytes:
    """The exposition of several cells' registries, each sample labelled with its ``cell``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_MergedCells(service, registries))
    return generate_latest(registry)
