"""A settled coup's corrected results against what their cards give each bet.

Dealing records each correction of a resolved coup's result (``CoupCorrected``, its cards in
dealing order); settlement pays it as one ``BetCorrected`` per bet whose result or payout
changed, relative to what the bet returned until then. The audit replays the corrections in
order from the settlement it checked: for each it settles every accepted bet again on the
result the corrected cards give (the rules engine) and expects exactly the lines that change,
each with its previous and corrected result and payout and its ``difference``. Anything else is
``wrong_correction``; a correction settlement never paid is ``not_corrected``. What each bet
returns after the last correction is what the coup paid (the house's corrected result).
"""

from __future__ import annotations

from typing import Any

from services.shared.facts.settlement import CorrectedLine
from services.shared.rules.cards import Card, CardParseError
from services.shared.rules.paytable import BetType, Paytable
from services.shared.rules.settlement import settle_bet
from services.shared.rules.tableau import CoupResult, NotEnoughCards, resolve_coup
from services.tools.audit.checks.context import CheckContext
from services.tools.audit.findings import Code
from services.tools.history.views import BookView, Correction, CoupView

Settled = dict[str, tuple[str, int, int]]
"""bet id -> (result, payout, returned) as the bet stands."""


def check_corrections(
    ctx: CheckContext,
    book: BookView,
    coup: CoupView,
    paytable: Paytable,
    paid_out: dict[str, int],
    where: dict[str, Any],
) -> dict[str, int]:
    """bet id -> returned after every correction of ``coup`` (``paid_out``: as settled)."""
    settled: Settled = {}
    for settlement in book.settlements[:1]:
        for settled_line in settlement.lines:
            bet_id = settled_line.bet_id
            settled[bet_id] = (settled_line.result, settled_line.payout, settled_line.returned)
    paid = {made.correction_id: made for made in book.corrections}
    for correction in coup.corrections:
        ctx.checked["corrections"] += 1
        result = _result(ctx, correction, where)
        made = paid.pop(correction.correction_id, None)
        if result is None:
            continue
        expected = _expected(book, paytable, result, settled)
        if made is None:
            if expected:
                ctx.error(
                    Code.NOT_CORRECTED,
                    f"dealing corrected the coup's result to {result.outcome.value} "
                    f"(correction {correction.correction_id}); settlement never paid the "
                    f"differences of its {len(expected)} changed bets",
                    store="settlement",
                    **where,
                )
        else:
            _compare(ctx, made.lines, expected, made.notification_id, where)
        for bet_id, line in expected.items():
            returned = settled[bet_id][2] + line.difference
            settled[bet_id] = (line.result, line.payout, returned)
    for extra in paid.values():
        ctx.error(
            Code.VIEWS_DISAGREE,
            f"settlement paid correction {extra.correction_id}, dealing never made it",
            store="settlement",
            notification_id=extra.notification_id,
            **where,
        )
    return {**paid_out, **{bet_id: returned for bet_id, (_, _, returned) in settled.items()}}


def _result(ctx: CheckContext, correction: Correction, where: dict[str, Any]) -> CoupResult | None:
    """What the corrected cards give (None, and a finding, when they make no such coup)."""
    cards = correction.cards
    try:
        result = resolve_coup([Card.parse(card) for card in cards])
        whole = result.cards_used == len(cards)
    except (CardParseError, NotEnoughCards):
        result, whole = None, False
    stated = (correction.outcome, correction.player_total, correction.banker_total)
    if result is None or not whole:
        ctx.error(
            Code.WRONG_CORRECTION,
            f"the corrected cards {' '.join(cards)} are not a whole coup by the tableau",
            store="dealing",
            notification_id=correction.notification_id,
            **where,
        )
        return None
    given = (result.outcome.value, result.player_total, result.banker_total)
    if given != stated:
        ctx.error(
            Code.WRONG_CORRECTION,
            f"the correction states {stated}, its cards give {given}",
            store="dealing",
            notification_id=correction.notification_id,
            **where,
        )
    return result


def _expected(
    book: BookView, paytable: Paytable, result: CoupResult, settled: Settled
) -> dict[str, CorrectedLine]:
    """The lines a correction to ``result`` must pay: every bet whose result or payout
    changes, against how it stands (``settled``)."""
    lines: dict[str, CorrectedLine] = {}
    for bet_id, bet in book.accepted.items():
        before = settled.get(bet_id)
        if before is None:
            continue  # never settled: the settlement checks say so
        now = settle_bet(BetType(bet.bet_type), bet.amount, result, paytable)
        if (now.result.value, now.payout) != before[:2]:
            lines[bet_id] = CorrectedLine(
                bet_id,
                bet.bettor_id,
                bet.bet_type,
                bet.amount,
                before[0],
                before[1],
                now.result.value,
                now.payout,
                now.returned - before[2],
            )
    return lines


def _compare(
    ctx: CheckContext,
    lines: list[CorrectedLine],
    expected: dict[str, CorrectedLine],
    nid: int,
    where: dict[str, Any],
) -> None:
    seen: set[str] = set()
    for line in lines:
        want = expected.get(line.bet_id)
        if line.bet_id in seen or want is None or _amounts(line) != _amounts(want):
            ctx.error(
                Code.WRONG_CORRECTION,
                "corrected twice"
                if line.bet_id in seen
                else "corrected, but the correction does not change this bet"
                if want is None
                else f"corrected {_said(line)}, should be {_said(want)}",
                store="settlement",
                bet_id=line.bet_id,
                notification_id=nid,
                **where,
            )
        seen.add(line.bet_id)
    for bet_id in expected.keys() - seen:
        ctx.error(
            Code.NOT_CORRECTED,
            f"the correction changes this bet ({_said(expected[bet_id])}); it was not corrected",
            store="settlement",
            bet_id=bet_id,
            notification_id=nid,
            **where,
        )


def _amounts(line: CorrectedLine) -> tuple[Any, ...]:
    return (
        line.stake,
        line.previous_result,
        line.previous_payout,
        line.result,
        line.payout,
        line.difference,
    )


def _said(line: CorrectedLine) -> str:
    return (
        f"{line.previous_result} {line.previous_payout} -> {line.result} {line.payout}, "
        f"difference {line.difference:+}"
    )
