"""Operators (B2B): a bet's operator is the topic it came by, its id is unique per operator,
and a coup's book closes only once every operator's CloseBook mark is read."""

from __future__ import annotations

from datetime import timedelta

import pytest
from eventsourcing.persistence import Tracking

from contracts import (
    HOUSE,
    BetAccepted,
    BetRejected,
    BetsClosed,
    BetSettled,
    CloseBook,
    CoupSettled,
    Message,
    bet_commands_topic,
    bet_events_topic,
    topic_for,
)
from services.settlement.application import SettlementApplication
from services.settlement.service import _subscriptions
from services.shared.platform.consumer import LOG_APPEND_TIME, Delivery
from tests.unit.settlement.harness import (
    CLOSES_AT,
    PLACED_AT,
    POPO,
    T0,
    Dealing,
    Relay,
    bet,
    settlement_app,
)

OPERATORS = ("acme", "bravo")


class Table(Dealing):
    """Dealing's side at a table serving two operators: its marks go to each operator's
    topic, as the relay sends them (``contracts.topics_for``)."""

    def __init__(self, app: SettlementApplication) -> None:
        super().__init__(app)
        self.offsets: dict[str, int] = {}

    def mark(self, operator: str, message: Message, at: object) -> None:
        offset = self.offsets[operator] = self.offsets.get(operator, 0) + 1
        tracking = Tracking(f"{bet_commands_topic(operator)}:0", offset)
        self.app.handle(message, tracking, placed_at=at, operator=operator)  # type: ignore[arg-type]

    def open_for(self, operator: str, coup_id: str = "c1") -> None:
        """Dealing's OpenBook as it reads on ``operator``'s topic."""
        opened: list[Message] = []
        real_send = self.send
        self.send = lambda message, tracking=None, placed_at=None: opened.append(message)  # type: ignore[method-assign]
        try:
            self.open_betting(coup_id)
        finally:
            self.send = real_send  # type: ignore[method-assign]
        self.mark(operator, opened[0], T0)

    def close_for(self, operator: str, coup_id: str = "c1", at: object = CLOSES_AT) -> None:
        self.mark(operator, CloseBook(table_id=self.table_id, coup_id=coup_id), at)


@pytest.fixture
def table() -> Table:
    table = Table(settlement_app(env={**POPO, "PB_OPERATORS": ",".join(OPERATORS)}))
    table.open_table()
    for operator in OPERATORS:
        table.open_for(operator)
    return table


def test_two_operators_may_use_the_same_bet_id_and_each_gets_its_own_answer(table: Table) -> None:
    app = table.app
    assert app.place_bet(bet("b1", amount=1000), operator="acme").accepted
    assert app.place_bet(bet("b1", amount=2000, bettor_id="bob"), operator="bravo").accepted
    assert app.bet_answer("b1", "acme") == app.bet_answer("b1", "bravo") != None  # noqa: E711
    assert app.bet_answer("b1") is None  # the house never placed b1
    published = Relay(app).pump()
    accepted = [m for m in published if isinstance(m, BetAccepted)]
    assert [(m.operator, m.bet_id, m.amount) for m in accepted] == [
        ("acme", "b1", 1000),
        ("bravo", "b1", 2000),
    ]
    assert [topic_for(m) for m in accepted] == [bet_events_topic(op) for op in OPERATORS]


def test_an_operator_reusing_its_own_bet_id_gets_the_duplicate_answer(table: Table) -> None:
    app = table.app
    assert app.place_bet(bet("b1", amount=1000), operator="acme").accepted
    again = app.place_bet(bet("b1", amount=1000), operator="acme")
    assert again.accepted and again.repeated  # a resend: answered from the record
    squatted = app.place_bet(bet("b1", amount=5000), operator="acme")
    assert squatted.reason_code == "DUPLICATE_BET_ID"
    assert app.place_bet(bet("b1", amount=5000), operator="bravo").accepted  # not bravo's id


def test_an_operators_bet_before_its_own_open_mark_is_refused_and_its_id_stays_free() -> None:
    table = Table(settlement_app(env={**POPO, "PB_OPERATORS": ",".join(OPERATORS)}))
    table.open_table()
    table.open_for("acme")
    early = table.app.place_bet(bet("b1"), operator="bravo")
    assert early.reason_code == "NO_SUCH_COUP"  # acme's mark opens nothing for bravo
    assert table.app.bet_answer("b1", "bravo") is None
    table.open_for("bravo")
    assert table.app.place_bet(bet("b1"), operator="bravo").accepted


