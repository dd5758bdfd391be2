"""The BetIdRecord aggregate: one per (operator, bet id), the answer settlement gave it.

Settlement's idempotency of bet ids lives in its event store, not in memory: the first answer
to a bet id is a ``Taken`` event at version 1 of the record whose id is derived from
(operator, bet id) (:func:`bet_id_record_id`), written in the same transaction as the answer
itself (the book's ``BetsAnswered``, the desk's ``BetRejected``). The store's unique
(originator id, version) makes a second writer of the same bet id fail its whole transaction
instead of accepting the bet twice.

Every event holds the whole state (the bet's content and its answer), so the latest event of
a record says all (``bet_index`` reads one row per bet id). Later events exist only for
bets held by earlier versions (see ``desk``): ``Answered`` when a held bet is judged, and
``Freed`` when it is refused NO_SUCH_COUP / NO_SUCH_TABLE (its id may be used again: a later
answer is an ``Answered`` at the next version).

Events are built directly (:func:`record_event`), not by calling the aggregate: a batch of a
thousand bets writes a thousand records, and never keeps them in the aggregate cache.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event
from eventsourcing.utils import get_topic

from services.settlement.bet_index import Answered, BetAnswer, BetKey, BetRequest, Change


def bet_id_record_id(operator: str, bet_id: str) -> UUID:
    """The record of an operator's bet id (NUL cannot occur in either: both are checked)."""
    return uuid5(NAMESPACE_URL, f"/punto-banco/settlement/bet-ids/{operator}\x00{bet_id}")


class BetIdRecord(Aggregate):
    """The content and the answer of one (operator, bet id)."""

    class Taken(Aggregate.Created):
        operator: str
        bet_id: str
        table_id: str
        coup_id: str
        bettor_id: str
        bet_type: str
        amount: str
        currency: str
        accepted: bool
        reason_code: str | None
        message: str
        held: bool

    class Answered(Aggregate.Event):
        """A later answer (a held bet judged, or a freed id used again): the whole state."""

        operator: str
        bet_id: str
        table_id: str
        coup_id: str
        bettor_id: str
        bet_type: str
        amount: str
        currency: str
        accepted: bool
        reason_code: str | None
        message: str
        held: bool

        def apply(self, record: BetIdRecord) -> None:
            record.__dict__.update(_fields(self))
            record.free = False

    class Freed(Aggregate.Event):
        """A held bet refused without using up its id: free again."""

        def apply(self, record: BetIdRecord) -> None:
            record.free = True

    @event(Taken)
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)
        self.free = False


_FIELDS = (
    "operator",
    "bet_id",
    "table_id",
    "coup_id",
    "bettor_id",
    "bet_type",
    "amount",
    "currency",
    "accepted",
    "reason_code",
    "message",
    "held",
)
_RECORD_TOPIC = get_topic(BetIdRecord)


def _fields(event: Any) -> dict[str, Any]:
    return {name: getattr(event, name) for name in _FIELDS}


def record_event(key: BetKey, state: Answered | None, version: int) -> Aggregate.Event | None:
    """The event that makes record ``key`` (now at ``version``, 0: none) say ``state``
    (None: free); None when nothing is to be written."""
    record_id = bet_id_record_id(*key)
    timestamp = BetIdRecord.Event.create_timestamp()
    if state is None:
        if version == 0:
            return None
        return BetIdRecord.Freed(
            originator_id=record_id, originator_version=version + 1, timestamp=timestamp
        )
    request, answer = state.request, state.answer
    fields = {
        "operator": key[0],
        "bet_id": key[1],
        "table_id": request.table_id,
        "coup_id": request.coup_id,
        "bettor_id": request.bettor_id,
        "bet_type": request.bet_type,
        "amount": request.amount,
        "currency": request.currency,
        "accepted": answer.accepted,
        "reason_code": answer.reason_code,
        "message": answer.message,
        "held": answer.held,
    }
    if version == 0:
        return BetIdRecord.Taken(
            originator_id=record_id,
            originator_version=1,
            timestamp=timestamp,
            originator_topic=_RECORD_TOPIC,
            **fields,
        )
    return BetIdRecord.Answered(
        originator_id=record_id, originator_version=version + 1, timestamp=timestamp, **fields
    )


def recorded_state(event: Any) -> Answered | None:
    """What a record's latest event says: the answered bet, or None (free)."""
    if isinstance(event, BetIdRecord.Freed):
        return None
    request = BetRequest(
        event.table_id,
        event.coup_id,
        event.bet_id,
        event.bettor_id,
        event.bet_type,
        event.amount,
        event.currency,
        operator=event.operator,
    )
    answer = BetAnswer(
        event.bet_id, event.accepted, event.reason_code, event.message, held=event.held
    )
    return Answered(request, answer)


def record_events(changes: Iterable[Change]) -> list[Aggregate.Event]:
    """The events recording a unit of work's changes (``BetIndex.changes``)."""
    events = (record_event(key, state, version) for key, state, version in changes)
    return [found for found in events if found is not None]
