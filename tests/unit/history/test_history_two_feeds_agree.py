"""One read side: a history fed once from the stores and once from Kafka gives the same views.

A history is played in memory through the real Applications (``services.dev.simulation``),
keeping every message the relays published. Its stored rows go through ``StoreFeed`` and its
messages through ``MessageFeed``; after setting aside what Kafka does not carry (a shoe's
order and salt before its reveal, a settlement's outcome, when settlement opened and closed
a book, where each fact was stored, a void's signed decision), the two histories are equal.
This also checks each translation of the relays from the reading side: burns by position, one
CardDrawn per card, one BetSettled per line.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from contracts import PlaceBet
from services.tools.audit.auditor import read_history
from services.tools.audit.memory_stores import ListStore
from services.tools.history.from_messages import MessageFeed
from services.tools.history.views import History
from tests.unit.audit.helpers import Played, play_history


@pytest.fixture(scope="module")
def played() -> Played:
    played = play_history(coups=12, tables=2, seal=False)
    stray = PlaceBet(
        table_id="t1",
        coup_id="no-such-coup",
        bet_id="stray",
        bettor_id="b",
        bet_type="tie",
        amount=100,
        currency="EUR",
    )
    played.system.place_bets([stray])  # refused by the desk: no book to record it
    played.system.pump()
    return played


def normalised(history: History) -> dict[str, Any]:
    """The views as plain data, without what only one feed knows."""

    def plain(value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
            return {type(value).__name__: fields}
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            return {type(value).__name__: {k: plain(v) for k, v in value._asdict().items()}}
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        return value

    out: dict[str, Any] = {}
    for key, shoe in history.shoes.items():
        shoe = dataclasses.replace(shoe, order=None, salt=None, notification_id=0)
        shoe.burn = None if shoe.burn is None else shoe.burn._replace(notification_id=0)
        shoe.draws = [draw._replace(notification_id=0) for draw in shoe.draws]
        shoe.reveal = None if shoe.reveal is None else shoe.reveal._replace(notification_id=0)
        out[f"shoe {key}"] = plain(shoe)
    for key, coup in history.coups.items():
        coup = dataclasses.replace(coup, notification_id=0)
        coup.dealt = [dealt._replace(notification_id=0) for dealt in coup.dealt]
        coup.resolutions = [r._replace(notification_id=0) for r in coup.resolutions]
        coup.voids = [  # the signed decision is kept in the store, not published
            void._replace(notification_id=0, authorization=None, fact_version=1)
            for void in coup.voids
        ]
        out[f"coup {key}"] = plain(coup)
    for key, book in history.books.items():
        book = dataclasses.replace(book, opened_at="", closed_by=None, notification_id=0)
        book.accepted = {k: v._replace(notification_id=0) for k, v in book.accepted.items()}
        book.rejected = {k: v._replace(notification_id=0) for k, v in book.rejected.items()}
        book.settlements = [
            dataclasses.replace(
                s, outcome=None, player_pair=None, banker_pair=None, notification_id=0
            )
            for s in book.settlements
        ]
        book.refunds = [refund._replace(notification_id=0) for refund in book.refunds]
        out[f"book {key}"] = plain(book)
    for key, table in history.tables.items():
        out[f"table {key}"] = plain(table)
    for table_id, rejections in history.desk_rejections.items():
        out[f"desk {table_id}"] = {
            k: plain(v._replace(notification_id=0)) for k, v in rejections.items()
        }
    return out


def test_the_stores_and_the_messages_give_the_same_views(played: Played) -> None:
    rows = played.rows()
    stored, findings, _seals = read_history({n: ListStore(n, r) for n, r in rows.items()})
    assert [f for f in findings if f.code != "not_sealed"] == []
    from_kafka = History()
    feed = MessageFeed(from_kafka)
    for message in played.system.published:
        assert feed.apply(message)
    mine, theirs = normalised(stored), normalised(from_kafka)
    assert sorted(mine) == sorted(theirs)
    for key in mine:
        assert theirs[key] == mine[key], key
    assert stored.shoes and stored.coups and stored.books
    assert stored.desk_rejections == {"t1": {"stray": stored.desk_rejections["t1"]["stray"]}}


def test_every_message_seen_again_changes_nothing(played: Played) -> None:
    history = History()
    feed = MessageFeed(history)
    for message in played.system.published:
        feed.apply(message)
    before = normalised(history)
    assert not any(feed.apply(message) for message in played.system.published)
    assert feed.redeliveries == len(played.system.published)
    assert normalised(history) == before
