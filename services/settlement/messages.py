"""Settlement's stored domain events -> the contract messages the relay publishes.

Each published fact becomes its contracts by field name (see
``services.shared.platform.relay.publishing``). A coup's settlement is one stored event that
becomes one ``BetSettled`` per line and then ``CoupSettled``; a refund likewise
``BetRefunded`` per line and ``CoupRefunded``; one transaction's answers a ``BetAccepted``
or ``BetRejected`` per line. Message ids are derived from the stored event (originator
id, version, line), so a republished message keeps its ``event_id``. A fact about bets
names their operator: its messages say so and go to that operator's bet-events topic
(``contracts.topic_for``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import singledispatch

from contracts import (
    BetAccepted,
    BetCorrected,
    BetRefunded,
    BetRejected,
    BetsClosed,
    BetSettled,
    CoupRefunded,
    CoupSettled,
    CoupSettlementCorrected,
    Message,
)
from services.settlement.domain import BetBook, BetDesk
from services.shared.facts.settlement import AnswerLine, CorrectedLine, RefundLine, SettledLine
from services.shared.platform.relay import (
    Lines,
    line_ids,
    line_shape,
    one,
    publish_lines,
    publish_one,
    shaped,
)


@singledispatch
def to_messages(event: object) -> Sequence[Message]:
    """The contract messages to publish for one stored domain event (often none)."""
    return []


to_messages.register(BetDesk.BetRejected, one(BetRejected))


@to_messages.register(BetBook.BettingClosed)
@shaped(BetsClosed)
def _book_closed(event: BetBook.BettingClosed) -> list[Message]:
    if event.table_id is None or event.coup_id is None or event.currency is None:
        return []  # recorded before BetsClosed existed
    return [publish_one(BetsClosed, event)]


_ACCEPTED = line_shape(
    BetAccepted, AnswerLine, ("table_id", "coup_id", "operator"), extra=("placed_at",)
)


@to_messages.register(BetBook.BetsAnswered)
@to_messages.register(BetDesk.BetsRefused)
@shaped(BetAccepted, BetRejected)
def _bets_answered(event: BetBook.BetsAnswered | BetDesk.BetsRefused) -> Sequence[Message]:
    """A BetAccepted per accepted line (trusted: the bet was validated when it was
    accepted), a BetRejected per refused one (validated: it echoes what was received).
    The desk's refusals (no open book) are lines of the same shape, every one refused."""
    count = len(event.lines)
    ids = line_ids(event, count)
    placed = [*event.placed_at[:count], *[None] * (count - len(event.placed_at))]
    # one datetime per placing time (a batch's bets share theirs: each is read and written once)
    times = {w: (None if w is None else datetime.fromisoformat(w),) for w in dict.fromkeys(placed)}
    extras = [times[when] for when in placed]
    refused = {
        index: publish_one(
            BetRejected,
            event,
            event_id=ids[index],
            **{**line._asdict(), "amount": str(line.amount), "placed_at": extras[index][0]},
        )
        for index, line in enumerate(event.lines)
        if line.reason_code is not None
    }
    common = (event.table_id, event.coup_id, event.operator)
    return Lines(_ACCEPTED, ids, event.timestamp, common, event.lines, extras, refused)


@to_messages.register(BetBook.CoupSettled)
@shaped(BetSettled, CoupSettled)
def _coup_settled(event: BetBook.CoupSettled) -> Sequence[Message]:
    """BetSettled per line (trusted: 10,000 for a busy coup, every value validated when its
    bet was accepted and settled), then CoupSettled."""
    count = len(event.lines)
    ids = line_ids(event, count + 1)
    common = {
        "table_id": event.table_id,
        "coup_id": event.coup_id,
        "currency": event.currency,
        "operator": event.operator,
    }
    total = publish_one(
        CoupSettled,
        event,
        event_id=ids[count],
        bets=count,
        house_result=event.staked - event.paid,
    )
    return publish_lines(
        BetSettled, event, event.lines, SettledLine, common=common, ids=ids, then=[total]
    )


_REFUNDED = line_shape(
    BetRefunded, RefundLine, ("table_id", "coup_id", "currency", "operator"), extra=("refunded",)
)


@to_messages.register(BetBook.CoupRefunded)
@shaped(BetRefunded, CoupRefunded)
def _coup_refunded(event: BetBook.CoupRefunded) -> Sequence[Message]:
    """BetRefunded per line (trusted, as settlements are: up to 10,000 for a voided coup, each
    bettor ends with the stake: ``refunded`` is the line's stake), then CoupRefunded."""
    count = len(event.lines)
    ids = line_ids(event, count + 1)
    common = (event.table_id, event.coup_id, event.currency, event.operator)
    extras = [(line.stake,) for line in event.lines]
    total = publish_one(CoupRefunded, event, event_id=ids[count], bets=count)
    return Lines(_REFUNDED, ids, event.timestamp, common, event.lines, extras, then=[total])


@to_messages.register(BetBook.SettlementCorrected)
@shaped(BetCorrected, CoupSettlementCorrected)
def _settlement_corrected(event: BetBook.SettlementCorrected) -> Sequence[Message]:
    """BetCorrected per line (a bet whose result or payout the correction changed), then
    CoupSettlementCorrected (the bets corrected, their differences, the house's result)."""
    count = len(event.lines)
    ids = line_ids(event, count + 1)
    common = {
        "table_id": event.table_id,
        "coup_id": event.coup_id,
        "correction_id": event.correction_id,
        "currency": event.currency,
        "operator": event.operator,
    }
    total = publish_one(
        CoupSettlementCorrected,
        event,
        event_id=ids[count],
        bets=count,
        house_result=event.staked - event.paid,
    )
    return publish_lines(
        BetCorrected, event, event.lines, CorrectedLine, common=common, ids=ids, then=[total]
    )
