"""Each coup against the tableau and its shoe; its recorded result against its cards.

Who gets each card is recomputed with the tableau (``next_side``), each card is looked up
at its position in what the shoe handed out, and totals, natural, outcome and pairs are
recomputed from the cards. The recomputed result is kept in the context (``results``)
for the settlement checks.
"""

from __future__ import annotations

from typing import Any

from services.shared.rules.cards import Card
from services.shared.rules.tableau import CoupResult, NotEnoughCards, Side, next_side, resolve_coup
from services.tools.audit.checks.context import CheckContext
from services.tools.audit.checks.shoes import card
from services.tools.audit.findings import Code
from services.tools.history.views import CoupView, Resolution


def check_coup(ctx: CheckContext, coup: CoupView) -> None:
    ctx.checked["coups"] += 1
    where = {"table_id": coup.table_id, "shoe_id": coup.shoe_id, "coup_id": coup.coup_id}
    sequence = _check_cards(ctx, coup, where)
    result: CoupResult | None = None
    if sequence:
        try:
            result = resolve_coup(sequence)
        except (NotEnoughCards, ValueError):
            result = None
    stored = coup.resolved
    if stored is not None:
        check_result(ctx, stored, result, len(sequence), where)
        if len(coup.resolutions) > 1:
            ctx.error(
                Code.WRONG_RESULT,
                "the coup was resolved twice",
                store="dealing",
                notification_id=coup.resolutions[-1].notification_id,
                **where,
            )
    elif not coup.voids:
        table = ctx.history.tables.get(coup.table_id)
        if table is None or not table.coups or table.coups[-1] != coup.coup_id:
            ctx.error(
                Code.COUP_INCOMPLETE,
                "neither resolved nor voided, and later coups were played",
                store="dealing",
                **where,
            )
    if result is not None and stored is not None:
        ctx.results[(coup.table_id, coup.coup_id)] = result
    for void in coup.voids:
        if not void.supervisor_id.strip():
            ctx.error(
                Code.VOID_WITHOUT_SUPERVISOR,
                "voided without a supervisor",
                store="dealing",
                notification_id=void.notification_id,
                **where,
            )
    if len(coup.voids) > 1:
        ctx.error(
            Code.WRONG_RESULT,
            f"voided {len(coup.voids)} times",
            store="dealing",
            notification_id=coup.voids[1].notification_id,
            **where,
        )
    if coup.settings is None:
        ctx.error(Code.VIEWS_DISAGREE, "a coup of a table never opened", **where)


def _check_cards(ctx: CheckContext, coup: CoupView, where: dict[str, str]) -> list[Card]:
    """Every dealt card against the tableau and the shoe; the cards in the order dealt."""
    drawn = ctx.drawn.get((coup.table_id, coup.shoe_id))
    if drawn is None and ctx.history.shoes:
        ctx.error(
            Code.VIEWS_DISAGREE,
            "dealing dealt from a shoe the shoe service has no record of",
            store="dealing",
            **where,
        )
    player: list[Card] = []
    banker: list[Card] = []
    sequence: list[Card] = []
    sound = True
    for dealt in coup.dealt:
        this = card(dealt.card)
        try:
            due = next_side(player, banker) if sound else None
        except ValueError:  # hands no coup can produce
            due = None
        if sound and (due is None or due.value != dealt.side):
            sound = False
            ctx.error(
                Code.TABLEAU_VIOLATED,
                f"{dealt.card} went to {dealt.side}, the tableau "
                + ("says the coup was complete" if due is None else f"gives it to {due.value}"),
                store="dealing",
                notification_id=dealt.notification_id,
                **where,
            )
        hand = player if dealt.side == Side.PLAYER.value else banker
        hand.append(this)
        sequence.append(this)
        if dealt.index_in_hand != len(hand) and sound:
            ctx.error(
                Code.TABLEAU_VIOLATED,
                f"{dealt.card} recorded as card {dealt.index_in_hand} of the "
                f"{dealt.side} hand, it was card {len(hand)}",
                store="dealing",
                notification_id=dealt.notification_id,
                **where,
            )
        if drawn is not None:
            source = drawn.get(dealt.position)
            if source is None or source[0] != coup.coup_id or source[1] != dealt.card:
                ctx.error(
                    Code.CARD_NOT_FROM_SHOE,
                    f"{dealt.card} at position {dealt.position}: the shoe handed out "
                    + (
                        "no card there"
                        if source is None
                        else f"{source[1]} there for coup {source[0]}"
                    ),
                    store="dealing",
                    notification_id=dealt.notification_id,
                    **where,
                )
    return sequence


def check_result(
    ctx: CheckContext,
    stored: Resolution,
    result: CoupResult | None,
    dealt: int,
    where: dict[str, Any],
) -> None:
    """The result dealing recorded against the result its cards give."""
    nid = stored.notification_id
    fact = stored.fact
    if result is None:
        ctx.error(
            Code.WRONG_RESULT,
            f"resolved with {dealt} cards dealt: not a complete coup",
            store="dealing",
            notification_id=nid,
            **where,
        )
        return
    if result.cards_used != dealt:
        ctx.error(
            Code.TABLEAU_VIOLATED,
            f"{dealt} cards dealt, the tableau uses {result.cards_used}",
            store="dealing",
            notification_id=nid,
            **where,
        )
    truth: dict[str, Any] = {
        "player_cards": [c.code for c in result.player],
        "banker_cards": [c.code for c in result.banker],
        "player_total": result.player_total,
        "banker_total": result.banker_total,
        "outcome": result.outcome.value,
        "natural": result.natural,
        "player_pair": result.player_pair,
        "banker_pair": result.banker_pair,
    }
    wrong = [
        f"{name} {getattr(fact, name)!r} (should be {value!r})"
        for name, value in truth.items()
        if getattr(fact, name) != value
    ]
    if wrong:
        ctx.error(
            Code.WRONG_RESULT,
            "recorded " + "; ".join(wrong),
            store="dealing",
            notification_id=nid,
            **where,
        )
