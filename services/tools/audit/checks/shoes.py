"""Each shoe against its commitment: a full shoe, the reveal, the burn, every card by position.

The commitment is recomputed from the revealed order and salt; the burn and every draw are
compared with that order position by position. A shoe not revealed yet keeps its order
and salt encrypted in the store (the audit has no key and decrypts nothing): what can be
checked without the order is (the burn's count from its shown card, draws in sequence, no
card more often than its decks hold), and it is counted in ``checked["shoes_secret"]``; its
cards are held to the order once the shoe is revealed. One that a later shoe replaced
unrevealed is a warning. A shoe recorded before the order was encrypted (plain text) is
checked against its recorded order, as it always was. What each shoe handed out is kept in
the context (``drawn``) for the coups. A studio table's shoe has no commitment: ``studio.py``
checks it against its device's reads instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

from services.shared.rules.cards import Card
from services.shared.rules.shoe import COMMITMENT_SCHEME, burn_count, composition, verify_commitment
from services.tools.audit.checks.context import CheckContext
from services.tools.audit.findings import Code, Severity
from services.tools.history.views import Draw, ShoeView


@lru_cache(maxsize=64)
def card(code: str) -> Card:
    return Card.parse(code)


@lru_cache(maxsize=16)
def full_shoe(decks: int) -> Counter[str]:
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
    if reveal is None and shoe.order is None:  # encrypted, not revealed yet
        _check_secret_shoe(ctx, shoe, where, drawn)
        return
    order = (shoe.order or []) if reveal is None else reveal.order
    try:
        cards = [card(code) for code in order]
    except ValueError as error:
        ctx.error(Code.NOT_A_FULL_SHOE, f"unreadable card in the order: {error}", **where)
        return
    if Counter(order) != full_shoe(shoe.decks):
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
        if shoe.order is not None and reveal.order != shoe.order:  # recorded in plain text
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
        _not_revealed(ctx, shoe, where, "")
    expected = _check_burn(ctx, shoe, order, cards, where)
    for draw in shoe.draws:
        first = draw.first_position
        after = check_sequence(ctx, draw, expected, where)
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
        expected = after
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


def _not_revealed(ctx: CheckContext, shoe: ShoeView, where: dict[str, str], more: str) -> None:
    """A warning when a later shoe of the table was shuffled (this one was left unrevealed)."""
    if ctx.last_shoe.get(shoe.table_id) != shoe.shoe_id:
        ctx.add(
            Severity.WARNING,
            Code.SHOE_NOT_REVEALED,
            f"a later shoe was shuffled but this one was never closed and revealed{more}",
            **where,
        )


def _check_secret_shoe(
    ctx: CheckContext, shoe: ShoeView, where: dict[str, str], drawn: dict[int, tuple[str, str]]
) -> None:
    """A shoe whose order is still encrypted: everything but the cards' positions."""
    ctx.checked["shoes_secret"] += 1
    _not_revealed(ctx, shoe, where, ": its order is encrypted, its cards cannot be checked")
    full = full_shoe(shoe.decks)
    if shoe.card_count != sum(full.values()):
        ctx.error(
            Code.NOT_A_FULL_SHOE,
            f"the shuffle records {shoe.card_count} cards, {shoe.decks} decks hold "
            f"{sum(full.values())}",
            notification_id=shoe.notification_id,
            **where,
        )
    expected = 0
    if shoe.burn is None:
        if shoe.draws:
            ctx.error(Code.WRONG_BURN, "cards were drawn before the burn", **where)
    else:
        shown, burned, next_position, nid = shoe.burn
        try:
            count = min(burn_count(card(shown)), shoe.card_count - 1)
        except ValueError as error:
            ctx.error(Code.NOT_A_FULL_SHOE, f"unreadable shown card: {error}", **where)
            return
        if len(burned) != count or next_position != 1 + count:
            ctx.error(
                Code.WRONG_BURN,
                f"showed {shown} and burned {len(burned)} cards (next position "
                f"{next_position}); {shown} demands {count} cards",
                notification_id=nid,
                **where,
            )
        expected = next_position
    for draw in shoe.draws:
        expected = check_sequence(ctx, draw, expected, where)
        for offset, code in enumerate(draw.cards):
            drawn.setdefault(draw.first_position + offset, (draw.coup_id, code))
    extra = Counter(code for _, code in shoe.handed_out()) - full
    if extra:
        ctx.error(
            Code.NOT_A_FULL_SHOE,
            f"handed out more cards than {shoe.decks} decks hold: "
            f"{', '.join(f'{code} x{n}' for code, n in sorted(extra.items()))} too many",
            **where,
        )


def check_sequence(ctx: CheckContext, draw: Draw, expected: int, where: dict[str, str]) -> int:
    """A draw starts where the previous one ended; the next position after it."""
    first = draw.first_position
    if first < expected:
        ctx.error(
            Code.CARD_DRAWN_TWICE,
            f"positions {first}..{expected - 1} were handed out again (request {draw.request_id})",
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
    return max(expected, first + len(draw.cards))
