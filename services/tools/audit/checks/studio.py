"""A studio shoe against its device's reads: nothing was shuffled, so the reads are the record.

A studio table's cards are what its card-reading shoe read (``services.shoe.studio``): no order
was committed to and nothing is revealed. What the stores can prove is checked:

- every read the shoe took is accounted for: a card at the next position (burned or dealt), a
  signal or a button, or a read kept while the shoe was held; a supervisor's correction
  (``CardsAccepted``) places the cards it decided at the next positions, and a void
  (``CoupCleared``) skips the cards read for the voided coup (no draw hands them out);
- the reads were taken in the device's order: each sequence number the next one after the last
  (a read kept while held may come late), and a hold recorded for every gap and every read
  kept while held;
- the cards by position continue from 0 (the shown card), none more often than the decks hold;
  the burn is the shown card's (its value); every card burned or drawn is the card read at its
  position; the closing (``StudioShoeClosed``) lists the cards read and the cards dealt.

Each hold is counted by its reason (``checked["studio_holds:<REASON>"]``). What no record can
prove: that the device read the cards truly (the cards are as the device read them).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from services.shared.rules.shoe import burn_count
from services.tools.audit.checks.context import CheckContext
from services.tools.audit.checks.shoes import card, check_sequence, full_shoe
from services.tools.audit.findings import Code
from services.tools.history.views import Read, ShoeView, Studio, StudioDecision

_SIGNALS = frozenset(
    {"button", "unreadable", "shoe-in", "shoe-out", "cut-card", "burn-start", "burn-end"}
)
"""What a read is when it is not a card (a gap is taken only by holding the shoe)."""


def check_studio_shoe(ctx: CheckContext, shoe: ShoeView) -> None:
    studio = shoe.studio
    assert studio is not None, "a studio shoe"
    where = {"table_id": shoe.table_id, "shoe_id": shoe.shoe_id, "store": "shoe"}
    ctx.checked["shoes"] += 1
    ctx.checked["studio_shoes"] += 1
    ctx.checked["studio_reads"] += len(studio.reads)
    for hold in studio.holds:
        ctx.checked["studio_holds"] += 1
        ctx.checked[f"studio_holds:{hold.reason}"] += 1
    drawn: dict[int, tuple[str, str]] = {}
    ctx.drawn[(shoe.table_id, shoe.shoe_id)] = drawn
    cards = _check_reads(ctx, studio, where)
    _check_holds(ctx, studio, where)
    _check_counts(ctx, shoe, cards, where)
    expected = _check_burn(ctx, shoe, cards, where)
    clears = [d for d in studio.decisions if d.kind == "clear"]  # a voided coup's cards skipped
    for draw in shoe.draws:
        while clears and clears[0].notification_id < draw.notification_id:
            expected = max(expected, clears.pop(0).position)
        after = check_sequence(ctx, draw, expected, where)
        for offset, code in enumerate(draw.cards):
            position = draw.first_position + offset
            read = cards[position] if position < len(cards) else None
            if code != read:
                ctx.error(
                    Code.CARD_NOT_AS_READ,
                    f"drew {code} at position {position}, where the device read "
                    f"{read or 'no card'}",
                    coup_id=draw.coup_id,
                    notification_id=draw.notification_id,
                    **where,
                )
            drawn.setdefault(position, (draw.coup_id, code))
        expected = after
    for clear in clears:
        expected = max(expected, clear.position)
    closed = studio.closed
    if closed is not None and (closed.cards != cards or closed.cards_dealt != expected):
        ctx.error(
            Code.STUDIO_CLOSE_DIFFERS,
            f"the closing lists {len(closed.cards)} cards and {closed.cards_dealt} dealt; the "
            f"device read {len(cards)} and the burn and draws reach position {expected}"
            + ("" if closed.cards == cards else " (its cards are not the cards read)"),
            notification_id=closed.notification_id,
            **where,
        )


def _check_reads(ctx: CheckContext, studio: Studio, where: dict[str, str]) -> list[str]:
    """Every read in the order the shoe took it; the cards read, by position."""
    cards: list[str] = []
    highest = studio.after_seq
    held_since = min((hold.notification_id for hold in studio.holds), default=None)
    causes = {hold.seq for hold in studio.holds}
    corrections = [d for d in studio.decisions if d.kind == "correct"]
    for read in studio.reads:
        while corrections and corrections[0].notification_id < read.notification_id:
            _take_correction(ctx, corrections.pop(0), cards, where)
        at: dict[str, Any] = {"notification_id": read.notification_id, **where}
        if read.held:
            if read.seq not in causes and (held_since is None or read.notification_id < held_since):
                ctx.error(
                    Code.HOLD_NOT_RECORDED,
                    f"read {read.seq} is marked kept while held, but no hold came before it",
                    **at,
                )
        else:
            _check_taken(ctx, read, highest, len(cards), at)
            if read.what == "card" and read.card is not None and read.position is not None:
                cards.append(read.card)
        last = read.seq if read.last_seq is None else read.last_seq
        highest = last if highest is None else max(highest, last)
    for correction in corrections:
        _take_correction(ctx, correction, cards, where)
    return cards


def _take_correction(
    ctx: CheckContext, decided: StudioDecision, cards: list[str], where: dict[str, str]
) -> None:
    """A supervisor's cards of a held coup (``CardsAccepted``): the next positions."""
    if decided.position != len(cards):
        ctx.error(
            Code.READ_POSITIONS_BROKEN,
            f"the cards decided for coup {decided.coup_id} were placed from position "
            f"{decided.position}, the next position was {len(cards)}",
            notification_id=decided.notification_id,
            **where,
        )
    cards.extend(decided.cards)


