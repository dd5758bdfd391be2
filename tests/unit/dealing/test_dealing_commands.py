"""Table commands: refusals, idempotency, closing betting and the table, voids."""

from __future__ import annotations

from collections.abc import Callable
from uuid import uuid4

import pytest
from eventsourcing.persistence import IntegrityError, Tracking

from contracts import (
    AcceptCards,
    BetsClosed,
    BettingClosed,
    BettingOpened,
    CardDealt,
    CardDrawn,
    CloseBetting,
    CloseShoe,
    CloseTable,
    CommandRejected,
    CoupResolved,
    CoupVoided,
    DrawCards,
    Message,
    OpenBook,
    ShuffleShoe,
    TableClosed,
    TableOpened,
    VoidCoup,
)
from services.dealing.application import DealingApplication
from services.dealing.domain import (
    CoupPhase,
    TableStatus,
)
from tests.supervisors import SUPERVISOR, keyring, supervisor
from tests.unit.dealing.harness import Driver, ScriptedShoe, open_table, shuffled_order

POPO = {"PERSISTENCE_MODULE": "eventsourcing.popo"}


@pytest.fixture
def driver() -> Driver:
    app = DealingApplication(env=POPO, supervisors=keyring())
    drv = Driver(app, ScriptedShoe([shuffled_order(1, seed=s) for s in range(5)]))
    app.handle(open_table(betting_window_ms=60_000))
    drv.pump()
    return drv


def current_coup(driver: Driver) -> str:
    opened = driver.of_type(BettingOpened)[-1]
    assert isinstance(opened, BettingOpened)
    return opened.coup_id


def rejections(driver: Driver) -> list[CommandRejected]:
    driver.pump()
    return [m for m in driver.of_type(CommandRejected) if isinstance(m, CommandRejected)]


def test_open_table_opens_betting_after_the_burn(driver: Driver) -> None:
    kinds = [type(m).__name__ for m in driver.published]
    assert kinds == ["TableOpened", "ShuffleShoe", "BettingOpened", "OpenBook"]
    opened, book = driver.published[-2:]
    assert isinstance(opened, BettingOpened) and isinstance(book, OpenBook)
    assert opened.coup_number == 1 and not opened.last_of_shoe
    assert (opened.closes_at - opened.occurred_at).total_seconds() == pytest.approx(60, abs=1)
    # The mark in the bets' partition carries the coup and the table's terms in force.
    assert (book.coup_id, book.coup_number, book.closes_at) == (
        opened.coup_id,
        1,
        opened.closes_at,
    )
    assert (book.currency, book.paytable, sorted(book.limits)) == (
        "EUR",
        "standard",
        ["banker", "player", "tie"],
    )


def test_the_same_open_table_twice_has_one_effect(driver: Driver) -> None:
    driver.app.handle(open_table(betting_window_ms=60_000))
    assert len(driver.of_type(TableOpened)) == 1
    assert driver.pump() == []


@pytest.mark.parametrize(
    ("command", "code"),
    [
        (VoidCoup(table_id="t1", coup_id="t1.coup-1"), "SUPERVISOR_REQUIRED"),
        (VoidCoup(table_id="t1", coup_id="t1.coup-1", supervisor_id="  "), "SUPERVISOR_REQUIRED"),
        (lambda: supervisor().void("t1", "nope"), "NO_SUCH_COUP"),  # signed when it runs
        (lambda: supervisor().void("t9", "t9.coup-1"), "NO_SUCH_TABLE"),
        (CloseTable(table_id="t9"), "NO_SUCH_TABLE"),
        (CloseBetting(table_id="t1", coup_id="nope"), "NO_SUCH_COUP"),
        (CloseBetting(table_id="t9", coup_id="t9.coup-1"), "NO_SUCH_TABLE"),
        (open_table(currency="USD"), "TABLE_ALREADY_OPEN"),
        (open_table("t2", paytable="no-such-paytable"), "UNKNOWN_PAYTABLE"),
        (open_table("t2", cut_card_from_end=3), "INVALID_SETTINGS"),
        (open_table("t2", cut_card_from_end=40), "INVALID_SETTINGS"),
        (
            open_table("t2", limits={"player": {"minimum": 500, "maximum": 100}}),
            "INVALID_SETTINGS",
        ),
        (  # a bet type of another paytable
            open_table("t2", limits={"dragon_7": {"minimum": 100, "maximum": 500}}),
            "INVALID_SETTINGS",
        ),
    ],
)
def test_a_refused_command_is_answered_with_its_reason(
    driver: Driver, command: Message | Callable[[], Message], code: str
) -> None:
    if not isinstance(command, Message):
        command = command()
    before = len(driver.published)
    driver.app.handle(command)
    found = rejections(driver)
    assert len(found) == 1
    assert found[0].reason_code == code
    assert found[0].command_id == command.event_id
    assert found[0].message
    assert len(driver.published) == before + 1  # nothing else changed


