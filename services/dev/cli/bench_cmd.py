"""``punto-banco bench``: measured speed of the system, recorded in BENCHMARKS.md.

Benchmarks come in groups (``rules`` first; later areas add theirs with
:func:`register_group`). Each figure is the median of several runs. With
``--write`` each group's section of BENCHMARKS.md, between the markers
``<!-- bench:GROUP:start -->`` and ``<!-- bench:GROUP:end -->``, is replaced
(or appended), with the machine, the Python version and the command.
"""

from __future__ import annotations

import os
import platform
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress, TaskID
from rich.table import Table

from services.dev.bench.report import Figure
from services.shared.rules import (
    card_counts_of,
    composition,
    exact_odds,
    full_shoe_odds,
    get_paytable,
    resolve_coup,
    shuffle,
)

DEFAULT_FILE = Path("BENCHMARKS.md")
INTRO = """# Benchmarks

Speed of punto-banco, measured with `punto-banco bench` on the machine named in
each section (each figure is the median of several runs). Regenerate a section with
`punto-banco bench --only GROUP --write`; every group owns the part of this file
between its `<!-- bench:GROUP:start -->` and `<!-- bench:GROUP:end -->` markers.
"""


Measurement = Figure
"""One benchmark figure (``services.dev.bench.report.Figure``): ``value`` in ``unit``; ``limit``
is the target, if any."""


@dataclass(frozen=True)
class BenchGroup:
    """A named group of benchmarks: a title and a function ``run(quick, progress)``."""

    name: str
    title: str
    run: Callable[[bool, Callable[[str], None]], list[Measurement]]
    # Optional Markdown written below the group's table (given the command), after a run.
    details: Callable[[str], str] | None = None


GROUPS: dict[str, BenchGroup] = {}


def register_group(group: BenchGroup) -> None:
    """Make a group available to ``bench --only NAME``."""
    GROUPS[group.name] = group


def median_seconds(action: Callable[[], object], runs: int) -> float:
    """Median wall-clock time of ``action`` over ``runs`` runs (time.perf_counter)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _coups_per_second(coups: int, runs: int) -> float:
    shoe = shuffle(composition(8))
    end = len(shoe) - 6

    def play() -> None:
        position = 0
        for _ in range(coups):
            if position > end:
                position = 0
            position += resolve_coup(shoe[position : position + 6]).cards_used

    return coups / median_seconds(play, runs)


def run_rules(quick: bool, progress: Callable[[str], None]) -> list[Measurement]:
    """Rules engine: coups per second, shuffle time, full-shoe and remaining-shoe exact odds."""
    runs = 3 if quick else 9
    paytable = get_paytable("standard")
    results: list[Measurement] = []

    progress("resolving coups")
    coups = 20_000 if quick else 100_000
    rate = _coups_per_second(coups, runs)
    results.append(
        Measurement(
            "Coups resolved per second",
            rate,
            "coups/s",
            None,
            True,
            runs,
            note=f"resolve_coup over {coups:,} coups of a shuffled 8-deck shoe",
        )
    )

    for decks in (6, 8):
        progress(f"shuffling {decks}-deck shoes")
        cards = composition(decks)
        shuffle_runs = runs * 5
        seconds = median_seconds(partial(shuffle, cards), shuffle_runs)
        results.append(
            Measurement(
                f"Shuffle, {decks} decks ({len(cards)} cards)",
                seconds * 1e3,
                "ms",
                runs=shuffle_runs,
                note="Fisher-Yates over secrets.randbelow",
            )
        )

    progress("exact odds of a full 8-deck shoe")
    seconds = median_seconds(lambda: full_shoe_odds(8, paytable), runs)
    results.append(
        Measurement(
            "Exact odds, full shoe, 8 decks",
            seconds * 1e3,
            "ms",
            1000,
            runs=runs,
            note="every bet type (side bets too): exact Fractions by full enumeration",
        )
    )

    progress("exact odds of remaining shoes")
    shoe = shuffle(composition(6))
    depths = range(0, len(shoe) - 16, 15 if quick else 5)
    depth_runs = 1 if quick else 3
    times = []
    for dealt in depths:
        counts = card_counts_of(shoe[dealt:])
        times.append(median_seconds(partial(exact_odds, counts, paytable), depth_runs))
    results.append(
        Measurement(
            "Exact odds, remaining shoe (median)",
            statistics.median(times) * 1e3,
            "ms",
            100,
            runs=len(times),
            note=f"every bet type, from the count of each card left after dealing 0, "
            f"{depths.step}, ... {depths[-1]} cards of a shuffled 6-deck shoe; median of "
            f"{depth_runs} runs at each depth",
        )
    )
    results.append(
        Measurement(
            "Exact odds, remaining shoe (slowest)",
            max(times) * 1e3,
            "ms",
            100,
            runs=len(times),
            note="the slowest of the same depths (noise of a busy machine shows here first)",
        )
    )
    return results


register_group(BenchGroup("rules", "Rules engine", run_rules))


# End to end (services/dev/bench): the running services on real Kafka and real stores.
_E2E_REPORTS: list[object] = []


def run_e2e(quick: bool, progress: Callable[[str], None]) -> list[Measurement]:
    """The three services as processes, the load driver, the ceilings and the memory."""
    from services.dev.bench.e2e import run_group

    figures, report = run_group(quick, progress)
    _E2E_REPORTS[:] = [report]
    return figures


def e2e_details(command: str) -> str:
    """The method, machine, versions, matrix and memory of the last e2e run."""
    from services.dev.bench.e2e import E2EReport, details

    report = _E2E_REPORTS[-1] if _E2E_REPORTS else None
    return details(report, command) if isinstance(report, E2EReport) else ""


register_group(
    BenchGroup("e2e", "End to end (services on Kafka and a store)", run_e2e, e2e_details)
)


def run_flat(quick: bool, progress: Callable[[str], None]) -> list[Measurement]:
    """A batch's time with nothing and with 100,000 late bets / refused commands before it."""
    from services.dev.bench.flat_cost import run

    return run(quick, progress)


