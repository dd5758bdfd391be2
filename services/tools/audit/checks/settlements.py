"""Each settlement of a book against the rules: the result, every payout, the coup totals.

Every line is recomputed from the accepted bet, what the cards give each bet type (the rules'
``payoff``: its case, e.g. a Dragon Bonus win by 9, and the odds the table's paytable pays on
it) and the paytable's rounding rule. A coup of many bets
takes the fast path first (:func:`settled_as_expected`: one comparison per bet); any
difference sends it through the detailed checks that say what is wrong.
"""

from __future__ import annotations

from typing import Any

from services.shared.rules.paytable import Paytable
from services.shared.rules.settlement import BetResult, Payoff, payoff
from services.shared.rules.tableau import CoupResult
from services.tools.audit.checks.context import CheckContext
from services.tools.audit.findings import Code
from services.tools.history.views import Accepted, BookView, Settlement

Wins = dict[tuple[str, str | None, int], int]
"""(bet type, case, stake) -> winning payout, per paytable."""


def check_settlement(
    ctx: CheckContext,
    book: BookView,
    settlement: Settlement,
    result: CoupResult | None,
    paytable: Paytable | None,
    where: dict[str, Any],
) -> dict[str, int]:
    """bet id -> returned, as the settlement paid it; a finding for each difference."""
    nid = settlement.notification_id
    if result is not None and (
        settlement.outcome != result.outcome.value
        or settlement.player_pair != result.player_pair
        or settlement.banker_pair != result.banker_pair
    ):
        ctx.error(
            Code.VIEWS_DISAGREE,
            f"settled as {settlement.outcome} (pairs P {settlement.player_pair}, "
            f"B {settlement.banker_pair}); the cards give {result.outcome.value} "
            f"(pairs P {result.player_pair}, B {result.banker_pair})",
            store="settlement",
            notification_id=nid,
            **where,
        )
    accepted = book.accepted
    outcomes = (
        None
        if result is None or paytable is None
        else {bet.value: payoff(bet, result, paytable) for bet in paytable.offered}
    )
    wins = ctx.wins.setdefault(book.paytable, {})
    if outcomes is not None and paytable is not None:
        fast = settled_as_expected(settlement, accepted, outcomes, wins, paytable)
        if fast is not None:
            return fast  # every line is exactly what the rules give: nothing to report
    paid: dict[str, int] = {}
    staked_lines = paid_lines = 0
    desk = ctx.history.desk_rejections.get(book.table_id, {})
    for line in settlement.lines:
        bet_id, bettor_id, bet_type, outcome, stake, payout, returned = line
        staked_lines += stake
        paid_lines += returned
        if bet_id in paid:
            ctx.error(
                Code.SETTLED_TWICE,
                "settled twice",
                store="settlement",
                bet_id=bet_id,
                notification_id=nid,
                **where,
            )
            continue
        paid[bet_id] = returned
        bet = accepted.get(bet_id)
        if bet is None:
            rejected = book.rejected.get(bet_id) or desk.get(bet_id)
            ctx.error(
                Code.REJECTED_BET_SETTLED if rejected else Code.SETTLED_NOT_ACCEPTED,
                (
                    f"rejected ({rejected.reason_code}) but settled"
                    if rejected
                    else "settled but never accepted"
                )
                + f": {outcome} {stake} -> {returned}",
                store="settlement",
                bet_id=bet_id,
                notification_id=nid,
                **where,
            )
            continue
        if outcomes is None or paytable is None:
            continue
        truth = _due(bet, outcomes, wins, paytable)
        if (
            outcome != truth[0]
            or stake != bet.amount
            or payout != truth[1]
            or returned != truth[2]
            or bettor_id != bet.bettor_id
            or bet_type != bet.bet_type
        ):
            ctx.error(
                Code.WRONG_SETTLEMENT,
                f"recorded {bet_type} by {bettor_id}: {outcome} stake {stake} payout "
                f"{payout} returned {returned}; the {paytable.name} paytable gives "
                f"{bet.bet_type} by {bet.bettor_id}: {truth[0]} stake "
                f"{bet.amount} payout {truth[1]} returned {truth[2]}",
                store="settlement",
                bet_id=bet_id,
                notification_id=nid,
                **where,
            )
    if staked_lines != settlement.staked or paid_lines != settlement.paid:
        ctx.error(
            Code.WRONG_TOTALS,
            f"coup totals staked {settlement.staked} paid {settlement.paid}, its lines "
            f"add up to staked {staked_lines} paid {paid_lines}",
            store="settlement",
            notification_id=nid,
            **where,
        )
    for bet_id in accepted:
        if bet_id not in paid:
            ctx.error(
                Code.NEVER_SETTLED,
                "accepted but missing from the coup's settlement",
                store="settlement",
                bet_id=bet_id,
                notification_id=nid,
                **where,
            )
    return paid


def _due(
    bet: Accepted, outcomes: dict[str, Payoff], wins: Wins, paytable: Paytable
) -> tuple[str, int, int]:
    """(result, payout, returned) the rules give ``bet``: services.shared.rules.settle_bet,
    made fast for a coup of many bets (each bet type's payoff once per coup, a winning
    payout remembered per case and stake)."""
    amount = bet.amount
    due = outcomes.get(bet.bet_type)
    if due is None:
        return (f"a bet type the {paytable.name} paytable does not offer", 0, 0)
    if due.result is BetResult.WIN:
        key = (bet.bet_type, due.case, amount)
        payout = wins.get(key)
        if payout is None:
            payout = wins[key] = paytable.win_amount(amount, due.odds)
        return ("WIN", payout, amount + payout)
    if due.result is BetResult.PUSH:
        return ("PUSH", 0, amount)
    return ("LOSE", 0, 0)


def settled_as_expected(
    settlement: Settlement,
    accepted: dict[str, Accepted],
    outcomes: dict[str, Payoff],
    wins: Wins,
    paytable: Paytable,
) -> dict[str, int] | None:
    """bet id -> returned when every line is exactly the rules' settlement, else None.

    The services settle bets in the order they were accepted, so a correct settlement
    lines up with the accepted bets one to one: each line is compared with the line the
    rules give (one tuple comparison per bet). Any difference sends the caller through the
    detailed checks that say what is wrong.
    """
    lines = settlement.lines
    if len(lines) != len(accepted):
        return None
    win, push = BetResult.WIN, BetResult.PUSH
    paid: dict[str, int] = {}
    staked = returned_total = 0
    for line, (bet_id, bet) in zip(lines, accepted.items(), strict=True):
        bettor_id, bet_type, amount = bet[0], bet[1], bet[2]
        due = outcomes.get(bet_type)
        if due is None:
            return None
        if due.result is win:
            key = (bet_type, due.case, amount)
            payout = wins.get(key)
            if payout is None:
                payout = wins[key] = paytable.win_amount(amount, due.odds)
            returned = amount + payout
            expected = (bet_id, bettor_id, bet_type, "WIN", amount, payout, returned)
        elif due.result is push:
            returned = amount
            expected = (bet_id, bettor_id, bet_type, "PUSH", amount, 0, amount)
        else:
            returned = 0
            expected = (bet_id, bettor_id, bet_type, "LOSE", amount, 0, 0)
        if line != expected or bet_id in paid:
            return None
        paid[bet_id] = returned
        staked += amount
        returned_total += returned
    if staked != settlement.staked or returned_total != settlement.paid:
        return None
    return paid