def test_a_table_offers_only_bet_types_of_its_paytable(driver: Driver) -> None:
    super_6 = {"super_6": {"minimum": 100, "maximum": 500}}
    driver.app.handle(open_table("t2", paytable="ez-baccarat", limits=super_6))
    (refused,) = rejections(driver)
    assert refused.reason_code == "INVALID_SETTINGS"
    assert "ez-baccarat paytable does not offer super_6" in refused.message
    assert "dragon_7, panda_8" in refused.message  # what it does offer
    driver.app.handle(open_table("t3", paytable="no-commission", limits=super_6))
    assert len(rejections(driver)) == 1  # the no-commission table opens


def test_a_refused_command_sent_twice_is_refused_once(driver: Driver) -> None:
    void = VoidCoup(table_id="t1", coup_id=current_coup(driver), event_id=uuid4())
    driver.app.handle(void)
    driver.app.handle(void)
    assert len(rejections(driver)) == 1


def test_close_betting_deals_the_coup(driver: Driver) -> None:
    coup_id = current_coup(driver)
    driver.app.handle(CloseBetting(table_id="t1", coup_id=coup_id))
    driver.app.handle(CloseBetting(table_id="t1", coup_id=coup_id))  # again: nothing more
    driver.pump()
    assert [m.coup_id for m in driver.of_type(BettingClosed)] == [coup_id]
    assert [m.coup_id for m in driver.of_type(CoupResolved)] == [coup_id]
    assert current_coup(driver) != coup_id


def test_betting_closes_when_its_window_ends_only(driver: Driver) -> None:
    deadline = driver.app.betting_deadlines()[0]
    assert driver.app.close_expired_betting(deadline.closes_at.replace(year=2000)) == []
    assert driver.app.close_expired_betting(deadline.closes_at) == [deadline]
    assert driver.app.betting_deadlines() == []


def test_the_same_shoe_message_twice_has_one_effect(driver: Driver) -> None:
    app = driver.app
    coup_id = current_coup(driver)
    app.close_betting("t1", coup_id)
    driver.bets_closed("t1", coup_id)  # settlement closed the book: the cards are asked for
    # Relay the DrawCards by hand and deliver the first card twice with the same tracking.
    notifications = app.recorder.select_notifications(driver.position + 1, 100)
    from services.dealing.messages import to_messages

    draws = [
        m
        for n in notifications
        for m in to_messages(app.mapper.to_domain_event(n))
        if isinstance(m, DrawCards)
    ]
    driver.position = notifications[-1].id
    answers = driver.shoe.handle(draws[0])
    first = answers[0]
    assert isinstance(first, CardDrawn)
    app.handle(first, Tracking("shoe:punto-banco.shoe-events:0", 1000))
    app.handle(first, Tracking("shoe:punto-banco.shoe-events:0", 1000))
    # The same card again under a later position (a shoe that answered twice): no effect.
    app.handle(first, Tracking("shoe:punto-banco.shoe-events:0", 1001))
    driver.pump()
    assert len(driver.of_type(CardDealt)) == 1


def test_void_during_betting_refunds_and_starts_the_next_coup(driver: Driver) -> None:
    coup_id = current_coup(driver)
    void = supervisor().void("t1", coup_id, "x")
    driver.app.handle(void)
    driver.app.handle(void)  # sent again: its decision is spent, nothing changes
    driver.pump()
    voided = driver.of_type(CoupVoided)
    assert len(voided) == 1
    assert isinstance(voided[0], CoupVoided)
    assert (voided[0].supervisor_id, voided[0].reason, voided[0].was_resolved) == (
        SUPERVISOR,
        "x",
        False,
    )
    assert current_coup(driver) != coup_id
    assert [r.reason_code for r in rejections(driver)] == ["AUTHORIZATION_REPLAYED"]


