"""Settlement's stored domain events -> the contract messages the relay publishes.

A coup's settlement is one stored event that becomes one ``BetSettled`` per
bet and then ``CoupSettled``; a refund likewise becomes ``BetRefunded`` per bet
and ``CoupRefunded``. Message ids are derived from the stored event (originator
id, version, line), so a republished message keeps its ``event_id``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID, SafeUUID

from contracts import (
    BetAccepted,
    BetRefunded,
    BetRejected,
    BetsClosed,
    BetSettled,
    CoupRefunded,
    CoupSettled,
    Message,
)
from contracts.trusted import trusted
from services.settlement.domain import BetBook, BetDesk
from services.shared.platform import envelope


def _envelope(event: Any) -> dict[str, Any]:
    return {**envelope(event), "table_id": event.table_id}


def _line_ids(event: Any, count: int) -> list[UUID]:
    """``event_id`` of each per-bet message of a coup event (deterministic, cheap).

    The first is the platform's ``envelope(event, 0)`` id; the others flip the low
    bits of it by the line index (the version and variant bits are untouched), which
    is unique per line and costs a fraction of one uuid5 per message.
    """
    base = envelope(event, 0)["event_id"].int
    return [_uuid(base ^ index) for index in range(count)]


_new_uuid = UUID.__new__
_set = object.__setattr__


def _uuid(value: int) -> UUID:
    """``UUID(int=value)`` for a value known to fit 128 bits, without re-checking it
    (a third of the cost, for 10,000 ids per coup)."""
    made = _new_uuid(UUID)
    _set(made, "int", value)
    _set(made, "is_safe", SafeUUID.unknown)
    return made


def _bet_head(
    kind: str,
    event_id: UUID,
    occurred_at: datetime,
    table_id: str,
    bet_id: str,
    coup_id: str,
    bettor_id: str,
) -> dict[str, Any]:
    """The first fields of a per-bet message, in the contract's order (see ``trusted``)."""
    return {
        "type": kind,
        "event_id": event_id,
        "schema_version": 1,
        "occurred_at": occurred_at,
        "causation_id": None,
        "correlation_id": None,
        "table_id": table_id,
        "bet_id": bet_id,
        "coup_id": coup_id,
        "bettor_id": bettor_id,
    }


def _bets_answered(event: BetBook.BetsAnswered) -> list[Message]:
    ids = _line_ids(event, len(event.lines))
    messages: list[Message] = []
    placed_at = event.placed_at
    occurred_at, table_id, coup_id = event.timestamp, event.table_id, event.coup_id
    for index, (bet_id, bettor_id, bet_type, amount, currency, code, message) in enumerate(
        event.lines
    ):
        placed = placed_at[index] if index < len(placed_at) else None
        when = None if placed is None else datetime.fromisoformat(placed)
        if code is None:
            # trusted: the bet was validated when it was accepted (fields in the model's order).
            values = _bet_head(
                "BetAccepted", ids[index], occurred_at, table_id, bet_id, coup_id, bettor_id
            )
            values.update(bet_type=bet_type, amount=amount, currency=currency, placed_at=when)
            messages.append(trusted(BetAccepted, values))
        else:  # a refusal echoes what was received: validated here, it is rare
            messages.append(
                BetRejected(
                    event_id=ids[index],
                    occurred_at=occurred_at,
                    table_id=table_id,
                    bet_id=bet_id,
                    coup_id=coup_id,
                    bettor_id=bettor_id,
                    bet_type=bet_type,
                    currency=currency,
                    placed_at=when,
                    amount=str(amount),
                    reason_code=code,
                    message=message,
                )
            )
    return messages


def _desk_rejected(event: BetDesk.BetRejected) -> list[Message]:
    return [
        BetRejected(
            **_envelope(event),
            bet_id=event.bet_id,
            coup_id=event.coup_id,
            bettor_id=event.bettor_id,
            bet_type=event.bet_type,
            amount=event.amount,
            currency=event.currency,
            reason_code=event.reason_code,
            message=event.message,
            placed_at=event.placed_at,
        )
    ]


def _book_closed(event: BetBook.BettingClosed) -> list[Message]:
    if event.table_id is None or event.coup_id is None or event.currency is None:
        return []  # recorded before BetsClosed existed
    return [
        BetsClosed(
            **envelope(event),
            table_id=event.table_id,
            coup_id=event.coup_id,
            bets=event.bets,
            staked=event.staked,
            currency=event.currency,
        )
    ]


def _coup_settled(event: BetBook.CoupSettled) -> list[Message]:
    count = len(event.lines)
    ids = _line_ids(event, count + 1)
    occurred_at, table_id, coup_id, currency = (
        event.timestamp,
        event.table_id,
        event.coup_id,
        event.currency,
    )
    # trusted: every line was validated when its bet was accepted and settled; building
    # 10,000 messages without validating them again keeps a busy coup fast to publish.
    messages: list[Message] = []
    for index, (bet_id, bettor_id, bet_type, result, stake, payout, returned) in enumerate(
        event.lines
    ):
        values = _bet_head(
            "BetSettled", ids[index], occurred_at, table_id, bet_id, coup_id, bettor_id
        )
        values.update(
            bet_type=bet_type,
            result=result,
            stake=stake,
            payout=payout,
            returned=returned,
            currency=currency,
        )
        messages.append(trusted(BetSettled, values))
    messages.append(
        CoupSettled(
            event_id=ids[count],
            occurred_at=occurred_at,
            table_id=table_id,
            coup_id=coup_id,
            bets=count,
            staked=event.staked,
            paid=event.paid,
            house_result=event.staked - event.paid,
            currency=currency,
        )
    )
    return messages


def _coup_refunded(event: BetBook.CoupRefunded) -> list[Message]:
    count = len(event.lines)
    ids = _line_ids(event, count + 1)
    messages: list[Message] = [
        BetRefunded(
            event_id=ids[index],
            occurred_at=event.timestamp,
            table_id=event.table_id,
            bet_id=bet_id,
            coup_id=event.coup_id,
            bettor_id=bettor_id,
            stake=stake,
            refunded=stake,
            adjustment=adjustment,
            currency=event.currency,
        )
        for index, (bet_id, bettor_id, stake, adjustment) in enumerate(event.lines)
    ]
    messages.append(
        CoupRefunded(
            event_id=ids[count],
            occurred_at=event.timestamp,
            table_id=event.table_id,
            coup_id=event.coup_id,
            bets=count,
            refunded=event.refunded,
            currency=event.currency,
        )
    )
    return messages


_TRANSLATIONS: dict[type[Any], Callable[[Any], list[Message]]] = {
    BetBook.BetsAnswered: _bets_answered,
    BetBook.BettingClosed: _book_closed,
    BetDesk.BetRejected: _desk_rejected,
    BetBook.CoupSettled: _coup_settled,
    BetBook.CoupRefunded: _coup_refunded,
}


def to_messages(event: object) -> list[Message]:
    """The contract messages to publish for one stored domain event (often none)."""
    translate = _TRANSLATIONS.get(type(event))
    return [] if translate is None else translate(event)
