"""The handshake with settlement: after BettingClosed, cards only on BetsClosed.

Dealing asks the shoe for a coup's cards only once settlement has closed the
coup's book (BetsClosed), so no bet can be accepted once a card is out.
"""

from __future__ import annotations

import re

from eventsourcing.persistence import Tracking

from contracts import (
    BetAccepted,
    BetsClosed,
    BettingClosed,
    BettingOpened,
    CardDealt,
    CloseBetting,
    CoupResolved,
    CoupVoided,
    DrawCards,
)
from services.dealing.application import DealingApplication
from services.dealing.domain import CoupPhase
from services.dealing.service import book_events_handler
from services.shared.platform.consumer import Delivery
from tests.supervisors import keyring, supervisor
from tests.unit.dealing.harness import Driver, ScriptedShoe, open_table, shuffled_order

POPO = {"PERSISTENCE_MODULE": "eventsourcing.popo"}


def waiting_driver() -> tuple[Driver, str]:
    """A table whose first coup's betting was closed early (CloseBetting), no BetsClosed yet."""
    app = DealingApplication(env=POPO, supervisors=keyring())
    driver = Driver(app, ScriptedShoe([shuffled_order(1, seed=7)]), settlement=False)
    app.handle(open_table(betting_window_ms=600_000))
    driver.pump()
    opened = driver.of_type(BettingOpened)[-1]
    app.handle(CloseBetting(table_id="t1", coup_id=opened.coup_id))
    driver.pump()
    return driver, opened.coup_id


def test_no_cards_are_drawn_before_bets_closed() -> None:
    driver, coup_id = waiting_driver()
    assert [m.coup_id for m in driver.of_type(BettingClosed)] == [coup_id]
    assert driver.of_type(DrawCards) == []
    assert driver.of_type(CardDealt) == []
    # Other bet events (and a BetsClosed for another coup) change nothing.
    other = [
        BetAccepted(
            table_id="t1",
            bet_id="b1",
            coup_id=coup_id,
            bettor_id="alice",
            bet_type="player",
            amount=100,
            currency="EUR",
        ),
        BetsClosed(table_id="t1", coup_id="not-this", bets=0, staked=0, currency="EUR"),
        BetsClosed(table_id="t2", coup_id=coup_id, bets=0, staked=0, currency="EUR"),
    ]
    driver.app.handle_bet_events(other, Tracking("settlement:punto-banco.book-events:0", 50))
    driver.pump()
    assert driver.of_type(DrawCards) == []
    coup = driver.app.get_coup("t1", coup_id)
    assert coup is not None and coup.phase is CoupPhase.DEALING and coup.requests == 0
    assert driver.app.tracked_position("settlement:punto-banco.book-events:0") == 50


def test_bets_closed_draws_once_even_when_repeated() -> None:
    driver, coup_id = waiting_driver()
    driver.bets_closed("t1", coup_id)
    driver.bets_closed("t1", coup_id)  # a republished BetsClosed under a new position
    driver.pump()
    driver.bets_closed("t1", coup_id)  # and once more after the coup was dealt
    driver.pump()
    initial = [m for m in driver.of_type(DrawCards) if m.count == 4]
    assert [m.coup_id for m in initial] == [coup_id]
    # The request id ends with 64 random bits: nobody can answer a request they did not read.
    assert re.fullmatch(rf"{re.escape(coup_id)}\.draw-1\.[0-9a-f]{{16}}", initial[0].request_id)
    [resolved] = [m for m in driver.of_type(CoupResolved) if m.coup_id == coup_id]
    dealt = [m for m in driver.of_type(CardDealt) if m.coup_id == coup_id]
    assert len(dealt) == len(resolved.player_cards) + len(resolved.banker_cards)


def test_the_service_handler_passes_a_batch_of_bet_events() -> None:
    driver, coup_id = waiting_driver()
    message = BetsClosed(table_id="t1", coup_id=coup_id, bets=0, staked=0, currency="EUR")
    tracking = Tracking("settlement:punto-banco.book-events:0", 7)
    delivery = Delivery(
        message=message,
        topic="punto-banco.book-events",
        partition=0,
        offset=6,
        key="t1",
        source="settlement",
        tracking=tracking,
    )
    book_events_handler(driver.app)([delivery], tracking)
    driver.pump()
    assert [m.coup_id for m in driver.of_type(DrawCards)][:1] == [coup_id]


def test_a_coup_voided_while_waiting_ignores_its_bets_closed() -> None:
    driver, coup_id = waiting_driver()
    driver.app.handle(supervisor().void("t1", coup_id, "x"))
    driver.pump()
    assert [m.coup_id for m in driver.of_type(CoupVoided)] == [coup_id]
    driver.bets_closed("t1", coup_id)
    driver.pump()
    assert driver.of_type(DrawCards) == []
    # The next coup opened and is dealt once its own book is closed.
    following = driver.of_type(BettingOpened)[-1].coup_id
    assert following != coup_id
    driver.app.handle(CloseBetting(table_id="t1", coup_id=following))
    driver.pump()
    assert driver.of_type(DrawCards) == []
    driver.bets_closed("t1", following)
    driver.pump()
    assert [m.coup_id for m in driver.of_type(CoupResolved)] == [following]