def test_void_after_resolution_says_it_was_resolved(driver: Driver) -> None:
    coup_id = current_coup(driver)
    driver.close_betting_and_pump()
    next_coup = current_coup(driver)
    driver.app.handle(supervisor().void("t1", coup_id))
    driver.pump()
    voided = driver.of_type(CoupVoided)
    assert isinstance(voided[0], CoupVoided) and voided[0].was_resolved
    assert current_coup(driver) == next_coup  # the table goes on with its current coup


def test_void_while_dealing_discards_late_cards(driver: Driver) -> None:
    app = driver.app
    coup_id = current_coup(driver)
    app.close_betting("t1", coup_id)
    app.handle(supervisor().void("t1", coup_id))
    driver.pump()  # the shoe answers the DrawCards after the void: the cards are ignored
    assert [m for m in driver.of_type(CardDealt) if m.coup_id == coup_id] == []
    coup = app.get_coup("t1", coup_id)
    assert coup is not None and coup.phase is CoupPhase.VOIDED
    assert current_coup(driver) != coup_id
    driver.close_betting_and_pump()  # the next coup is dealt normally
    assert len(driver.of_type(CoupResolved)) == 1


@pytest.mark.parametrize("card_source", ["rng", "studio"])
def test_a_voided_coup_of_a_studio_table_is_cleared_in_its_shoe(card_source: str) -> None:
    app = DealingApplication(env=POPO, supervisors=keyring())
    shoe = ScriptedShoe([shuffled_order(1, seed=1)])
    driver = Driver(app, shoe)
    app.handle(open_table(betting_window_ms=60_000, card_source=card_source))
    driver.pump()
    assert [m.card_source for m in driver.of_type(ShuffleShoe)] == [card_source]
    assert [m.card_source for m in driver.of_type(TableOpened)] == [card_source]
    resolved = current_coup(driver)
    driver.close_betting_and_pump()
    app.handle(supervisor().void("t1", resolved))  # resolved already: the shoe owes it nothing
    coup_id = current_coup(driver)
    app.close_betting("t1", coup_id)
    app.handle(supervisor().void("t1", coup_id, "misdeal"))
    driver.pump()
    cleared = [(c.shoe_id, c.coup_id, c.reason) for c in shoe.decided]
    assert cleared == ([("t1.shoe-1", coup_id, "misdeal")] if card_source == "studio" else [])


def studio_coup_being_dealt(card_source: str = "studio") -> tuple[Driver, ScriptedShoe, str]:
    """A table whose first coup asked the shoe for cards and got none (its shoe holds)."""
    app = DealingApplication(env=POPO, supervisors=keyring())
    shoe = ScriptedShoe([shuffled_order(1, seed=1)])
    driver = Driver(app, shoe, settlement=False)
    app.handle(open_table(betting_window_ms=60_000, card_source=card_source))
    driver.pump()
    coup_id = current_coup(driver)
    app.close_betting("t1", coup_id)
    driver.pump()
    app.handle_bet_events(
        [BetsClosed(table_id="t1", coup_id=coup_id, bets=0, staked=0, currency="EUR")],
        Tracking("settlement:punto-banco.book-events:0", 1),
    )
    return driver, shoe, coup_id


def test_a_signed_correction_of_a_studio_coup_tells_its_shoe_the_cards() -> None:
    driver, shoe, coup_id = studio_coup_being_dealt()
    cards = ["9S", "2D", "TH", "3C"]
    driver.app.handle(supervisor().correct("t1", coup_id, cards, "the video shows the TH"))
    driver.pump()
    decided = [(type(d).__name__, d.coup_id, getattr(d, "cards", None)) for d in shoe.decided]
    assert decided == [("AcceptCards", coup_id, cards)]
    assert rejections(driver) == []