def test_the_book_closes_only_once_every_operators_close_mark_is_read(table: Table) -> None:
    app, relay = table.app, Relay(table.app)
    assert app.place_bet(bet("a1"), operator="acme").accepted
    table.close_for("acme", at=CLOSES_AT - timedelta(seconds=30))
    assert not relay.pump() or not relay.of_type(BetsClosed)  # bravo still takes bets
    late = app.place_bet(bet("a2", bettor_id="bob"), operator="acme")
    assert late.reason_code == "BETTING_CLOSED"  # after acme's own mark
    assert app.place_bet(bet("b1"), operator="bravo").accepted
    table.close_for("bravo")
    closed = Relay(app).pump()
    [book_closed] = [m for m in closed if isinstance(m, BetsClosed)]
    assert (book_closed.bets, book_closed.staked) == (2, 2000)
    assert app.place_bet(bet("b2", bettor_id="bob"), operator="bravo").reason_code == (
        "BETTING_CLOSED"
    )


def test_a_coup_is_settled_once_per_operator_on_its_own_topic(table: Table) -> None:
    app = table.app
    assert app.place_bet(bet("x", amount=1000), operator="acme").accepted
    assert app.place_bet(bet("x", amount=3000, bet_type="banker"), operator="bravo").accepted
    for operator in OPERATORS:
        table.close_for(operator)
    relay = Relay(app)
    relay.pump()
    table.resolve("c1", ["9H", "KS"], ["2C", "3D"])  # Player 9, Banker 5
    published = relay.pump()
    settled = [(m.operator, m.bet_id, m.returned) for m in published if isinstance(m, BetSettled)]
    assert sorted(settled) == [("acme", "x", 2000), ("bravo", "x", 0)]
    totals = {
        m.operator: (m.bets, m.staked, m.paid) for m in published if isinstance(m, CoupSettled)
    }
    assert totals == {"acme": (1, 1000, 2000), "bravo": (1, 3000, 0)}
    for message in published:
        if isinstance(message, BetSettled | CoupSettled):
            assert topic_for(message) == bet_events_topic(message.operator)


def test_the_service_takes_a_bets_operator_from_the_topic_it_was_read_from() -> None:
    """A bet read from acme's topic is acme's, whatever the bet says (it cannot say)."""
    app = settlement_app(env={**POPO, "PB_OPERATORS": ",".join(OPERATORS)})
    table = Table(app)
    table.open_table()
    table.open_for("acme")
    table.open_for("bravo")
    handlers = {s.topic: s.handler for s in _subscriptions(app, OPERATORS)}
    assert set(handlers) >= {bet_commands_topic(op) for op in OPERATORS}
    assert bet_commands_topic(HOUSE) not in handlers  # not configured: not read
    topic = bet_commands_topic("bravo")
    millis = int(PLACED_AT.timestamp() * 1000)
    delivery = Delivery(
        bet("b7"), topic, 0, 9, "t1", None, Tracking(f"{topic}:0", 9), millis, LOG_APPEND_TIME
    )
    handlers[topic]([delivery], Tracking(f"{topic}:0", 9))
    assert app.bet_answer("b7", "bravo") is not None and app.bet_answer("b7", "bravo").accepted  # type: ignore[union-attr]
    assert app.bet_answer("b7", "acme") is None
    [answer] = [m for m in Relay(app).pump() if isinstance(m, BetAccepted | BetRejected)]
    assert answer.operator == "bravo"


def test_a_bet_cannot_claim_an_operator() -> None:
    """PlaceBet has no operator field: one that names one is not a bet at all."""
    import json

    from contracts import BET_COMMANDS, ContractError, decode, encode

    document = json.loads(encode(bet("b1")))
    with pytest.raises(ContractError, match="operator"):
        decode(BET_COMMANDS, json.dumps({**document, "operator": "acme"}).encode())


def test_the_read_side_finds_a_bet_accepted_after_its_operators_own_mark(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The audit's view: a bet of acme placed after acme's CloseBook but accepted (a
    settlement gone wrong) is late, though the book still waited for bravo's mark; bravo's
    bet placed then is in time."""
    from services.settlement.books import BetBook
    from services.tools.audit.memory_stores import RecorderStore
    from services.tools.history import History
    from services.tools.history.from_store import StoreFeed, read_state

    table = Table(settlement_app(env={**POPO, "PB_OPERATORS": ",".join(OPERATORS)}))
    table.open_table()
    for operator in OPERATORS:
        table.open_for(operator)
    mark = CLOSES_AT - timedelta(seconds=60)
    table.close_for("acme", at=mark)
    monkeypatch.setattr(BetBook, "closed_for", lambda self, placed_at, operator="house": None)
    after = mark + timedelta(seconds=1)
    assert table.app.place_bet(bet("late"), placed_at=after, operator="acme").accepted
    assert table.app.place_bet(bet("ok"), placed_at=after, operator="bravo").accepted
    history = History()
    feed = StoreFeed(history)
    for batch in RecorderStore("settlement", table.app.recorder).rows():
        for nid, oid, _, topic, state in batch:
            reader = feed.readers.get(topic)
            if reader is not None:
                reader(oid, nid, read_state(state))
    [book] = history.books.values()
    assert book.late == ["acme/late"]
    assert set(book.accepted) == {"acme/late", "bravo/ok"}
