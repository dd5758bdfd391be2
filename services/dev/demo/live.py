"""The live view of `punto-banco up`, and its final summary (rich).

Coups and outcomes (with the recent road), the shoe, bets accepted / rejected by reason /
settled (by bet type: the side bets of the table's paytable too), and the house result against
the theoretical edge: the exact edge of each bet type from :mod:`services.shared.rules.odds` for
the table's paytable, weighted by the stakes actually played.
"""

from __future__ import annotations

import time
from fractions import Fraction
from types import TracebackType

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from services.dev.demo.ledger import Ledger, Severity, Summary
from services.dev.demo.orchestrator import DemoResult, TableDriver

CHECK_INTERVAL = 2.0
"""Seconds between two full checks of the books in the live view."""

LINE_INTERVAL = 5.0
"""Seconds between two progress lines when the output is not a terminal."""

OUTCOME_STYLE = {"P": "bold blue", "B": "bold red", "T": "bold green"}


def money(minor: int | Fraction, currency: str = "") -> str:
    """Minor units as ``1,234.56`` (with the currency when given)."""
    value = Fraction(minor) / 100
    sign = "-" if value < 0 else ""
    cents = round(abs(value) * 100)
    text = f"{sign}{cents // 100:,}.{cents % 100:02d}"
    return f"{text} {currency}".strip()


def percent(value: Fraction | None) -> str:
    return "-" if value is None else f"{float(value) * 100:+.3f} %"


def _road(driver: TableDriver) -> Text:
    road = Text()
    for table in driver.tables.values():
        for outcome in table.outcomes:
            road.append(outcome, OUTCOME_STYLE.get(outcome, ""))
        road.append("  ")
    return road


def _shoe_line(ledger: Ledger) -> str:
    coup = ledger.last_coup
    shoe = ledger.shoes.get(coup.shoe_id) if coup and coup.shoe_id else None
    if shoe is None:
        return "waiting for the first shoe"
    cut = f", cut card at {shoe.cut_card_index}" if shoe.cut_card_index is not None else ""
    return (
        f"{shoe.shoe_id}: {shoe.drawn}/{shoe.card_count} cards out{cut}; "
        f"commitment {shoe.commitment[:12]}...; shoes shuffled {len(ledger.shoes)}, "
        f"closed and verified {sum(1 for s in ledger.shoes.values() if s.closed)}"
    )


def render(
    ledger: Ledger, driver: TableDriver, title: str = "punto-banco up", checks: bool = True
) -> RenderableType:
    summary = ledger.summary(checks=checks)
    currency = driver.config.currency
    elapsed = max(time.monotonic() - driver.started, 1e-9)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", justify="right")
    grid.add_column()
    target = f" of {driver.config.coups} per table" if driver.config.coups else ""
    played = sum(t.coups_resolved for t in driver.tables.values())
    grid.add_row("tables", ", ".join(driver.tables) + f"  ({elapsed:.0f} s)")
    grid.add_row(
        "coups",
        f"{summary.coups_resolved} resolved ({played} with bets{target}), "
        f"{summary.coups_voided} voided, {summary.naturals} naturals",
    )
    grid.add_row("outcomes", _outcomes(summary))
    grid.add_row("road", _road(driver))
    grid.add_row("shoe", _shoe_line(ledger))
    grid.add_row(
        "bets",
        f"{summary.bets_sent} sent ({summary.bets_sent / elapsed:.1f}/s), "
        f"{summary.bets_accepted} accepted, {summary.rejected_total} rejected, "
        f"{summary.bets_settled} settled, {summary.bets_refunded} refunded, "
        f"{len(ledger.unanswered())} awaiting an answer",
    )
    grid.add_row("rejected", _reasons(summary) or "-")
    grid.add_row(
        "settled",
        ", ".join(f"{bet_type} {n}" for bet_type, n in summary.settled_by_type.items()) or "-",
    )
    grid.add_row(
        "money",
        f"staked {money(summary.staked, currency)}, returned {money(summary.returned, currency)}",
    )
    grid.add_row(
        "house",
        f"result {money(summary.house_result, currency)} "
        f"({percent(summary.house_edge_observed)} of stakes); theoretical "
        f"{money(summary.expected_house_result, currency)} "
        f"({percent(summary.house_edge_expected)}, exact edge weighted by the bet mix)",
    )
    health = Text(
        f"{summary.errors} errors, {summary.warnings} warnings, "
        f"{summary.redeliveries} redelivered messages, {len(driver.dead_letters)} dead letters",
        style="bold red" if summary.errors else "green",
    )
    grid.add_row("checks", health)
    return Panel(grid, title=title, border_style="cyan")


