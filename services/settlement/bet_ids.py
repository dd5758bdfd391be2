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
thousand bets writes a thousand records, and never keeps them in the aggregate cache. They
are compact (about 250 bytes stored): ``bet`` lists the bet's identity and content, ``answer``
the answer (see :data:`BET_FIELDS`, :data:`ANSWER_FIELDS`); their topics are short and
outlive the class names (``TOPIC``).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event
from eventsourcing.utils import get_topic

from services.settlement.bet_index import Answered, BetAnswer, BetKey, BetRequest, Change
from services.shared.facts.topics import register_stored_topics

BET_FIELDS = ("operator", "bet_id", "table_id", "coup_id", "bettor_id", "bet_type", "amount")
"""What ``bet`` lists, in this order, then the currency."""
ANSWER_FIELDS = ("reason_code", "message", "held")
"""What ``answer`` lists, in this order: reason_code None (and not held) is an acceptance."""


@lru_cache(maxsize=16_384)  # a batch's ids are worked out when read and again when recorded
def bet_id_record_id(operator: str, bet_id: str) -> UUID:
    """The record of an operator's bet id (an operator's name has no NUL: the first NUL
    separates the two, whatever the bet id holds)."""
    return uuid5(NAMESPACE_URL, f"/punto-banco/settlement/bet-ids/{operator}\x00{bet_id}")


class BetIdRecord(Aggregate):
    """The content and the answer of one (operator, bet id)."""

    class Taken(Aggregate.Created):
        """The first answer to the bet id."""

        TOPIC = "settlement:BetIdRecord.Taken"
        bet: list[str]
        answer: list[Any]

    class Answered(Aggregate.Event):
        """A later answer (a held bet judged, or a freed id used again)."""

        TOPIC = "settlement:BetIdRecord.Answered"
        bet: list[str]
        answer: list[Any]

        def apply(self, record: BetIdRecord) -> None:
            record.bet, record.answer = self.bet, self.answer

    class Freed(Aggregate.Event):
        """A held bet refused without using up its id: free again."""

        TOPIC = "settlement:BetIdRecord.Freed"

        def apply(self, record: BetIdRecord) -> None:
            record.answer = None

    @event(Taken)
    def __init__(self, bet: list[str], answer: list[Any]) -> None:
        self.bet = bet
        self.answer: list[Any] | None = answer  # None: free


register_stored_topics(BetIdRecord)
_RECORD_TOPIC = get_topic(BetIdRecord)


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
    r, answer = state.request, state.answer
    fields: dict[str, Any] = {
        "originator_id": record_id,
        "originator_version": version + 1,
        "timestamp": timestamp,
        "bet": [*key, r.table_id, r.coup_id, r.bettor_id, r.bet_type, r.amount, r.currency],
        "answer": [answer.reason_code, answer.message, answer.held],
    }
    if version == 0:
        return BetIdRecord.Taken(originator_topic=_RECORD_TOPIC, **fields)
    return BetIdRecord.Answered(**fields)


def recorded_state(event: Any) -> Answered | None:
    """What a record's latest event says: the answered bet, or None (free)."""
    if isinstance(event, BetIdRecord.Freed):
        return None
    operator, bet_id, table_id, coup_id, bettor_id, bet_type, amount, currency = event.bet
    reason_code, message, held = event.answer
    request = BetRequest(
        table_id, coup_id, bet_id, bettor_id, bet_type, amount, currency, operator=operator
    )
    accepted = reason_code is None and not held
    return Answered(request, BetAnswer(bet_id, accepted, reason_code, message, held=held))


def record_events(changes: Iterable[Change]) -> list[Aggregate.Event]:
    """The events recording a unit of work's changes (``BetIndex.changes``)."""
    events = (record_event(key, state, version) for key, state, version in changes)
    return [found for found in events if found is not None]
