"""Each accepted bet of a book: in time, once, within the table's terms, never also refused.

The reader screened the bets in one pass as it read them (``BookView.late``, ``twice``,
``suspect``); for each suspect bet the rules' ``validate_bet`` says why it should have
been refused.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from services.shared.rules.paytable import BetType
from services.shared.rules.validation import BetLimit, validate_bet
from services.tools.audit.checks.context import CheckContext
from services.tools.audit.findings import Code
from services.tools.history.views import BookView

DUPLICATE_BET_ID = "DUPLICATE_BET_ID"
"""A refusal of a second bet under a used id: it does not contradict the first's acceptance."""

LimitKey = tuple[tuple[str, int, int], ...]


@lru_cache(maxsize=64)
def _limits(items: LimitKey) -> dict[BetType, BetLimit]:
    return {BetType(name): BetLimit(low, high) for name, low, high in items}


@lru_cache(maxsize=65_536)
def _invalid(
    limits: LimitKey, bet_type: str, amount: object, currency: str, table_currency: str
) -> str | None:
    """Why the rules would refuse this bet (opposing bets aside), or None."""
    if not isinstance(amount, int) or isinstance(amount, bool):
        return f"amount {amount!r} is not a whole number of minor units"
    problem = validate_bet(bet_type, amount, _limits(limits), currency, table_currency, ())
    return None if problem is None else problem.message


def _limit_key(limits: dict[str, dict[str, int]]) -> LimitKey:
    return tuple(sorted((k, int(v["minimum"]), int(v["maximum"])) for k, v in limits.items()))


def check_acceptance(ctx: CheckContext, book: BookView, where: dict[str, Any]) -> None:
    for bet_id in book.late:
        ctx.error(
            Code.ACCEPTED_AFTER_CLOSE,
            "accepted although placed after betting closed (or after the coup was decided)",
            store="settlement",
            bet_id=bet_id,
            notification_id=book.accepted[bet_id].notification_id,
            **where,
        )
    for bet_id in book.twice:
        ctx.error(Code.ACCEPTED_TWICE, "accepted twice", store="settlement", bet_id=bet_id, **where)
    for bet_id in book.suspect:
        bettor_id, bet_type, amount, bet_currency, _at, nid, _placed = book.accepted[bet_id]
        problem = _invalid(
            _limit_key(book.limits), bet_type, amount, bet_currency, book.currency
        ) or (
            f"this bettor already bet {book.sides.get(bettor_id)} in this coup "
            "(opposing Player and Banker bets)"
        )
        ctx.error(
            Code.ACCEPTED_INVALID,
            f"accepted, but: {problem}",
            store="settlement",
            bet_id=bet_id,
            notification_id=nid,
            **where,
        )
    for bet_id, rejection in book.rejected.items():
        if rejection.reason_code != DUPLICATE_BET_ID and bet_id in book.accepted:
            ctx.error(
                Code.VIEWS_DISAGREE,
                f"both accepted and rejected ({rejection.reason_code})",
                store="settlement",
                bet_id=bet_id,
                notification_id=rejection.notification_id,
                **where,
            )
