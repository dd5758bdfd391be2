"""Each shoe against its commitment: a full shoe, the reveal, the burn, every card by position.

The commitment is recomputed from the revealed order and salt (or, for a shoe still in
play, the recorded ones); the burn and every draw are compared with the order position
by position. What each shoe handed out is kept in the context (``drawn``) for the coups.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

from services.shared.rules.cards import Card
from services.shared.rules.shoe import COMMITMENT_SCHEME, burn_count, composition, verify_commitment
from services.tools.audit.checks.context import CheckContext
from services.tools.audit.findings import Code, Severity
from services.tools.history.views import ShoeView


@lru_cache(maxsize=64)
def card(code: str) -> Card:
    return Card.parse(code)


@lru_cache(maxsize=16)
def _full_shoe(decks: int) -> Counter[str]:
    return Counter(card.code for card in composition(decks))


def _verify(cards: Iterable[Card], salt: str, commitment: str) -> bool:
    try:
        return verify_commitment(list(cards), bytes.fromhex(salt), commitment)
    except ValueError:
        return False


def check_shoe(ctx: CheckContext, shoe: ShoeView) -> None:
    where = {"table_id": shoe.table_id, "shoe_id": shoe.shoe_id, "store": "shoe"}
    ctx.checked["shoes"] += 1
    drawn: dict[int, tuple[str, str]] = {}
    ctx.drawn[(shoe.table_id, shoe.shoe_id)] = drawn
    if shoe.scheme != COMMITMENT_SCHEME:
        ctx.error(
            Code.COMMITMENT_MISMATCH,
            f"unknown commitment scheme {shoe.scheme!r}",
            notification_id=shoe.notification_id,
            **where,
        )
    reveal = shoe.reveal
    order = (shoe.order or []) if reveal is None else reveal.order
    try:
        cards = [card(code) for code in order]
    except ValueError as error:
        ctx.error(Code.NOT_A_FULL_SHOE, f"unreadable card in the order: {error}", **where)
        return
    if Counter(order) != _full_shoe(shoe.decks):
        ctx.error(
            Code.NOT_A_FULL_SHOE,
            f"the {'revealed' if reveal else 'recorded'} order is not {shoe.decks} full decks",
            **where,
        )
    if reveal is not None:
        if reveal.commitment != shoe.commitment:
            ctx.error(
                Code.COMMITMENT_MISMATCH,
                f"the reveal names commitment {reveal.commitment[:16]}..., the shuffle "
                f"published {shoe.commitment[:16]}...",
                notification_id=reveal.notification_id,
                **where,
            )
        if not _verify(cards, reveal.salt, shoe.commitment):
            ctx.error(
                Code.COMMITMENT_MISMATCH,
                "the revealed order and salt do not give the commitment published at the shuffle",
                notification_id=reveal.notification_id,
                **where,
            )
        if reveal.order != shoe.order:
            ctx.error(
                Code.REVEAL_DIFFERS,
                "the revealed order is not the order the shoe was shuffled to",
                notification_id=reveal.notification_id,
                **where,
            )
    else:
        if not _verify(cards, shoe.salt or "", shoe.commitment):
            ctx.error(
                Code.COMMITMENT_MISMATCH,
                "the recorded order and salt do not give the published commitment",
                notification_id=shoe.notification_id,
                **where,
            )
        if ctx.last_shoe.get(shoe.table_id) != shoe.shoe_id:
            ctx.add(
                Severity.WARNING,
                Code.SHOE_NOT_REVEALED,
                "a later shoe was shuffled but this one was never closed and revealed",
                **where,
            )
    expected = _check_burn(ctx, shoe, order, cards, where)
    for draw in shoe.draws:
        first = draw.first_position
        if first < expected:
            ctx.error(
                Code.CARD_DRAWN_TWICE,
                f"positions {first}..{expected - 1} were handed out again "
                f"(request {draw.request_id})",
                coup_id=draw.coup_id,
                notification_id=draw.notification_id,
                **where,
            )
        elif first > expected:
            ctx.error(
                Code.DRAW_OUT_OF_ORDER,
                f"drew from position {first} while {expected} was next (cards skipped)",
                coup_id=draw.coup_id,
                notification_id=draw.notification_id,
                **where,
            )
        for offset, code in enumerate(draw.cards):
            position = first + offset
            truth = order[position] if position < len(order) else None
            if code != truth:
                ctx.error(
                    Code.WRONG_CARD,
                    f"drew {code} at position {position}, where the order has {truth}",
                    coup_id=draw.coup_id,
                    notification_id=draw.notification_id,
                    **where,
                )
            drawn.setdefault(position, (draw.coup_id, code))
        expected = max(expected, first + len(draw.cards))
    if reveal is not None and reveal.cards_dealt != expected:
        ctx.error(
            Code.REVEAL_DIFFERS,
            f"the reveal says {reveal.cards_dealt} cards were dealt, the draws "
            f"reach position {expected}",
            notification_id=reveal.notification_id,
            **where,
        )


def _check_burn(
    ctx: CheckContext, shoe: ShoeView, order: list[str], cards: list[Card], where: dict[str, str]
) -> int:
    """The burn against the order; the position the first draw should start at."""
    if shoe.burn is None:
        if shoe.draws:
            ctx.error(Code.WRONG_BURN, "cards were drawn before the burn", **where)
        return 0
    shown, burned, next_position, nid = shoe.burn
    count = min(burn_count(cards[0]), len(order) - 1) if order else 0
    if shown != order[0] or burned != order[1 : 1 + count] or next_position != 1 + count:
        ctx.error(
            Code.WRONG_BURN,
            f"showed {shown} and burned {len(burned)} cards (next position "
            f"{next_position}); the order demands {order[0]} and {count} cards "
            f"({', '.join(order[1 : 1 + count])})",
            notification_id=nid,
            **where,
        )
    return next_position
