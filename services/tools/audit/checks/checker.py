"""The checks run in order over a rebuilt history: shoes, then coups, then bet books.

Shoes first (what each handed out by position), coups next (each one's result from its
cards, and, given the supervisors keyring, each void's signed decision), then the books that
are checked against both. ``Checker`` keeps the attributes the auditor reads (``findings``,
``totals``, ``checked``); ``run`` checks a whole History at once, the streaming audit
(``services.tools.audit.window``) calls the same checks one shoe, coup and book at a time.
"""

from __future__ import annotations

from collections import Counter

from services.shared.platform.security import SupervisorKeyring
from services.tools.audit.checks.books import check_book
from services.tools.audit.checks.context import DAMAGE, CheckContext
from services.tools.audit.checks.coups import check_coup
from services.tools.audit.checks.decisions import check_decisions
from services.tools.audit.checks.filters import Filters
from services.tools.audit.checks.shoes import check_shoe
from services.tools.audit.checks.studio import check_studio_shoe
from services.tools.audit.findings import Code, Finding
from services.tools.audit.totals import Totals
from services.tools.history.views import History


class Checker:
    """Run every check; ``findings`` and ``totals`` hold the outcome."""

    def __init__(
        self,
        history: History,
        filters: Filters | None = None,
        supervisors: SupervisorKeyring | None = None,
        require_decisions: bool = False,
    ) -> None:
        """``supervisors``: verify every void's signed decision with this keyring; without
        one, ``require_decisions`` warns once that the voids were not verified."""
        self.context = CheckContext(history, filters or Filters())
        self.supervisors = supervisors
        self.require_decisions = require_decisions

    @property
    def history(self) -> History:
        return self.context.history

    @property
    def filters(self) -> Filters:
        return self.context.filters

    @property
    def findings(self) -> list[Finding]:
        return self.context.findings

    @findings.setter
    def findings(self, value: list[Finding]) -> None:
        self.context.findings = value

    @property
    def totals(self) -> Totals:
        return self.context.totals

    @totals.setter
    def totals(self, value: Totals) -> None:
        self.context.totals = value

    @property
    def checked(self) -> Counter[str]:
        return self.context.checked

    @checked.setter
    def checked(self, value: Counter[str]) -> None:
        self.context.checked = value

    def run(self) -> None:
        """Every check, on the whole history."""
        self.check_dealing()
        self.check_books()
        self.check_missing_books(set(self.history.books))

    def check_dealing(self) -> None:
        """Shoes and coups (what the bet books are then checked against)."""
        ctx = self.context
        history = ctx.history
        for shoe in history.shoes.values():
            ctx.last_shoe[shoe.table_id] = shoe.shoe_id
        for shoe in history.shoes.values():
            if ctx.filters.table_in(shoe.table_id):
                try:
                    check = check_studio_shoe if shoe.studio is not None else check_shoe
                    check(ctx, shoe)
                except DAMAGE as error:
                    ctx.damaged(error, table_id=shoe.table_id, shoe_id=shoe.shoe_id)
        unverified = 0
        for coup in history.coups.values():
            if ctx.coup_selected(coup):
                try:
                    check_coup(ctx, coup)
                    if self.supervisors is not None:
                        check_decisions(ctx, coup, self.supervisors)
                    else:
                        unverified += len(coup.voids) + len(coup.corrections)
                except DAMAGE as error:
                    ctx.damaged(error, table_id=coup.table_id, coup_id=coup.coup_id)
        if unverified and self.require_decisions:
            ctx.warn(
                Code.DECISIONS_NOT_VERIFIED,
                f"{unverified} voids: the supervisors' signed decisions were not verified (no "
                "supervisors keyring): give --supervisors KEYRING (PB_SUPERVISOR_KEYRING)",
                store="dealing",
            )

    def check_books(self) -> None:
        """The bet books in the history."""
        ctx = self.context
        for key, book in ctx.history.books.items():
            dealt = ctx.history.coups.get(key)
            if ctx.filters.table_in(book.table_id) and ctx.filters.time_in(
                dealt.opened_at if dealt is not None else book.opened_at
            ):
                try:
                    check_book(ctx, book, dealt)
                except DAMAGE as error:
                    ctx.damaged(error, table_id=book.table_id, coup_id=book.coup_id)

    def check_missing_books(self, books: set[tuple[str, str]]) -> None:
        """Coups dealing opened that settlement has no book for (``books``: all book keys)."""
        if not books:
            return  # no settlement store read
        ctx = self.context
        for key, coup in ctx.history.coups.items():
            if key not in books and ctx.coup_selected(coup):
                ctx.error(
                    Code.VIEWS_DISAGREE,
                    "dealing opened this coup, settlement has no bets book for it",
                    table_id=coup.table_id,
                    shoe_id=coup.shoe_id,
                    coup_id=coup.coup_id,
                )
