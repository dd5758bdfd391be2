"""A studio coup's result found wrong after settlement (``CorrectResult``): a supervisor's signed
decision, verified as a void's, accepted only for a resolved studio coup within the void window
and for cards that are a whole coup other than its cards now; it publishes ``CoupCorrected``
(the decision itself is kept in the store, not published)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from contracts import (
    BettingOpened,
    CommandRejected,
    CorrectResult,
    CoupCorrected,
    CoupResolved,
)
from services.dealing.application import DealingApplication
from services.dealing.domain import Coup, coup_aggregate_id
from tests.supervisors import SUPERVISOR, keyring, supervisor
from tests.unit.dealing.harness import Driver, ScriptedShoe, open_table, shuffled_order

POPO = {"PERSISTENCE_MODULE": "eventsourcing.popo"}

CORRECTED = ["9S", "2D", "TH", "3C"]  # Player 9 Banker 5, a natural: two cards each


class Clock:
    """Dealing's clock, moved by the tests (real time plus an offset)."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


def resolved_coup(card_source: str = "studio", clock: Clock | None = None) -> tuple[Driver, str]:
    """A table whose first coup is resolved (and the next one open for bets)."""
    app = DealingApplication(env=POPO, supervisors=keyring(), clock=clock)
    driver = Driver(app, ScriptedShoe([shuffled_order(1, seed=1)]))
    app.handle(open_table(betting_window_ms=60_000, card_source=card_source))
    driver.pump()
    coup_id = driver.of_type(BettingOpened)[-1].coup_id
    driver.close_betting_and_pump()
    assert [r.coup_id for r in driver.of_type(CoupResolved)] == [coup_id]
    return driver, coup_id


def codes(driver: Driver) -> list[str]:
    driver.pump()
    return [r.reason_code for r in driver.of_type(CommandRejected)]


def test_a_signed_correction_of_a_resolved_studio_coup_publishes_the_corrected_result() -> None:
    driver, coup_id = resolved_coup()
    command = supervisor().correct_result("t1", coup_id, CORRECTED, "the video shows a TH")
    driver.app.handle(command)
    driver.pump()
    [corrected] = driver.of_type(CoupCorrected)
    assert (corrected.coup_id, corrected.correction_id) == (coup_id, command.event_id)
    assert (corrected.player_cards, corrected.banker_cards) == (["9S", "TH"], ["2D", "3C"])
    assert (corrected.player_total, corrected.banker_total) == (9, 5)
    assert (corrected.outcome, corrected.natural) == ("PLAYER", True)
    assert (corrected.supervisor_id, corrected.reason) == (SUPERVISOR, "the video shows a TH")
    assert "authorization" not in corrected.model_dump()  # kept in the store, not published
    stored = [
        event
        for event in driver.app.events.get(coup_aggregate_id("t1", coup_id))
        if isinstance(event, Coup.Corrected)
    ]
    assert [event.authorization for event in stored] == [command.authorization]
    assert codes(driver) == []


def test_a_result_may_be_corrected_again_against_the_latest_one() -> None:
    driver, coup_id = resolved_coup()
    driver.app.handle(supervisor().correct_result("t1", coup_id, CORRECTED))
    driver.app.handle(supervisor().correct_result("t1", coup_id, CORRECTED))  # the same again
    driver.app.handle(supervisor().correct_result("t1", coup_id, ["2S", "2D", "7H", "7C"]))
    driver.pump()
    assert [c.outcome for c in driver.of_type(CoupCorrected)] == ["PLAYER", "TIE"]
    assert codes(driver) == ["RESULT_NOT_CORRECTABLE"]


def test_a_decision_is_used_once() -> None:
    driver, coup_id = resolved_coup()
    command = supervisor().correct_result("t1", coup_id, CORRECTED)
    driver.app.handle(command)
    driver.app.handle(command)  # resent: no second correction
    driver.pump()
    assert len(driver.of_type(CoupCorrected)) == 1
    assert codes(driver) == ["AUTHORIZATION_REPLAYED"]


@pytest.mark.parametrize(
    ("card_source", "cards", "resolved", "code"),
    [
        ("rng", CORRECTED, True, "RESULT_NOT_CORRECTABLE"),  # not a studio table
        ("studio", ["2S", "2D", "3H", "3C"], True, "RESULT_NOT_CORRECTABLE"),  # not a whole coup
        ("studio", ["9S", "2D", "TH", "3C", "4D"], True, "RESULT_NOT_CORRECTABLE"),  # one too many
        ("studio", CORRECTED, False, "RESULT_NOT_CORRECTABLE"),  # the coup is not resolved
    ],
)
def test_a_correction_that_cannot_be_is_refused(
    card_source: str, cards: list[str], resolved: bool, code: str
) -> None:
    driver, coup_id = resolved_coup(card_source)
    if not resolved:
        coup_id = driver.of_type(BettingOpened)[-1].coup_id  # the next coup, still betting
    driver.app.handle(supervisor().correct_result("t1", coup_id, cards))
    assert codes(driver) == [code]
    assert driver.of_type(CoupCorrected) == []


def test_a_voided_coup_cannot_be_corrected() -> None:
    driver, coup_id = resolved_coup()
    driver.app.handle(supervisor().void("t1", coup_id))
    driver.app.handle(supervisor().correct_result("t1", coup_id, CORRECTED))
    assert codes(driver) == ["RESULT_NOT_CORRECTABLE"]
    assert driver.of_type(CoupCorrected) == []


def test_a_coup_older_than_the_void_window_cannot_be_corrected() -> None:
    clock = Clock()
    driver, coup_id = resolved_coup(clock=clock)
    clock.offset = timedelta(hours=24, minutes=1)  # the default window is 24 hours
    later = datetime.now(UTC) + clock.offset
    driver.app.handle(supervisor().correct_result("t1", coup_id, CORRECTED, issued_at=later))
    assert codes(driver) == ["RESULT_NOT_CORRECTABLE"]


def test_the_decision_is_verified_as_a_voids() -> None:
    driver, coup_id = resolved_coup()
    signed = supervisor().correct_result("t1", coup_id, CORRECTED)
    driver.app.handle(signed.model_copy(update={"cards": ["9S", "2D", "TH", "4C"]}))
    held_coup_decision = supervisor().correct("t1", coup_id, CORRECTED)  # action "correct"
    driver.app.handle(CorrectResult(**held_coup_decision.model_dump(exclude={"type"})))
    driver.app.handle(signed.model_copy(update={"authorization": None, "event_id": uuid4()}))
    assert codes(driver) == [
        "AUTHORIZATION_MISMATCH",
        "AUTHORIZATION_MISMATCH",
        "SUPERVISOR_REQUIRED",
    ]
    assert driver.of_type(CoupCorrected) == []