def progress_line(ledger: Ledger, driver: TableDriver) -> str:
    summary = ledger.summary(checks=False)
    elapsed = time.monotonic() - driver.started
    return (
        f"[up] {elapsed:5.0f} s  coups {summary.coups_resolved}  bets {summary.bets_sent} sent, "
        f"{summary.bets_accepted} accepted, {summary.rejected_total} rejected, "
        f"{summary.bets_settled} settled  house {money(summary.house_result)} "
        f"{driver.config.currency}"
    )


def _outcomes(summary: Summary) -> str:
    total = sum(summary.outcomes.values())
    if not total:
        return "-"
    return ", ".join(
        f"{name} {summary.outcomes.get(name, 0)} ({summary.outcomes.get(name, 0) / total:.0%})"
        for name in ("PLAYER", "BANKER", "TIE")
    )


def _reasons(summary: Summary) -> str:
    return ", ".join(f"{reason} {count}" for reason, count in sorted(summary.bets_rejected.items()))


class LiveView:
    """A rich Live display refreshed by the orchestrator (a no-op when not on a terminal)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()
        self._live: Live | None = None
        self._last_checks = 0.0
        self._last_line: float | None = None

    def __enter__(self) -> LiveView:
        if self.console.is_terminal:
            self._live = Live(console=self.console, auto_refresh=False, transient=True)
            self._live.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)
            self._live = None

    def __call__(self, ledger: Ledger, driver: TableDriver) -> None:
        if self._live is None:  # not a terminal: a progress line now and then
            now = time.monotonic()
            if self._last_line is None:
                self._last_line = now
            elif now - self._last_line >= LINE_INTERVAL:
                self._last_line = now
                line = progress_line(ledger, driver)
                self.console.print(line, markup=False, highlight=False, soft_wrap=True)
            return
        if self._live is not None:
            now = time.monotonic()
            checks = now - self._last_checks >= CHECK_INTERVAL  # a pass over every bet
            if checks:
                self._last_checks = now
            self._live.update(render(ledger, driver, checks=checks), refresh=True)


def final_report(result: DemoResult, max_problems: int = 20) -> RenderableType:
    """The summary printed when `up` ends: the last view, what went wrong, the verdict."""
    ledger, driver = result.ledger, result.driver
    parts: list[RenderableType] = [render(ledger, driver, title="punto-banco up: summary")]
    problems = ledger.problems(final=True)
    errors = [p for p in problems if p.severity is Severity.ERROR]
    warnings = [p for p in problems if p.severity is Severity.WARNING]
    if warnings:
        parts.append(
            Text(
                f"{len(warnings)} warnings (answers other than the bettor expected, e.g. a late "
                f"bet that beat the close): " + "; ".join(str(p) for p in warnings[:5]),
                style="yellow",
            )
        )
    for problem in errors[:max_problems]:
        parts.append(Text(f"ERROR {problem}", style="bold red"))
    if len(errors) > max_problems:
        parts.append(Text(f"... and {len(errors) - max_problems} more errors", style="bold red"))
    if result.failure:
        parts.append(Text(f"FAILED: {result.failure}", style="bold red"))
    if result.killed:
        parts.append(Text(f"had to SIGKILL: {', '.join(result.killed)}", style="yellow"))
    summary = ledger.summary()
    rate = summary.bets_sent / result.elapsed if result.elapsed else 0.0
    label = "OK" if result.ok else "NOT OK"
    if result.interrupted and not errors and not result.failure:
        label = "STOPPED, books clean"
    verdict = (
        f"{label}: {summary.bets_accepted} accepted bets, "
        f"{summary.bets_settled} settled, {summary.bets_refunded} refunded, {len(errors)} errors "
        f"in {result.elapsed:.1f} s ({rate:.1f} bets/s)"
        + (" (interrupted)" if result.interrupted else "")
    )
    parts.append(Text(verdict, style="bold green" if result.ok else "bold red"))
    return Group(*parts)
