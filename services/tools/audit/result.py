"""What an audit returns: :class:`AuditReport` (findings, totals, seals, anchors, counts).

A partitioned deployment's audit (``by_partition.py``) is one report too: its stores named
``<service>-p<N>``, its totals over every partition, and what each partition showed in
:class:`PartitionSummary` (``partitions``; None for a service's one store: the report as
before).

``report.py`` renders it as text, JSON and HTML. :func:`bulk_loading` pauses the garbage
collector while the auditor builds millions of records.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from services.tools.audit.anchors import AnchorSummary
from services.tools.audit.checks import Filters
from services.tools.audit.findings import Finding, Severity
from services.tools.audit.seals import SealSummary
from services.tools.audit.totals import Totals


@dataclass
class PartitionSummary:
    """What the audit of one partition's stores (shoe-pN, dealing-pN, settlement-pN) showed."""

    stores: list[str]  # the services whose store of this partition was read
    events: int = 0
    checked: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    warnings: int = 0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class AuditReport:
    findings: list[Finding]
    totals: Totals
    seals: dict[str, SealSummary]
    events: dict[str, int]
    checked: dict[str, int]
    filters: Filters
    seconds: float
    stores: dict[str, str] = field(default_factory=dict)
    anchors: dict[str, AnchorSummary] | None = None
    """Each store's anchors (``audit --anchors``; None: not checked)."""
    anchors_topic: str = ""
    partitions: dict[int, PartitionSummary] | None = None
    """A partitioned deployment's: each partition's summary (None: a service's one store)."""
    generated_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.WARNING]

    @property
    def passed(self) -> bool:
        return not self.findings

    @property
    def total_events(self) -> int:
        return sum(self.events.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "generated_at": self.generated_at,
            "filters": self.filters.to_json(),
            "stores": self.stores,
            "events": self.events,
            "seconds": round(self.seconds, 3),
            "checked": self.checked,
            "seals": {k: v.to_json() for k, v in self.seals.items()},
            **self._anchors_json(),
            **self._partitions_json(),
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "findings": [f.to_json() for f in self.findings],
            "totals": self.totals.to_json(),
        }

    def _partitions_json(self) -> dict[str, Any]:
        if self.partitions is None:
            return {}  # a service's one store: the report as before
        return {"partitions": {str(n): p.to_json() for n, p in sorted(self.partitions.items())}}

    def _anchors_json(self) -> dict[str, Any]:
        if self.anchors is None:
            return {}  # an audit without --anchors: the report as before
        return {
            "anchors": {
                "topic": self.anchors_topic,
                "stores": {k: v.to_json() for k, v in self.anchors.items()},
            }
        }


@contextmanager
def bulk_loading() -> Iterator[None]:
    """Pause the cyclic garbage collector while millions of records are built.

    Every list and dict the reader makes is kept (nothing is garbage), but the
    collector would scan the ever-growing heap again and again: with it on, reading
    a million events takes several times longer.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
