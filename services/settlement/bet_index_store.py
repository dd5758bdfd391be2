"""Settlement's bet-id table in its store: read many at once, and filled once for old stores.

:class:`BetIdStore` reads the rows of the bet ids a batch of bets names, in one query
(``side_tables.select_rows``), for the ``BetIndex``.

Settlement keeps each bet id's answer as a row of its table ``bet_ids`` (``bet_ids``),
written with the answer. Stores written before that hold the answers only (``BetsAnswered``
lines, the desk's ``BetRejected``, ``BetsHeld`` / ``BetHeld``): at the first start on such a
store, :func:`index_old_answers` reads them in log order, :data:`PAGE` notifications at a
time, and inserts their rows, about :data:`UNIT` answers per transaction with a tracking
record of how far it got (:data:`PROGRESS`), until it records :data:`DONE`
(``side_tables.fill_from_history``). The same rebuilds the table from the events if it is
ever lost (empty the table, delete the two tracking records).

A fresh store is marked done at its first start (its log is empty). Nothing stored is
changed: the old answers stay as they were, readable and sealed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol
from uuid import UUID

from eventsourcing.persistence import Mapper, Notification, ProcessRecorder, Recorder, Tracking
from eventsourcing.utils import get_topic

from services.settlement.bet_ids import latest
from services.settlement.bet_index import BetAnswer, BetIndex, BetKey, BetRequest, Stored
from services.settlement.domain import BetBook, BetDesk
from services.shared.facts.settlement import HOUSE
from services.shared.platform.store import BET_IDS, UnitOfWork, fill_from_history, select_rows


class Indexing(Protocol):
    """What filling the bet ids uses of settlement's Application (which imports this module)."""

    bet_index: BetIndex
    mapper: Mapper[UUID]

    @property
    def process_recorder(self) -> ProcessRecorder: ...

    def unit_of_work(
        self, tracking: Tracking | None = None
    ) -> AbstractContextManager[UnitOfWork]: ...


DONE = "settlement:bet-id-table-filled"
"""Tracking name: the old answers have their rows (position 1)."""
PROGRESS = "settlement:bet-id-table-filling"
"""Tracking name: the last notification whose answers have their rows."""
PAGE = 100
"""Notifications read at a time."""
UNIT = 5000
"""Answers recorded per transaction (more only when one notification holds more)."""


class BetIdStore:
    """The bet-id table of an Application's store (``bet_index.BetIdStore``)."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder
        self.reads = 0  # queries made (a test counts them)

    def read(self, keys: Sequence[BetKey]) -> dict[BetKey, Stored]:
        self.reads += 1
        return latest(select_rows(self._recorder, BET_IDS, keys))


def index_old_answers(app: Indexing) -> int:
    """Give every answer of an older settlement its bet-id row (once); the notifications
    read (0 when done before)."""
    topics = [_ANSWERED, _REFUSED_LINES, _REFUSED, _HELD, _HELD_LINES]

    def record(page: Sequence[Notification]) -> None:
        answers: list[tuple[BetRequest, BetAnswer]] = []
        for notification in page:  # a notification's answers are never split between units
            answers += _answers(notification, app.mapper.to_domain_event(notification))
            if len(answers) >= UNIT or notification is page[-1]:
                _record(app, answers, notification.id)
                answers = []

    return fill_from_history(app.process_recorder, DONE, PROGRESS, topics, PAGE, record)


def _record(app: Indexing, answers: list[tuple[BetRequest, BetAnswer]], through: int) -> None:
    """Insert the bet ids' rows of ``answers`` (in log order), and that the log is done up to
    notification ``through``, in one transaction."""
    with app.unit_of_work(Tracking(PROGRESS, through)):
        app.bet_index.prefetch((request.operator, request.bet_id) for request, _ in answers)
        for request, answer in answers:
            app.bet_index.replay(request, answer)


_ANSWERED = get_topic(BetBook.BetsAnswered)
_REFUSED_LINES = get_topic(BetDesk.BetsRefused)
_REFUSED = get_topic(BetDesk.BetRejected)
_HELD = get_topic(BetDesk.BetHeld)
_HELD_LINES = get_topic(BetDesk.BetsHeld)


def _answers(notification: Notification, event: Any) -> Iterator[tuple[BetRequest, BetAnswer]]:
    """The (bet, answer) pairs of one stored event, in their order."""
    if notification.topic in (_ANSWERED, _REFUSED_LINES):
        for line in event.lines:
            request = BetRequest(
                event.table_id,
                event.coup_id,
                line.bet_id,
                line.bettor_id,
                line.bet_type,
                str(line.amount),
                line.currency,
                operator=event.operator,
            )
            code = line.reason_code
            yield request, BetAnswer(line.bet_id, code is None, code, line.message)
    elif notification.topic == _HELD_LINES:
        for held_bet in event.lines:
            request = BetRequest.held(event.table_id, held_bet)
            yield request, BetAnswer(request.bet_id, False, held=True)
    else:
        request = BetRequest(
            event.table_id,
            event.coup_id,
            event.bet_id,
            event.bettor_id,
            event.bet_type,
            event.amount,
            event.currency,
            operator=getattr(event, "operator", HOUSE),  # BetHeld: the house's
        )
        if notification.topic == _HELD:
            yield request, BetAnswer(request.bet_id, False, held=True)
        else:
            yield request, BetAnswer(request.bet_id, False, event.reason_code, event.message)
