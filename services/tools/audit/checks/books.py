"""Each bet book against dealing's view of its coup, and the money it adds to the totals.

The two services must agree on the coup (opened, paytable and currency, resolved or
voided); a resolved coup is settled once, every accepted bet in it; a voided one is
refunded. The acceptance, settlement and refund checks do the per-bet work.
"""

from __future__ import annotations

from typing import Any

from services.shared.rules.paytable import Paytable, UnknownPaytable, get_paytable
from services.tools.audit.checks.acceptance import check_acceptance
from services.tools.audit.checks.context import CheckContext
from services.tools.audit.checks.corrections import check_corrections
from services.tools.audit.checks.refunds import check_refunds
from services.tools.audit.checks.settlements import check_settlement
from services.tools.audit.findings import Code
from services.tools.history.views import BookView, CoupView

DEFAULT_DECKS = 8
"""Decks assumed for a coup whose table's settings are unknown (its theoretical edge)."""


def check_book(ctx: CheckContext, book: BookView, coup: CoupView | None) -> None:
    ctx.checked["books"] += 1
    ctx.checked["bets"] += len(book.accepted)
    where: dict[str, Any] = {"table_id": book.table_id, "coup_id": book.coup_id}
    if coup is not None:
        where["shoe_id"] = coup.shoe_id
    if coup is None:
        ctx.error(
            Code.VIEWS_DISAGREE,
            "settlement has bets on a coup dealing never opened",
            store="settlement",
            **where,
        )
    elif coup.settings is not None and (
        coup.settings.paytable != book.paytable or coup.settings.currency != book.currency
    ):
        ctx.error(
            Code.VIEWS_DISAGREE,
            f"settlement used paytable {book.paytable} / {book.currency}, dealing's table "
            f"had {coup.settings.paytable} / {coup.settings.currency}",
            store="settlement",
            **where,
        )
    try:
        paytable: Paytable | None = get_paytable(book.paytable)
    except UnknownPaytable:
        paytable = None
        ctx.error(Code.WRONG_SETTLEMENT, f"unknown paytable {book.paytable!r}", **where)
    check_acceptance(ctx, book, where)
    voided = coup is not None and bool(coup.voids)
    paid_out = _check_settlements(ctx, book, coup, voided, paytable, where)
    check_refunds(ctx, book, coup, voided, paid_out, where)
    count_totals(ctx, book, coup, voided, paid_out)


def _check_settlements(
    ctx: CheckContext,
    book: BookView,
    coup: CoupView | None,
    voided: bool,
    paytable: Paytable | None,
    where: dict[str, Any],
) -> dict[str, int]:
    """Settled once, when dealing resolved the coup; bet id -> returned."""
    voided_before_result = voided and coup is not None and not coup.voids[0].was_resolved
    resolved = coup is not None and coup.resolved is not None
    paid_out: dict[str, int] = {}
    if len(book.settlements) > 1:
        ctx.error(
            Code.SETTLED_TWICE,
            f"the coup was settled {len(book.settlements)} times",
            store="settlement",
            notification_id=book.settlements[1].notification_id,
            **where,
        )
    if book.settlements:
        if voided_before_result:
            ctx.error(
                Code.VIEWS_DISAGREE,
                "settled although dealing voided the coup before its result",
                store="settlement",
                notification_id=book.settlements[0].notification_id,
                **where,
            )
        elif coup is not None and not resolved:
            ctx.error(
                Code.VIEWS_DISAGREE,
                "settled although dealing never resolved the coup",
                store="settlement",
                notification_id=book.settlements[0].notification_id,
                **where,
            )
        result = ctx.results.get((book.table_id, book.coup_id))
        for settlement in book.settlements:
            paid_out.update(check_settlement(ctx, book, settlement, result, paytable, where))
        if coup is not None and paytable is not None and (coup.corrections or book.corrections):
            paid_out = check_corrections(ctx, book, coup, paytable, paid_out, where)
    elif resolved and not voided_before_result:
        for bet_id in book.accepted:
            ctx.error(
                Code.NEVER_SETTLED,
                "accepted, the coup was resolved, the bet was never settled",
                store="settlement",
                bet_id=bet_id,
                **where,
            )
    return paid_out


def count_totals(
    ctx: CheckContext,
    book: BookView,
    coup: CoupView | None,
    voided: bool,
    paid_out: dict[str, int],
) -> None:
    """A decided coup's money into the totals (staked per bet type: the reader's sums)."""
    if coup is None or (not book.settlements and not voided):
        return  # not decided yet
    decks = coup.settings.decks if coup.settings else DEFAULT_DECKS
    ctx.totals.add_coup(
        table_id=book.table_id,
        shoe_id=coup.shoe_id,
        coup_id=book.coup_id,
        day=coup.opened_at[:10],
        bets=len(book.accepted),
        staked_by_type=book.staked,
        paid=sum(paid_out.values()),
        voided=voided,
        paytable=book.paytable,
        decks=decks,
    )