def _check_taken(
    ctx: CheckContext, read: Read, highest: int | None, position: int, at: dict[str, Any]
) -> None:
    """A read taken (not held): the next in the device's order, and used as what it is."""
    if highest is not None and read.seq <= highest:
        ctx.error(
            Code.READ_SEQUENCE_BROKEN,
            f"read {read.seq} taken after read {highest} (taken twice or out of order)",
            **at,
        )
    elif highest is not None and read.seq > highest + 1:
        ctx.error(
            Code.HOLD_NOT_RECORDED,
            f"the device's reads {highest + 1} to {read.seq - 1} were never taken and the "
            "shoe was not held",
            **at,
        )
    if read.what == "gap":
        ctx.error(
            Code.HOLD_NOT_RECORDED,
            f"the device's reads {read.seq} to {read.last_seq} never arrived and the shoe "
            "was not held",
            **at,
        )
    elif read.what == "card":
        if read.card is None or read.position is None:
            ctx.error(
                Code.READ_NOT_ACCOUNTED,
                f"card {read.card} (read {read.seq}) was neither placed in the shoe nor kept "
                "while held",
                **at,
            )
        elif read.position != position:
            ctx.error(
                Code.READ_POSITIONS_BROKEN,
                f"card {read.card} (read {read.seq}) placed at position {read.position}, the "
                f"next position was {position}",
                **at,
            )
    elif read.what not in _SIGNALS or read.position is not None:
        ctx.error(
            Code.READ_NOT_ACCOUNTED,
            f"read {read.seq} ({read.what}) is neither a card at a position nor a signal",
            **at,
        )


def _check_holds(ctx: CheckContext, studio: Studio, where: dict[str, str]) -> None:
    """Each hold that names the read that caused it kept that read (as held) before it."""
    kept = {read.seq: read.notification_id for read in studio.reads if read.held}
    for hold in studio.holds:
        if hold.seq is None:
            continue  # a hold no read caused
        read_nid = kept.get(hold.seq)
        if read_nid is None or read_nid > hold.notification_id:
            ctx.error(
                Code.HOLD_NOT_RECORDED,
                f"the hold {hold.reason} names read {hold.seq}, which the shoe did not keep "
                "before it",
                notification_id=hold.notification_id,
                **where,
            )


def _check_counts(
    ctx: CheckContext, shoe: ShoeView, cards: list[str], where: dict[str, str]
) -> None:
    """A full shoe's card count; no card read more often than the decks hold it."""
    full = full_shoe(shoe.decks)
    if shoe.card_count != sum(full.values()):
        ctx.error(
            Code.NOT_A_FULL_SHOE,
            f"the studio shoe records {shoe.card_count} cards, {shoe.decks} decks hold "
            f"{sum(full.values())}",
            notification_id=shoe.notification_id,
            **where,
        )
    extra = Counter(cards) - full
    if extra:
        ctx.error(
            Code.CARD_BEYOND_DECKS,
            f"read more cards than {shoe.decks} decks hold: "
            f"{', '.join(f'{code} x{n}' for code, n in sorted(extra.items()))} too many",
            **where,
        )


def _check_burn(ctx: CheckContext, shoe: ShoeView, cards: list[str], where: dict[str, str]) -> int:
    """The burn against the reads and the rules; the position the first draw should start at."""
    if shoe.burn is None:
        if shoe.draws:
            ctx.error(Code.WRONG_BURN, "cards were drawn before the burn", **where)
        return 0
    shown, burned, next_position, nid = shoe.burn
    out = [shown, *burned]
    if out != cards[: len(out)]:
        ctx.error(
            Code.CARD_NOT_AS_READ,
            f"showed {shown} and burned {', '.join(burned) or 'nothing'}; the device read "
            f"{', '.join(cards[: len(out)]) or 'no card'} at positions 0 to {len(out) - 1}",
            notification_id=nid,
            **where,
        )
    count = burn_count(card(shown))
    if len(burned) != count or next_position != 1 + count:
        ctx.error(
            Code.WRONG_BURN,
            f"showed {shown} and burned {len(burned)} cards (next position {next_position}); "
            f"{shown} demands {count} cards",
            notification_id=nid,
            **where,
        )
    return next_position
