"""Partitioned benchmark runs: K processes of each service sharing P partitions.

``PB_BENCH_INSTANCES=1,2`` runs every cell of the e2e matrix once per instance count, the
services partitioned (``PB_PARTITIONED=yes``, ``services/shared/platform/cells/partitioned.py``)
on topics of ``PB_BENCH_PARTITIONS`` partitions (default :data:`DEFAULT_PARTITIONS`, the same
for every count); ``unpartitioned`` in the list adds a run as the default one (for
comparison). Unset, the bench runs the services as always (one process each, unpartitioned).

This module holds what those runs need besides the cluster: the settings' parsing, when the
processes of a service have settled their partitions (read from their logs: the group's
latest assignment of each process, and a serving cell for each partition it owns), where the
tables of a cell land (murmur2 of the table id, Kafka's default partitioner) and the tables of
peak memory per process.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from services.shared.platform.kafka import table_partition

DEFAULT_PARTITIONS = 6
"""Partitions per topic in partitioned runs: 1, 2, 3 and 6 processes get even shares."""

_OWNS = re.compile(r"this process owns partitions (\[[0-9, ]*\]|none)")
_SERVES = re.compile(r"partition (\d+): serving")
_MOVED = re.compile(r"partition (\d+) moved away")


UNPARTITIONED = "unpartitioned"
"""In ``PB_BENCH_INSTANCES``: a run of the services as the default run has them (one process
each, not partitioned, topics of 3 partitions), beside the partitioned ones."""


def parse_instances(text: str) -> tuple[int | None, ...]:
    """``"1,2"`` -> (1, 2): processes per service, one run each; ``unpartitioned`` -> None
    ("" -> (): the default run, not partitioned)."""
    counts: list[int | None] = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        if part == UNPARTITIONED:
            counts.append(None)
            continue
        if not part.isdigit() or int(part) < 1:
            raise ValueError(
                f"PB_BENCH_INSTANCES lists process counts (1 or more) or {UNPARTITIONED!r}, "
                f"not {part!r}"
            )
        counts.append(int(part))
    return tuple(counts)


def parse_partitions(text: str) -> int:
    """``PB_BENCH_PARTITIONS``: partitions per topic of a partitioned run ("" -> the default)."""
    text = text.strip()
    if not text:
        return DEFAULT_PARTITIONS
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"PB_BENCH_PARTITIONS is a number of partitions, not {text!r}")
    return int(text)


def cells_of(log_text: str) -> tuple[frozenset[int] | None, frozenset[int]]:
    """From one process's log: the partitions the group last gave it (None: no assignment
    yet) and those whose cell serves now (started and not moved away since)."""
    owned: frozenset[int] | None = None
    serving: set[int] = set()
    for line in log_text.splitlines():
        if (owns := _OWNS.search(line)) is not None:
            listed = owns.group(1)
            owned = frozenset(
                int(n) for n in listed.strip("[]").split(",") if listed != "none" and n.strip()
            )
        elif (serves := _SERVES.search(line)) is not None:
            serving.add(int(serves.group(1)))
        elif (moved := _MOVED.search(line)) is not None:
            serving.discard(int(moved.group(1)))
    return owned, frozenset(serving)


def partitions_settled(logs: Sequence[str], partitions: int) -> bool:
    """True when the processes of one service (their logs) own every partition exactly once
    and each runs a cell for exactly the partitions it owns (no hand-over under way)."""
    seen: list[int] = []
    for text in logs:
        owned, serving = cells_of(text)
        if owned is None or owned != serving:
            return False
        seen.extend(owned)
    return sorted(seen) == list(range(partitions))


def balanced_tables(tag: str, tables: int, partitions: int) -> list[str]:
    """``tables`` ids ``<tag>.t<n>`` (n counting up, some skipped) spread as evenly as can be
    over the partitions: each partition gets ``tables // partitions`` of them or one more.
    murmur2 alone spreads a few tables unevenly (10 over 6 partitions: often 0 on one and 3
    or 4 on another), which would weigh the processes of a partitioned run unequally; the spare
    tables go to partitions of both halves in turn, so two processes get even shares too."""
    wanted = [tables // partitions] * partitions
    half = (partitions + 1) // 2  # the spare tables alternate halves: 2 processes get even shares
    for partition in sorted(range(partitions), key=lambda p: (p % half, p))[: tables % partitions]:
        wanted[partition] += 1
    chosen: list[str] = []
    number = 0
    while len(chosen) < tables:
        table_id = f"{tag}.t{number}"
        number += 1
        partition = table_partition(table_id, partitions)
        if wanted[partition] > 0:
            wanted[partition] -= 1
            chosen.append(table_id)
    return chosen


def spread(table_ids: Iterable[str], partitions: int) -> list[int]:
    """How many of the tables land on each partition (index = partition number)."""
    counts = [0] * partitions
    for table_id in set(table_ids):
        counts[table_partition(table_id, partitions)] += 1
    return counts


def shares(counts: Sequence[int], processes: int) -> list[int]:
    """Tables per process when ``processes`` share the partitions as a new group deals them
    (ranges in order, the first ``len(counts) % processes`` processes take one partition more:
    as the sticky assignor deals them when two processes join one after the other)."""
    per, extra = divmod(len(counts), processes)
    out, start = [], 0
    for index in range(processes):
        size = per + (1 if index < extra else 0)
        out.append(sum(counts[start : start + size]))
        start += size
    return out


def process_memory_table(runs: Mapping[str, Mapping[str, int]], load: str) -> str:
    """Peak resident memory of each process, per run (``label -> process -> bytes``; a
    service's processes are ``<service>`` or ``<service>-<n>``), in MiB."""
    services: list[str] = []
    for peaks in runs.values():
        for name in peaks:
            service = name.rsplit("-", 1)[0] if name.rsplit("-", 1)[-1].isdigit() else name
            if service not in services:
                services.append(service)
    lines = [
        f"Peak resident memory of each process (psutil RSS sampled every 0.2 s) during {load}:",
        "",
        "| Run | " + " | ".join(services) + " |",
        "|---|" + "---:|" * len(services),
    ]
    for label, peaks in runs.items():
        row = []
        for service in services:
            mine = [
                peak
                for name, peak in sorted(peaks.items())
                if name == service or name.rsplit("-", 1)[0] == service
            ]
            row.append(" + ".join(f"{peak / 2**20:,.0f}" for peak in mine) + " MiB")
        lines.append(f"| {label} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def spread_lines(cells: Iterable[tuple[int, Sequence[str]]], partitions: int) -> list[str]:
    """Markdown bullets: for each cell (process count, its table ids), tables per partition
    and per process."""
    lines = []
    for processes, table_ids in cells:
        counts = spread(table_ids, partitions)
        per_process = shares(counts, processes)
        lines.append(
            f"- {len(set(table_ids))} tables on {partitions} partitions: "
            f"{' / '.join(map(str, counts))} per partition"
            + (
                f"; {' / '.join(map(str, per_process))} per process ({processes} processes)"
                if processes > 1
                else ""
            )
            + "."
        )
    return lines
