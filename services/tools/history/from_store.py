"""Stored rows -> the Projector, straight from the stored JSON (no mapper, no pydantic).

The state of each stored row is the JSON eventsourcing wrote (custom types as
``{"_type_": ..., "_data_": ...}``); each reader builds its fact record
(:func:`services.shared.facts.base.read_fact`: upcast, lines typed, fields by name) and
hands it to the :class:`~services.tools.history.project.Projector` (the two busiest,
BetsAnswered and CoupSettled, read the fields the fact declares straight from the state: a
third of the audit's time is theirs). The readers are keyed by the facts'
``STORED_TOPIC``: no class path is spelled here. A topic no reader knows is
counted and skipped by the caller (internal bookkeeping, :mod:`services.shared.facts.unread`);
a known one that cannot be read raises (KeyError, TypeError, ValueError, IndexError...):
the row was changed, or the format moved on without the reader.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import repeat
from typing import Any, TypeVar, cast

import orjson

from services.shared.facts.base import Fact, fact_fields, read_fact
from services.shared.facts.dealing import (
    BettingClosedFact,
    BettingOpenedFact,
    CardDealtFact,
    CoupCorrectedFact,
    CoupResolvedFact,
    CoupVoidedFact,
    TableClosedFact,
    TableOpenedFact,
    TableReopenedFact,
)
from services.shared.facts.legacy import BookBetAcceptedFact, BookBetRejectedFact
from services.shared.facts.settlement import (
    AnswerLine,
    BetsAnsweredFact,
    BookClosedFact,
    BookOpenedFact,
    CoupRefundedFact,
    CoupSettledFact,
    DeskRefusedFact,
    DeskRejectedFact,
    OperatorClosedFact,
    SettledLine,
    SettlementCorrectedFact,
)
from services.shared.facts.shoe import (
    STUDIO_SHARED_TOPICS,
    CardsAcceptedFact,
    CardsBurnedFact,
    CardsDrawnFact,
    CoupClearedFact,
    DrawRequestedFact,
    ReadTakenFact,
    ShoeHeldFact,
    ShoeRevealedFact,
    ShoeShuffledFact,
    StudioShoeClosedFact,
    StudioShoeOpenedFact,
)
from services.tools.history.books import moment
from services.tools.history.project import Projector
from services.tools.history.views import BookView, History, Rejected, bet_key

Reader = Callable[[bytes, int, dict[str, Any]], None]
"""``reader(originator_id, notification_id, state)``."""

_scan = cast(Any, json.JSONDecoder()).scan_once  # json.loads minus its whitespace steps
_DIGITS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_NUMBER = b"0" * 19
"""19 digits in a row: a number orjson might read as a float (it does so beyond 64 bits)."""


def read_state(state: bytes) -> Any:
    """A stored state's JSON, read as the stdlib's ``scan_once`` reads it (its first value).

    orjson reads it when that gives the very same value: the state starts with ``{``
    (orjson, unlike ``scan_once``, would skip leading whitespace) and has no run of 19
    digits (orjson reads an integer beyond 64 bits as a float: no float for money).
    Anything orjson refuses (trailing bytes, NaN, lone surrogates, ...) is read by the
    stdlib, which accepts or refuses it exactly as before.
    """
    if state[:1] == b"{" and _LONG_NUMBER not in state.translate(_DIGITS):
        try:
            return orjson.loads(state)
        except orjson.JSONDecodeError:
            pass
    return _scan(state.decode(), 0)[0]


def read_json(data: bytes) -> Any:
    """``json.loads(data)``, by orjson where that gives the very same value (see
    :func:`read_state`; both skip whitespace around the value)."""
    if _LONG_NUMBER not in data.translate(_DIGITS):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)


def _at(state: dict[str, Any]) -> str:
    return moment(state["timestamp"])


def _rejected(
    fact: DeskRejectedFact | BookBetRejectedFact | AnswerLine, at: str, nid: int
) -> Rejected:
    return Rejected(
        fact.bettor_id,
        fact.bet_type,
        str(fact.amount),
        str(fact.reason_code),
        fact.message,
        at,
        nid,
    )


_new = tuple.__new__  # a NamedTuple without its Python-level __new__ (as _make does)
F = TypeVar("F", bound=Fact)


def _fields_of(fact: type[F], state: dict[str, Any], fields: tuple[str, ...]) -> F:
    """``read_fact`` for a fact of one version whose lines the caller typed already."""
    made = object.__new__(fact)
    object.__setattr__(made, "__dict__", {name: state[name] for name in fields})
    return made


_SETTLED = fact_fields(CoupSettledFact)
assert "lines" in _SETTLED and CoupSettledFact.class_version == 2, "the CoupSettled reader"
_ANSWERED = ("table_id", "coup_id", "lines", "placed_at", "operator")
assert fact_fields(BetsAnsweredFact) == _ANSWERED, "the BetsAnswered reader reads these fields"
assert BetsAnsweredFact.class_version == 3, "the BetsAnswered reader upcasts versions 1, 2"


class StoreFeed:
    """Stored rows into ``history``; ``readers`` maps a stored topic to its reader."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.project = Projector(history)
        self._answer = self.project.bets_answered  # the busiest call, bound once
        self._books: dict[bytes, BookView] = {}
        self.readers: dict[str, Reader] = {
            ShoeShuffledFact.STORED_TOPIC: self._shuffled,
            CardsBurnedFact.STORED_TOPIC: self._burned,
            CardsDrawnFact.STORED_TOPIC: self._drawn,
            ShoeRevealedFact.STORED_TOPIC: self._revealed,
            StudioShoeOpenedFact.STORED_TOPIC: self._studio_opened,
            ReadTakenFact.STORED_TOPIC: self._read_taken,
            DrawRequestedFact.STORED_TOPIC: self._draw_requested,
            ShoeHeldFact.STORED_TOPIC: self._held,
            StudioShoeClosedFact.STORED_TOPIC: self._studio_closed,
            CoupClearedFact.STORED_TOPIC: self._cleared,
            CardsAcceptedFact.STORED_TOPIC: self._accepted,
            TableOpenedFact.STORED_TOPIC: self._table_opened,
            TableReopenedFact.STORED_TOPIC: self._table_reopened,
            TableClosedFact.STORED_TOPIC: self._table_closed,
            BettingOpenedFact.STORED_TOPIC: self._betting_opened,
            BettingClosedFact.STORED_TOPIC: self._betting_closed,
            CardDealtFact.STORED_TOPIC: self._card_dealt,
            CoupResolvedFact.STORED_TOPIC: self._resolved,
            CoupVoidedFact.STORED_TOPIC: self._voided,
            CoupCorrectedFact.STORED_TOPIC: self._corrected,
            BookOpenedFact.STORED_TOPIC: self._book_opened,
            BookClosedFact.STORED_TOPIC: self._book_closed,
            OperatorClosedFact.STORED_TOPIC: self._operator_closed,
            BetsAnsweredFact.STORED_TOPIC: self._bets_answered,
            CoupSettledFact.STORED_TOPIC: self._coup_settled,
            CoupRefundedFact.STORED_TOPIC: self._coup_refunded,
            SettlementCorrectedFact.STORED_TOPIC: self._settlement_corrected,
            DeskRefusedFact.STORED_TOPIC: self._desk_refused,
            DeskRejectedFact.STORED_TOPIC: self._desk_rejected,
            BookBetAcceptedFact.STORED_TOPIC: self._bet_accepted,  # retired: older stores
            BookBetRejectedFact.STORED_TOPIC: self._bet_rejected,  # retired: older stores
        }
        shared = {CardsBurnedFact: self._burned, CardsDrawnFact: self._drawn}
        for topic, fact in STUDIO_SHARED_TOPICS.items():  # a studio shoe's burn and draws
            self.readers[topic] = shared[fact]

    def close(self) -> None:
        """Drop the readers (bound methods refer back to the feed: no cycle left behind)."""
        self.readers.clear()

    # -- shoe ----------------------------------------------------------------------------
    def _shuffled(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        """A shuffle. Its order and salt are encrypted (version 2: None here, never
        decrypted: the read side has no key) or in plain text (version 1)."""
        fact = read_fact(ShoeShuffledFact, d)
        self.project.shoe_shuffled(
            fact.table_id,
            fact.shoe_id,
            decks=int(fact.decks),
            commitment=str(fact.commitment),
            scheme=str(fact.commitment_scheme),
            cut_card_index=int(fact.cut_card_index),
            card_count=int(fact.card_count),
            order=None if fact.order is None else list(fact.order),
            salt=None if fact.salt is None else str(fact.salt),
            at=_at(d),
            nid=nid,
        )
        self.history.owners[oid] = (fact.table_id, fact.shoe_id, None)

    def _burned(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self.project.cards_burned(read_fact(CardsBurnedFact, d), nid)

    def _drawn(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self.project.cards_drawn(read_fact(CardsDrawnFact, d), nid)

    def _revealed(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self.project.shoe_revealed(read_fact(ShoeRevealedFact, d), _at(d), nid)

    # -- studio shoes --------------------------------------------------------------------
    def _studio_opened(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        fact = read_fact(StudioShoeOpenedFact, d)
        self.project.studio_shoe_opened(fact, _at(d), nid)
        self.history.owners[oid] = (fact.table_id, fact.shoe_id, None)

    def _read_taken(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self.project.read_taken(read_fact(ReadTakenFact, d), nid)

    def _draw_requested(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self.project.draw_requested(read_fact(DrawRequestedFact, d))

    def _held(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self.project.shoe_held(read_fact(ShoeHeldFact, d), nid)

    def _cleared(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self.project.studio_decision(read_fact(CoupClearedFact, d), nid)

    def _accepted(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self.project.studio_decision(read_fact(CardsAcceptedFact, d), nid)

    def _studio_closed(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self.project.studio_shoe_closed(read_fact(StudioShoeClosedFact, d), _at(d), nid)

    # -- dealing -------------------------------------------------------------------------
    def _table_opened(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        fact = read_fact(TableOpenedFact, d)
        self.project.table_opened(fact, _at(d))
        self.history.owners[oid] = (fact.table_id, None, None)

    def _table_reopened(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self.project.table_reopened(read_fact(TableReopenedFact, d))

    def _table_closed(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        fact = read_fact(TableClosedFact, d)
        self.project.table_closed(fact.table_id, str(fact.reason), _at(d))

    def _betting_opened(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        fact = read_fact(BettingOpenedFact, d)
        self.project.betting_opened(fact, _at(d), nid)
        self.history.owners[oid] = (fact.table_id, fact.shoe_id, fact.coup_id)

    def _betting_closed(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        fact = read_fact(BettingClosedFact, d)
        self.project.betting_closed(fact.table_id, fact.coup_id, _at(d))

    def _card_dealt(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self.project.card_dealt(read_fact(CardDealtFact, d), nid)

    def _resolved(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self.project.coup_resolved(read_fact(CoupResolvedFact, d), _at(d), nid)

    def _voided(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        version = d.get("class_version", 1)  # before read_fact upcasts it away
        self.project.coup_voided(read_fact(CoupVoidedFact, d), _at(d), nid, version)

    def _corrected(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        fact = read_fact(CoupCorrectedFact, d)
        self.project.coup_corrected(fact, _at(d), nid, str(fact.authorization))

    # -- settlement ----------------------------------------------------------------------
    def _book_opened(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        fact = read_fact(BookOpenedFact, d)
        self._books[oid] = self.project.book_opened(fact, _at(d), nid)
        self.history.owners[oid] = (fact.table_id, None, fact.coup_id)

    def _book_closed(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        fact = read_fact(BookClosedFact, d)
        closed_by = None if fact.closed_at is None else moment(fact.closed_at)
        self.project.book_closed(self._books[oid], _at(d), closed_by)

    def _operator_closed(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        fact = read_fact(OperatorClosedFact, d)
        self.project.operator_closed(self._books[oid], fact.operator, moment(fact.closed_at))

    def _bets_answered(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        """The busiest fact (one per transaction of bets): its fields are read by the fact's
        declared names (``_ANSWERED``) and its lines go to the Projector as stored, unpacked
        there once, rather than built into records first (a third of the audit's time)."""
        book = self._books[oid]
        version = d.pop("class_version", 1)
        if version == 1:
            BetsAnsweredFact.upcast_v1_v2(d)
        if version < 3:
            BetsAnsweredFact.upcast_v2_v3(d)
        at = d["timestamp"]["_data_"]
        self._answer(book, d["lines"], d["placed_at"], at, nid, d["operator"])

    def _bet_accepted(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        """A retired one-bet event: read as a BetsAnswered of one accepted line."""
        book = self._books[oid]
        fact = read_fact(BookBetAcceptedFact, d)
        line = AnswerLine(
            fact.bet_id, fact.bettor_id, fact.bet_type, fact.amount, fact.currency, None, ""
        )
        self.project.bets_answered(book, [line], None, d["timestamp"]["_data_"], nid)

    def _bet_rejected(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        fact = read_fact(BookBetRejectedFact, d)
        self.project.bet_rejected(self._books[oid], fact.bet_id, _rejected(fact, _at(d), nid))

    def _coup_settled(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        """One per coup, with a line per bet: its fields are read by the fact's declared names
        (``_SETTLED``) and its lines typed in one C-level pass (no Python call per line)."""
        lines = d["lines"]
        d["lines"] = list(map(_new, repeat(SettledLine, len(lines)), lines))
        if d.pop("class_version", 1) == 1:
            CoupSettledFact.upcast_v1_v2(d)
        fact = _fields_of(CoupSettledFact, d, _SETTLED)
        self.project.coup_settled(self._books[oid], fact, _at(d), nid)

    def _coup_refunded(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self.project.coup_refunded(self._books[oid], read_fact(CoupRefundedFact, d), _at(d), nid)

    def _settlement_corrected(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        fact = read_fact(SettlementCorrectedFact, d)
        book, correction_id = self._books[oid], str(fact.correction_id)
        self.project.settlement_corrected(
            book, correction_id, fact.lines, _at(d), nid, fact.operator
        )

    def _desk_refused(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        """A transaction's refusals of one coup id on the desk: the coup's rejected bets when
        its book was read and is settled or voided (a bet too late for it: what the book
        recorded before, and what Kafka's reader sees), else the desk's."""
        fact = read_fact(DeskRefusedFact, d)
        at = _at(d)
        book = self.history.books.get((fact.table_id, fact.coup_id))
        if book is not None and (book.settlements or book.refunds):
            self._answer(book, fact.lines, fact.placed_at, at, nid, fact.operator)
            return
        for line in fact.lines:
            key = bet_key(fact.operator, line.bet_id)
            self.project.desk_rejected(fact.table_id, key, _rejected(line, at, nid))

    def _desk_rejected(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        fact = read_fact(DeskRejectedFact, d)
        key = bet_key(fact.operator, fact.bet_id)
        self.project.desk_rejected(fact.table_id, key, _rejected(fact, _at(d), nid))
