"""The refund of a voided coup: once, naming the void, every accepted bet back exactly.

Each refunded bet must give back its stake, and its adjustment must undo what its
settlement paid (``paid_out``), if the coup had been settled before the void.
"""

from __future__ import annotations

from typing import Any

from services.tools.audit.checks.context import CheckContext
from services.tools.audit.findings import Code
from services.tools.history.views import BookView, CoupView


def check_refunds(
    ctx: CheckContext,
    book: BookView,
    coup: CoupView | None,
    voided: bool,
    paid_out: dict[str, int],
    where: dict[str, Any],
) -> None:
    if not book.refunds:
        if voided:
            assert coup is not None
            ctx.error(
                Code.NOT_REFUNDED,
                f"dealing voided the coup ({coup.voids[0].supervisor_id}: "
                f"{coup.voids[0].reason}); settlement never refunded its "
                f"{len(book.accepted)} bets",
                store="settlement",
                **where,
            )
        return
    refund = book.refunds[0]
    if not voided:
        ctx.error(
            Code.VIEWS_DISAGREE,
            "settlement refunded the coup, dealing never voided it",
            store="settlement",
            notification_id=refund.notification_id,
            **where,
        )
    elif coup is not None and (
        refund.supervisor_id != coup.voids[0].supervisor_id or refund.reason != coup.voids[0].reason
    ):
        ctx.error(
            Code.VIEWS_DISAGREE,
            f"refund names {refund.supervisor_id!r} ({refund.reason!r}), the void "
            f"{coup.voids[0].supervisor_id!r} ({coup.voids[0].reason!r})",
            store="settlement",
            notification_id=refund.notification_id,
            **where,
        )
    if len(book.refunds) > 1:
        ctx.error(
            Code.WRONG_REFUND,
            f"refunded {len(book.refunds)} times",
            store="settlement",
            notification_id=book.refunds[1].notification_id,
            **where,
        )
    seen: set[str] = set()
    total = 0
    for bet_id, _bettor, stake, adjustment in refund.lines:
        total += stake
        bet = book.accepted.get(bet_id)
        expected = None if bet is None else (bet.amount, bet.amount - paid_out.get(bet_id, 0))
        if bet_id in seen or expected is None or (stake, adjustment) != expected:
            ctx.error(
                Code.WRONG_REFUND,
                "refunded twice"
                if bet_id in seen
                else "refunded but never accepted"
                if expected is None
                else f"refunded stake {stake} adjustment {adjustment}, should be "
                f"stake {expected[0]} adjustment {expected[1]}",
                store="settlement",
                bet_id=bet_id,
                notification_id=refund.notification_id,
                **where,
            )
        seen.add(bet_id)
    for bet_id in book.accepted:
        if bet_id not in seen:
            ctx.error(
                Code.NOT_REFUNDED,
                "the coup was voided, this bet was not refunded",
                store="settlement",
                bet_id=bet_id,
                notification_id=refund.notification_id,
                **where,
            )
    if total != refund.refunded:
        ctx.error(
            Code.WRONG_TOTALS,
            f"refund total {refund.refunded}, its lines add up to {total}",
            store="settlement",
            notification_id=refund.notification_id,
            **where,
        )
