"""Figures and Markdown of the end-to-end benchmark (pure formatting + read-only probes)."""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from services.dev.bench.stats import percentile

KEY_PACKAGES = ("aiokafka", "eventsourcing", "pydantic", "psycopg", "psutil")


@dataclass(frozen=True)
class Figure:
    """One benchmark figure: ``value`` in ``unit``; ``limit`` is the target, if any (every
    group's, as ``services.dev.cli.bench_cmd.Measurement``)."""

    name: str
    value: float
    unit: str
    limit: float | None = None
    higher_is_better: bool = False
    runs: int = 1
    note: str = ""

    @property
    def verdict(self) -> str:
        """ "met", "missed" or "" (no target)."""
        if self.limit is None:
            return ""
        met = self.value >= self.limit if self.higher_is_better else self.value <= self.limit
        return "met" if met else "missed"

    def shown(self) -> str:
        """The value with its unit, for people."""
        digits = 0 if self.value >= 100 else 1 if self.value >= 10 else 2
        return f"{self.value:,.{digits}f} {self.unit}"

    def target(self) -> str:
        """The target, for people ("" if none)."""
        if self.limit is None:
            return ""
        sign = ">=" if self.higher_is_better else "<"
        return f"{sign} {self.limit:,g} {self.unit}"


@dataclass(frozen=True)
class CellRow:
    """One row of the matrix table: a store, T tables, B bets per coup."""

    store: str
    tables: int
    bets: int
    coups: int
    settled: int
    seconds: float
    bets_per_second: float
    closed_p50: float | None
    closed_p99: float | None
    resolved_p50: float | None
    resolved_p99: float | None
    received_p99: float | None


def latency_summary(samples: Sequence[float]) -> tuple[float | None, float | None]:
    """(p50, p99) of latencies in seconds, or (None, None) for no samples."""
    if not samples:
        return None, None
    return percentile(samples, 0.5), percentile(samples, 0.99)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:,.0f}"


def cells_table(rows: Sequence[CellRow]) -> str:
    """The matrix as a Markdown table (latencies in ms)."""
    lines = [
        "| Store | Tables | Bets/coup | Coups/table | Bets settled | Seconds | Bets/s "
        "| Closed->last settled p50 / p99 (ms) | Resolved->last settled p50 / p99 (ms) "
        "| Resolved->last received p99 (ms) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row.store} | {row.tables:,} | {row.bets:,} | {row.coups} | {row.settled:,} "
            f"| {row.seconds:,.1f} | {row.bets_per_second:,.0f} "
            f"| {_ms(row.closed_p50)} / {_ms(row.closed_p99)} "
            f"| {_ms(row.resolved_p50)} / {_ms(row.resolved_p99)} | {_ms(row.received_p99)} |"
        )
    return "\n".join(lines)


def memory_table(peaks: Mapping[str, Mapping[str, int]], load: str) -> str:
    """Peak resident memory per store and service, in MiB."""
    services = sorted({name for per_store in peaks.values() for name in per_store})
    lines = [
        f"Peak resident memory (psutil RSS sampled every 0.2 s) during {load}:",
        "",
        "| Store | " + " | ".join(services) + " |",
        "|---|" + "---:|" * len(services),
    ]
    for store, per_service in peaks.items():
        cells = [f"{per_service.get(name, 0) / 2**20:,.0f} MiB" for name in services]
        lines.append(f"| {store} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return platform.machine()
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else platform.machine()


def memory_total() -> str:
    try:
        import psutil

        return f"{psutil.virtual_memory().total / 2**30:.1f} GiB"
    except Exception:
        return "unknown"


def package_versions(names: Sequence[str] = KEY_PACKAGES) -> str:
    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(found)


def machine_lines(
    kafka_version: str, postgres_version: str | None, load_at_start: str
) -> list[str]:
    """The machine and versions, as Markdown bullet lines."""
    return [
        f"- Machine: {cpu_model()}, {os.cpu_count()} cores, {memory_total()} memory, "
        f"{platform.system()} {platform.release()}.",
        f"- Versions: Python {platform.python_version()}, Kafka {kafka_version}, "
        f"PostgreSQL {postgres_version or 'not used'}; {package_versions()}.",
        f"- Load average (1, 5, 15 min) at start: {load_at_start}. The 2 cores are shared by "
        "Kafka, PostgreSQL, the three services, the driver and any other work on the machine "
        "(other sessions were building and testing at the same time): figures from a loaded "
        "machine are lower bounds of what it can do.",
    ]


def load_averages() -> str:
    try:
        return ", ".join(f"{value:.2f}" for value in os.getloadavg())
    except (AttributeError, OSError):
        return "unknown"