register_group(BenchGroup("flat", "Flat batch cost (late bets, refused commands)", run_flat))


def run_gateway(quick: bool, progress: Callable[[str], None]) -> list[Measurement]:
    """Bets through the gateway's HTTP API (wallet on and off) beside the Kafka-direct path."""
    from services.dev.bench.gateway import run_gateway_group

    return run_gateway_group(quick, progress)


register_group(
    BenchGroup(
        "gateway", "The gateway: bets through the HTTP API, and straight to Kafka", run_gateway
    )
)


def machine_description() -> str:
    """CPU model, cores, OS and Python, in one line."""
    model = platform.processor() or platform.machine()
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        text = ""
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    if match:
        model = match.group(1).strip()
    return (
        f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; "
        f"{platform.python_implementation()} {platform.python_version()}"
    )


def load_average() -> str:
    """The 1-minute load average, to judge how busy the machine was ("" if unknown)."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except (AttributeError, OSError):
        return ""


def section_text(group: BenchGroup, results: Sequence[Measurement], command: str) -> str:
    """The Markdown section of one group, markers included."""
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    load = load_average()
    busy = f" (1-minute load average {load} when written)" if load else ""
    lines = [
        f"<!-- bench:{group.name}:start -->",
        f"## {group.title}",
        "",
        f"Measured {day} on {machine_description()}{busy}, with:",
        "",
        "```",
        command,
        "```",
        "",
        "| Benchmark | Result | Target | Runs | Note |",
        "|---|---:|---|---:|---|",
    ]
    for result in results:
        target = f"{result.target()} ({result.verdict})" if result.limit is not None else ""
        lines.append(
            f"| {result.name} | {result.shown()} | {target} | {result.runs} | {result.note} |"
        )
    if group.details is not None:
        lines.append(group.details(command))
    lines.append(f"<!-- bench:{group.name}:end -->")
    return "\n".join(lines) + "\n"


def update_section(path: Path, group_name: str, section: str) -> None:
    """Replace the group's marked section of ``path`` (or append it; create the file)."""
    text = path.read_text(encoding="utf-8") if path.exists() else INTRO
    start, end = f"<!-- bench:{group_name}:start -->", f"<!-- bench:{group_name}:end -->"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end) + r"\n?", re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text, encoding="utf-8")


def _run_with_progress(group: BenchGroup, quick: bool) -> list[Measurement]:
    """Run one group with a progress line on stderr."""
    with Progress(console=Console(stderr=True), transient=True) as bar:
        task: TaskID = bar.add_task(group.title, total=None)

        def step(what: str) -> None:
            bar.update(task, description=f"{group.title}: {what}")

        return group.run(quick, step)


def bench(
    only: Annotated[
        list[str] | None,
        typer.Option("--only", metavar="GROUP", help="Run only this group (repeatable)."),
    ] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Fewer runs, smaller workloads.")] = False,
    write: Annotated[
        bool, typer.Option("--write", help="Update each group's section of BENCHMARKS.md.")
    ] = False,
    file: Annotated[
        Path, typer.Option("--file", help="The benchmarks file to update with --write.")
    ] = DEFAULT_FILE,
) -> None:
    """Measure the speed of the system against real Kafka and both stores (median of several
    runs); --write records it in BENCHMARKS.md."""
    names = only or list(GROUPS)
    unknown = [name for name in names if name not in GROUPS]
    if unknown:
        Console(stderr=True, soft_wrap=True).print(
            f"[bold red]Error:[/] unknown benchmark group {', '.join(unknown)} "
            f"(known: {', '.join(GROUPS)})"
        )
        raise typer.Exit(2)
    console = Console()
    for name in names:
        group = GROUPS[name]
        results = _run_with_progress(group, quick)
        table = Table(title=f"{group.title} ({machine_description()})", title_justify="left")
        for column in ("Benchmark", "Result", "Target", "Runs"):
            table.add_column(column, justify="right" if column in ("Result", "Runs") else "left")
        for result in results:
            colour = {"met": "green", "missed": "red"}.get(result.verdict, "")
            target = result.target()
            if colour:
                target = f"[{colour}]{target} ({result.verdict})[/]"
            table.add_row(result.name, result.shown(), target, str(result.runs))
        console.print(table)
        if write:
            command = f"punto-banco bench --only {name}{' --quick' if quick else ''} --write"
            update_section(file, name, section_text(group, results, command))
            console.print(f"Updated the {name!r} section of {file}.")


def register(app: typer.Typer) -> None:
    """Add the ``bench`` command to the CLI."""
    app.command("bench")(bench)
