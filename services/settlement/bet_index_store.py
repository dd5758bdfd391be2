"""Rebuilding settlement's bet index from the event store (at start)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.persistence import ApplicationRecorder, Mapper
from eventsourcing.utils import get_topic

from services.settlement.bet_index import BetAnswer, BetIndex, BetRequest
from services.settlement.domain import BetBook, BetDesk
from services.shared.facts.settlement import HOUSE


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
            event: Any = mapper.to_domain_event(notification)
            if notification.topic == answered:
                answers: BetBook.BetsAnswered = event
                for line in answers.lines:
                    request = BetRequest(
                        answers.table_id,
                        answers.coup_id,
                        line.bet_id,
                        line.bettor_id,
                        line.bet_type,
                        str(line.amount),
                        line.currency,
                        operator=answers.operator,
                    )
                    code = line.reason_code
                    index.replay(request, BetAnswer(line.bet_id, code is None, code, line.message))
            elif notification.topic == held_lines:
                holds: BetDesk.BetsHeld = event
                for held_bet in holds.lines:
                    request = BetRequest.held(holds.table_id, held_bet)
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
                    operator=getattr(desk_event, "operator", HOUSE),  # BetHeld: the house's
                )
                if notification.topic == held:
                    answer = BetAnswer(request.bet_id, False, held=True)
                else:
                    answer = BetAnswer(
                        request.bet_id, False, desk_event.reason_code, desk_event.message
                    )
                index.replay(request, answer)
        start = batch[-1].id + 1
