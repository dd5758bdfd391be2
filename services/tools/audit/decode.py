"""Stored events -> the auditor's :class:`~services.tools.audit.model.History`.

The state of each stored row is the JSON eventsourcing wrote (custom types as
``{"_type_": ..., "_data_": ...}``); the auditor reads the fields it needs by
name, per topic, without the services' classes. A topic it does not know is
counted and skipped (internal bookkeeping); a known one it cannot read is a
finding (the row was changed, or the format moved on without the auditor).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

import orjson

from services.tools.audit.model import (
    Accepted,
    BookView,
    CoupView,
    Dealt,
    Draw,
    History,
    Refund,
    Rejected,
    Reveal,
    Settlement,
    ShoeView,
    TableSettings,
    TableView,
    Void,
)

Handler = Callable[[bytes, int, dict[str, Any]], None]

OPPOSING = frozenset({"player", "banker"})
"""One bettor may not back both in one coup (services.shared.rules.validation)."""

SHOE = "services.shoe.domain:Shoe."
TABLE = "services.dealing.tables:Table."
COUP = "services.dealing.coups:Coup."
BOOK = "services.settlement.books:BetBook."
DESK = "services.settlement.desk:BetDesk."


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
    stamp = state["timestamp"]
    return str(stamp["_data_"] if isinstance(stamp, dict) else stamp)


def _settings(d: dict[str, Any]) -> TableSettings:
    return TableSettings(int(d["decks"]), str(d["paytable"]), str(d["currency"]), d["limits"])


class Decoder:
    """Fills a :class:`History`; ``handlers`` maps a topic to its reader."""

    def __init__(self, history: History) -> None:
        self.history = history
        self._books: dict[bytes, BookView] = {}
        self.handlers: dict[str, Handler] = {
            SHOE + "Shuffled": self._shuffled,
            SHOE + "CardsBurned": self._burned,
            SHOE + "CardsDrawn": self._drawn,
            SHOE + "Closed": self._revealed,
            TABLE + "Opened": self._table_opened,
            TABLE + "Reopened": self._table_reopened,
            TABLE + "Closed": self._table_closed,
            COUP + "BettingOpened": self._betting_opened,
            COUP + "BettingClosed": self._betting_closed,
            COUP + "CardDealt": self._card_dealt,
            COUP + "Resolved": self._resolved,
            COUP + "Voided": self._voided,
            BOOK + "Opened": self._book_opened,
            BOOK + "BettingClosed": self._book_closed,
            BOOK + "BetsAnswered": self._bets_answered,
            BOOK + "BetAccepted": self._bet_accepted,
            BOOK + "BetRejected": self._bet_rejected,
            BOOK + "CoupSettled": self._coup_settled,
            BOOK + "CoupRefunded": self._coup_refunded,
            DESK + "BetRejected": self._desk_rejected,
        }

    # -- shoe ----------------------------------------------------------------------
    def _shuffled(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        key = (d["table_id"], d["shoe_id"])
        self.history.shoes[key] = ShoeView(
            table_id=key[0],
            shoe_id=key[1],
            decks=int(d["decks"]),
            order=list(d["order"]),
            salt=str(d["salt"]),
            commitment=str(d["commitment"]),
            scheme=str(d["commitment_scheme"]),
            cut_card_index=int(d["cut_card_index"]),
            shuffled_at=_at(d),
            notification_id=nid,
        )
        self.history.owners[oid] = (key[0], key[1], None)

    def _shoe(self, d: dict[str, Any]) -> ShoeView:
        return self.history.shoes[(d["table_id"], d["shoe_id"])]

    def _burned(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self._shoe(d).burn = (d["shown_card"], list(d["burned_cards"]), d["next_position"], nid)

    def _drawn(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self._shoe(d).draws.append(
            Draw(d["coup_id"], d["request_id"], int(d["first_position"]), d["cards"], nid)
        )

    def _revealed(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self._shoe(d).reveal = Reveal(
            list(d["order"]), d["salt"], d["commitment"], int(d["cards_dealt"]), _at(d), nid
        )

    # -- dealing -------------------------------------------------------------------
    def _table_opened(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        table_id = d["table_id"]
        self.history.tables[table_id] = TableView(table_id, _settings(d), _at(d))
        self.history.owners[oid] = (table_id, None, None)

    def _table_reopened(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        table = self.history.tables[d["table_id"]]
        table.settings = _settings(d)
        table.closed_at = None

    def _table_closed(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        table = self.history.tables[d["table_id"]]
        table.closed_at = _at(d)
        table.close_reason = str(d.get("reason", ""))

    def _coup(self, d: dict[str, Any]) -> CoupView:
        return self.history.coups[(d["table_id"], d["coup_id"])]

    def _betting_opened(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        table_id, coup_id = d["table_id"], d["coup_id"]
        table = self.history.tables.get(table_id)
        closes = d["closes_at"]
        self.history.coups[(table_id, coup_id)] = CoupView(
            table_id=table_id,
            coup_id=coup_id,
            coup_number=int(d["coup_number"]),
            shoe_id=d["shoe_id"],
            opened_at=_at(d),
            closes_at=str(closes["_data_"] if isinstance(closes, dict) else closes),
            settings=None if table is None else table.settings,
            notification_id=nid,
        )
        if table is not None:
            table.coups.append(coup_id)
        self.history.owners[oid] = (table_id, d["shoe_id"], coup_id)

    def _betting_closed(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self._coup(d).betting_closed_at = _at(d)

    def _card_dealt(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self._coup(d).dealt.append(
            Dealt(d["side"], d["card"], int(d["position"]), int(d["card_index_in_hand"]), nid)
        )

    def _resolved(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        coup = self._coup(d)
        if coup.resolved is not None:
            coup.resolved["_twice"] = nid
            return
        coup.resolved, coup.resolved_at, coup.resolved_nid = d, _at(d), nid

    def _voided(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self._coup(d).voids.append(
            Void(str(d["supervisor_id"]), str(d["reason"]), bool(d["was_resolved"]), _at(d), nid)
        )

    # -- settlement ----------------------------------------------------------------
    def _book_opened(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        key = (d["table_id"], d["coup_id"])
        closes = d["closes_at"]
        book = BookView(
            table_id=key[0],
            coup_id=key[1],
            paytable=d["paytable"],
            currency=d["currency"],
            limits=d["limits"],
            opened_at=_at(d),
            notification_id=nid,
            closes_at=str(closes["_data_"] if isinstance(closes, dict) else closes),
        )
        book.bounds = {
            name: (int(limit["minimum"]), int(limit["maximum"]))
            for name, limit in book.limits.items()
        }
        self.history.books[key] = book
        self._books[oid] = book
        self.history.owners[oid] = (key[0], None, key[1])

    def book_owner(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        """Only note which table and coup a book belongs to (a parallel audit's share)."""
        self.history.owners[oid] = (d["table_id"], None, d["coup_id"])

    def _book_closed(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        book = self._books[oid]
        book.closed_at = _at(d)
        closed = d.get("closed_at")
        book.closed_by = str(closed["_data_"]) if isinstance(closed, dict) else closed

    def _bets_answered(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        """One transaction's answers: lines [bet_id, bettor, type, amount, currency, code,
        message] (+ placed_at as an 8th item, or a ``placed_at`` list beside the lines).

        An accepted bet is late when the coup was already settled or voided in the book,
        or it was placed at/after the betting deadline or the book's close (the broker's
        append time of dealing's CloseBook mark; before the marks existed, dealing's
        BettingClosed); for stores that do not record when bets were placed, when it was
        accepted after the book noted its close.
        """
        book = self._books[oid]
        at = d["timestamp"]["_data_"]
        decided = bool(book.settlements) or bool(book.refunds)
        closed_at, closed_by, deadline = book.closed_at, book.closed_by, book.closes_at
        coup = self.history.coups.get((book.table_id, book.coup_id))
        if closed_by is None and coup is not None and coup.betting_closed_at is not None:
            closed_by = coup.betting_closed_at
        placed_list = d.get("placed_at")
        accepted = book.accepted
        bounds, sides, staked, table_currency = book.bounds, book.sides, book.staked, book.currency
        new = tuple.__new__  # a NamedTuple without its Python-level __new__ (as _make does)
        for index, line in enumerate(d["lines"]):
            bet_id, bettor_id, bet_type, amount, currency, code, message = line[:7]
            placed = line[7] if len(line) > 7 else placed_list[index] if placed_list else None
            if code is None:
                if (
                    decided
                    or (placed is None and closed_at is not None)
                    or (placed is not None and deadline and placed >= deadline)
                    or (placed is not None and closed_by is not None and placed >= closed_by)
                    or (placed is not None and closed_at is not None and closed_by is None)
                ):
                    book.late.append(bet_id)
                if bet_id in accepted:
                    book.twice.append(bet_id)
                    continue
                accepted[bet_id] = new(
                    Accepted, (bettor_id, bet_type, amount, currency, at, nid, placed)
                )
                # The rules' conditions for accepting it (validation.validate_bet), inline.
                bound = bounds.get(bet_type)
                if type(amount) is not int:
                    book.suspect.append(bet_id)
                    continue
                staked[bet_type] = staked.get(bet_type, 0) + amount
                if (
                    bound is None
                    or currency != table_currency
                    or amount < bound[0]
                    or amount > bound[1]
                    or (bet_type in OPPOSING and sides.setdefault(bettor_id, bet_type) != bet_type)
                ):
                    book.suspect.append(bet_id)
            else:
                book.rejected[bet_id] = Rejected(
                    bettor_id, bet_type, str(amount), code, message, at, nid
                )

    def _bet_accepted(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        """An older store's one-bet event: as a BetsAnswered of one accepted line."""
        line = [d["bet_id"], d["bettor_id"], d["bet_type"], d["amount"], d["currency"], None, ""]
        self._bets_answered(oid, nid, {"timestamp": d["timestamp"], "lines": [line]})

    def _bet_rejected(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self._books[oid].rejected[d["bet_id"]] = _rejected(d, nid)

    def _coup_settled(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self._books[oid].settlements.append(
            Settlement(
                d["outcome"],
                bool(d["player_pair"]),
                bool(d["banker_pair"]),
                d["lines"],
                int(d["staked"]),
                int(d["paid"]),
                _at(d),
                nid,
            )
        )

    def _coup_refunded(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self._books[oid].refunds.append(
            Refund(
                str(d["supervisor_id"]),
                str(d["reason"]),
                d["lines"],
                int(d["refunded"]),
                _at(d),
                nid,
            )
        )

    def _desk_rejected(self, oid: bytes, nid: int, d: dict[str, Any]) -> None:
        self.history.desk_rejections.setdefault(d["table_id"], {})[d["bet_id"]] = _rejected(d, nid)


def _rejected(d: dict[str, Any], nid: int) -> Rejected:
    return Rejected(
        d["bettor_id"],
        d["bet_type"],
        str(d["amount"]),
        d["reason_code"],
        d["message"],
        _at(d),
        nid,
    )