@pytest.mark.parametrize(
    ("card_source", "cards", "code"),
    [
        ("rng", ["9S", "2D", "TH", "3C"], "COUP_NOT_CORRECTABLE"),  # not a studio table
        ("studio", ["2S", "2D", "3H", "3C"], "COUP_NOT_CORRECTABLE"),  # not a whole coup
    ],
)
def test_a_correction_that_cannot_be_is_refused(
    card_source: str, cards: list[str], code: str
) -> None:
    driver, shoe, coup_id = studio_coup_being_dealt(card_source)
    driver.app.handle(supervisor().correct("t1", coup_id, cards))
    driver.pump()
    assert [r.reason_code for r in rejections(driver)] == [code]
    assert [d for d in shoe.decided if isinstance(d, AcceptCards)] == []


def test_a_correction_whose_signed_cards_are_not_the_commands_is_refused() -> None:
    driver, _, coup_id = studio_coup_being_dealt()
    signed = supervisor().correct("t1", coup_id, ["9S", "2D", "TH", "3C"])
    driver.app.handle(signed.model_copy(update={"cards": ["9S", "2D", "TH", "4C"]}))
    unsigned = signed.model_copy(update={"authorization": None, "event_id": uuid4()})
    driver.app.handle(unsigned)
    driver.pump()
    assert [r.reason_code for r in rejections(driver)] == [
        "AUTHORIZATION_MISMATCH",
        "SUPERVISOR_REQUIRED",
    ]


def test_close_table_finishes_the_current_coup_first(driver: Driver) -> None:
    coup_id = current_coup(driver)
    driver.app.handle(CloseTable(table_id="t1", reason="end of session"))
    driver.pump()
    assert driver.of_type(TableClosed) == []
    driver.close_betting_and_pump()
    kinds = [type(m).__name__ for m in driver.published]
    assert kinds[-3:] == ["CoupResolved", "CloseShoe", "TableClosed"]
    assert current_coup(driver) == coup_id  # no new coup
    table = driver.app.get_table("t1")
    assert table is not None and table.status is TableStatus.CLOSED
    closed = driver.of_type(TableClosed)[0]
    assert isinstance(closed, TableClosed) and closed.reason == "end of session"


def test_a_closed_table_can_be_opened_again(driver: Driver) -> None:
    driver.app.handle(CloseTable(table_id="t1"))
    driver.close_betting_and_pump()
    driver.app.handle(open_table(currency="USD"))
    driver.pump()
    assert len(driver.of_type(TableOpened)) == 2
    assert len(driver.of_type(CloseShoe)) == 1
    latest = driver.of_type(BettingOpened)[-1]
    assert isinstance(latest, BettingOpened) and latest.shoe_id == "t1.shoe-2"
    assert rejections(driver) == []


def test_open_table_while_it_is_closing_is_refused(driver: Driver) -> None:
    driver.app.handle(CloseTable(table_id="t1"))
    driver.app.handle(open_table(betting_window_ms=60_000))
    found = rejections(driver)
    assert [r.reason_code for r in found] == ["TABLE_ALREADY_OPEN"]
    assert "closing" in found[0].message


def test_a_commit_that_landed_though_it_raised_leaves_no_stale_table(driver: Driver) -> None:
    """The store's commit may land and report a failure (a lost reply, then the retry's
    IntegrityError): dealing reads the table as stored next, not a version behind."""
    app = driver.app
    real = app.events.put

    def put_then_fail(*args: object, **kwargs: object) -> object:
        real(*args, **kwargs)  # type: ignore[arg-type]
        raise IntegrityError("the retry of a commit that had landed")

    app.events.put = put_then_fail  # type: ignore[method-assign]
    app.handle(CloseTable(table_id="t1"), Tracking("ops:0", 1))  # recorded: taken as done
    app.events.put = real  # type: ignore[method-assign]
    table = app.get_table("t1")
    assert table is not None and table.status is TableStatus.CLOSING
    stored = app.repository.get(table.id, version=10**6)  # replayed from the store
    assert (table.version, table.status) == (stored.version, stored.status)
    # and the next change to it is recorded (a stale version would fail on every try)
    app.handle(CloseBetting(table_id="t1", coup_id=current_coup(driver)), Tracking("ops:0", 2))
    driver.pump()
    assert driver.of_type(BettingClosed)
