"""Rebuilding settlement's bet index from the event store (at start)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.persistence import ApplicationRecorder, Mapper
from eventsourcing.utils import get_topic

from services.settlement.bet_index import BetAnswer, BetIndex, BetRequest
from services.settlement.domain import BetBook, BetDesk


def load_bet_index(index: BetIndex, recorder: ApplicationRecorder, mapper: Mapper[UUID]) -> None:
    """Fill ``index`` with every answer recorded in the store, in store order."""
    answered = get_topic(BetBook.BetsAnswered)
    refused = get_topic(BetDesk.BetRejected)
    held = get_topic(BetDesk.BetHeld)
    held_lines = get_topic(BetDesk.BetsHeld)
    start = 1
    while True:
        batch = recorder.select_notifications(
            start, 2000, topics=[answered, refused, held, held_lines]
        )
        if not batch:
            return
        for notification in batch:
            event = mapper.to_domain_event(notification)
            if notification.topic == answered:
                for line in event.lines:  # type: ignore[attr-defined]
                    bet_id, bettor_id, bet_type, amount, currency, code, message = line
                    request = BetRequest(
                        event.table_id,  # type: ignore[attr-defined]
                        event.coup_id,  # type: ignore[attr-defined]
                        bet_id,
                        bettor_id,
                        bet_type,
                        str(amount),
                        currency,
                    )
                    answer = BetAnswer(bet_id, code is None, code, message)
                    index.replay(request, answer)
            elif notification.topic == held_lines:
                for line in event.lines:  # type: ignore[attr-defined]
                    request = BetRequest.held(event.table_id, line)  # type: ignore[attr-defined]
                    index.replay(request, BetAnswer(request.bet_id, False, held=True))
            else:
                desk_event: Any = event
                request = BetRequest(
                    desk_event.table_id,
                    desk_event.coup_id,
                    desk_event.bet_id,
                    desk_event.bettor_id,
                    desk_event.bet_type,
                    desk_event.amount,
                    desk_event.currency,
                )
                if notification.topic == held:
                    answer = BetAnswer(request.bet_id, False, held=True)
                else:
                    answer = BetAnswer(
                        request.bet_id, False, desk_event.reason_code, desk_event.message
                    )
                index.replay(request, answer)
        start = batch[-1].id + 1
