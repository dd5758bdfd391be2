"""Dealing's stored domain events -> the contract messages the relay publishes.

Internal bookkeeping events (a coup started on the table, the shuffle noted...)
publish nothing. A message's ``event_id`` is derived from the stored event's
originator id and version, so a message republished after a crash has the
same id as the first time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contracts import (
    BetLimitSpec,
    BettingClosed,
    BettingOpened,
    CardDealt,
    CloseBook,
    CloseShoe,
    CommandRejected,
    CoupResolved,
    CoupVoided,
    DrawCards,
    Message,
    OpenBook,
    ShuffleShoe,
    TableClosed,
    TableOpened,
)
from services.dealing.domain import CommandRejections, Coup, Table
from services.shared.platform import envelope


def _envelope(event: Any) -> dict[str, Any]:
    return {**envelope(event), "table_id": event.table_id}


def _table_opened(event: Table.Opened | Table.Reopened) -> Message:
    return TableOpened(
        **_envelope(event),
        decks=event.decks,
        paytable=event.paytable,
        limits={k: BetLimitSpec(**v) for k, v in event.limits.items()},
        currency=event.currency,
        betting_window_ms=event.betting_window_ms,
        cut_card_from_end=event.cut_card_from_end,
    )


def _shuffle_shoe(event: Table.ShoeRequested) -> Message:
    return ShuffleShoe(
        **_envelope(event),
        shoe_id=event.shoe_id,
        decks=event.decks,
        cut_card_from_end=event.cut_card_from_end,
    )


def _close_shoe(event: Table.ShoeFinished) -> Message:
    return CloseShoe(**_envelope(event), shoe_id=event.shoe_id)


def _table_closed(event: Table.Closed) -> Message:
    return TableClosed(**_envelope(event), reason=event.reason)


def _betting_opened(event: Coup.BettingOpened) -> list[Message]:
    """BettingOpened, and OpenBook for the bets' partition (the relay sends bet-commands
    records first: the mark is there before any bettor can read the coup's id)."""
    opened = BettingOpened(
        **envelope(event),
        table_id=event.table_id,
        coup_id=event.coup_id,
        coup_number=event.coup_number,
        shoe_id=event.shoe_id,
        closes_at=event.closes_at,
        last_of_shoe=event.last_of_shoe,
    )
    if event.terms is None:  # recorded before OpenBook existed
        return [opened]
    book = OpenBook(
        **envelope(event, 1),
        table_id=event.table_id,
        coup_id=event.coup_id,
        coup_number=event.coup_number,
        shoe_id=event.shoe_id,
        closes_at=event.closes_at,
        paytable=event.terms["paytable"],
        limits={k: BetLimitSpec(**v) for k, v in event.terms["limits"].items()},
        currency=event.terms["currency"],
    )
    return [opened, book]


def _betting_closed(event: Coup.BettingClosed) -> list[Message]:
    return [
        BettingClosed(**_envelope(event), coup_id=event.coup_id),
        CloseBook(**envelope(event, 1), table_id=event.table_id, coup_id=event.coup_id),
    ]


def _draw_cards(event: Coup.CardsRequested) -> Message:
    return DrawCards(
        **_envelope(event),
        shoe_id=event.shoe_id,
        coup_id=event.coup_id,
        request_id=event.request_id,
        count=event.count,
    )


def _card_dealt(event: Coup.CardDealt) -> Message:
    return CardDealt(
        **_envelope(event),
        coup_id=event.coup_id,
        shoe_id=event.shoe_id,
        side=event.side,
        card=event.card,
        position=event.position,
        card_index_in_hand=event.card_index_in_hand,
    )


def _coup_resolved(event: Coup.Resolved) -> Message:
    return CoupResolved(
        **_envelope(event),
        coup_id=event.coup_id,
        coup_number=event.coup_number,
        shoe_id=event.shoe_id,
        player_cards=list(event.player_cards),
        banker_cards=list(event.banker_cards),
        player_total=event.player_total,
        banker_total=event.banker_total,
        outcome=event.outcome,
        natural=event.natural,
        player_pair=event.player_pair,
        banker_pair=event.banker_pair,
    )


def _coup_voided(event: Coup.Voided) -> Message:
    return CoupVoided(
        **_envelope(event),
        coup_id=event.coup_id,
        supervisor_id=event.supervisor_id,
        reason=event.reason,
        was_resolved=event.was_resolved,
    )


def _command_rejected(event: CommandRejections.CommandRejected) -> Message:
    return CommandRejected(
        **_envelope(event),
        command_id=event.command_id,
        command_type=event.command_type,
        reason_code=event.reason_code,
        message=event.message,
        causation_id=event.command_id,
    )


_TRANSLATIONS: dict[type[Any], Callable[[Any], Message | list[Message]]] = {
    Table.Opened: _table_opened,
    Table.Reopened: _table_opened,
    Table.ShoeRequested: _shuffle_shoe,
    Table.ShoeFinished: _close_shoe,
    Table.Closed: _table_closed,
    Coup.BettingOpened: _betting_opened,
    Coup.BettingClosed: _betting_closed,
    Coup.CardsRequested: _draw_cards,
    Coup.CardDealt: _card_dealt,
    Coup.Resolved: _coup_resolved,
    Coup.Voided: _coup_voided,
    CommandRejections.CommandRejected: _command_rejected,
}


def to_messages(event: object) -> list[Message]:
    """The contract messages to publish for one stored domain event (often none)."""
    translate = _TRANSLATIONS.get(type(event))
    if translate is None:
        return []
    made = translate(event)
    return made if isinstance(made, list) else [made]
