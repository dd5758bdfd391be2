"""The ``audit`` group of ``punto-banco bench``: audit throughput over a generated history."""

from __future__ import annotations

import statistics
from collections.abc import Callable

from services.dev.cli.bench_cmd import BenchGroup, Measurement, register_group


def run_audit(quick: bool, progress: Callable[[str], None]) -> list[Measurement]:
    """Audit throughput over a generated history of >= 1,000,000 stored events."""
    from services.dev.bench import audit as audit_bench

    figures = audit_bench.run(quick, progress)
    seconds = statistics.median(figures.seconds)
    made = (
        f"generated in {figures.generated_in:.0f} s"
        if figures.generated_in is not None
        else "reused"
    )
    history = (
        f"{figures.events:,} stored events ({figures.coups:,} coups, {figures.bets:,} bets; "
        "one table played through the real Applications, 2 bets per settlement event, "
        f"repeated under new table ids, the copies interleaved as concurrent tables, sealed every "
        f"20,000 rows) in {figures.folder} ({made}); one process, streaming"
    )
    return [
        Measurement(
            "Audit throughput",
            figures.events_per_second,
            "events/s",
            audit_bench.TARGET_EVENTS_PER_SECOND,
            True,
            len(figures.seconds),
            note=f"full audit (read SQLite, verify seals, rebuild, recompute, check) of {history}",
        ),
        Measurement(
            "Audit throughput per CPU second",
            figures.events_per_cpu_second,
            "events/s",
            None,
            True,
            len(figures.cpu_seconds),
            note="stored events / CPU time (the work done; the wall-clock rate above also "
            "depends on what else the machine runs)",
        ),
        Measurement(
            "Audit throughput, bets",
            figures.bets_per_second,
            "bets/s",
            None,
            True,
            len(figures.seconds),
            note="accepted bets checked per second in the same runs (acceptance, settlement)",
        ),
        Measurement(
            "Audit peak memory",
            figures.peak_rss_mib,
            "MiB",
            audit_bench.MEMORY_LIMIT_MIB,
            False,
            len(figures.seconds),
            note="peak resident memory (VmRSS) of the audit process while auditing: the "
            "audit streams, holding open coups, books and shoes only (bounded by the tables, "
            "not the history)",
        ),
        Measurement(
            "Full audit time",
            seconds,
            "s",
            None,
            False,
            len(figures.seconds),
            note=f"{len(figures.report.findings)} findings (a generated history audits clean)",
        ),
    ]


register_group(BenchGroup("audit", "Audit (regulatory replay)", run_audit))
