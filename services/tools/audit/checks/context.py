"""What the checks share while they run, made explicit.

The findings sink (``error``, ``warn``, ``damaged``), the filters, the money totals and
the counts of what was checked; and what the shoe and coup checks learn for the book
checks that follow: the card each shoe handed out at each position, each coup's result
recomputed from its cards, each table's last shoe, and the winning payouts already
computed per paytable (a coup of many bets asks for the same few stakes again and again).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from services.shared.rules.tableau import CoupResult
from services.tools.audit.checks.filters import Filters
from services.tools.audit.findings import Code, Finding, Severity
from services.tools.audit.totals import Totals
from services.tools.history.views import CoupView, History

DAMAGE = (ValueError, TypeError, KeyError, IndexError, AttributeError)
"""What a record too damaged to check raises: a finding, never a crash of the audit."""


@dataclass(eq=False)
class CheckContext:
    """The state of one audit's checks."""

    history: History
    filters: Filters = field(default_factory=Filters)
    findings: list[Finding] = field(default_factory=list)
    totals: Totals = field(default_factory=Totals)
    checked: Counter[str] = field(default_factory=Counter)
    drawn: dict[tuple[str, str], dict[int, tuple[str, str]]] = field(default_factory=dict)
    """(table, shoe) -> position -> (coup id, card), as the shoe handed them out."""
    results: dict[tuple[str, str], CoupResult] = field(default_factory=dict)
    """(table, coup) -> the result the cards give (coups recorded as resolved)."""
    last_shoe: dict[str, str] = field(default_factory=dict)
    """table -> its last shoe (the one still in play may be unrevealed)."""
    wins: dict[str, dict[tuple[str, str | None, int], int]] = field(default_factory=dict)
    """paytable -> (bet type, case, stake) -> winning payout."""

    def add(self, severity: Severity, code: Code, message: str, **where: Any) -> None:
        self.findings.append(Finding(severity, code, message, **where))

    def error(self, code: Code, message: str, **where: Any) -> None:
        self.findings.append(Finding(Severity.ERROR, code, message, **where))

    def warn(self, code: Code, message: str, **where: Any) -> None:
        self.findings.append(Finding(Severity.WARNING, code, message, **where))

    def damaged(self, error: Exception, **where: Any) -> None:
        self.error(
            Code.UNREADABLE_EVENT,
            f"cannot be checked, its records are malformed ({type(error).__name__}: {error})",
            **where,
        )

    def coup_selected(self, coup: CoupView) -> bool:
        return self.filters.table_in(coup.table_id) and self.filters.time_in(coup.opened_at)
