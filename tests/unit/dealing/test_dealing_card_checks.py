"""Dealing takes a card only where the shoe could have dealt it; anything else is an incident.

A CardDrawn must answer the coup's pending request (whose id ends with 64 random bits), at the
position after the coup's last card (its first card at or after the floor the burn or the
coup before left). A forged card is refused, recorded as an incident, and the genuine cards
still make the coup.
"""

from __future__ import annotations

from eventsourcing.persistence import Tracking

from contracts import (
    BettingOpened,
    CardDrawn,
    CardsBurned,
    CloseBetting,
    CoupResolved,
    DrawCards,
    Message,
)
from services.dealing.application import DealingApplication
from services.shared.platform.store.incidents import IncidentLog
from tests.unit.dealing.harness import Driver, ScriptedShoe, open_table, shuffled_order

POPO = {"PERSISTENCE_MODULE": "eventsourcing.popo"}
ORDER = shuffled_order(1, seed=7)


def closed_table() -> tuple[Driver, str]:
    """A table whose first coup's betting closed; settlement's BetsClosed not sent yet."""
    app = DealingApplication(env=POPO)
    driver = Driver(app, ScriptedShoe([list(ORDER)]), settlement=False)
    app.handle(open_table(betting_window_ms=600_000))
    driver.pump()
    coup_id = driver.of_type(BettingOpened)[-1].coup_id
    app.handle(CloseBetting(table_id="t1", coup_id=coup_id))
    driver.pump()
    return driver, coup_id


def forge(driver: Driver, coup_id: str, request_id: str, position: int, card: str) -> None:
    driver.shoe_notification += 1
    message = CardDrawn(
        table_id="t1",
        shoe_id="t1.shoe-1",
        coup_id=coup_id,
        request_id=request_id,
        position=position,
        card=card,
    )
    driver.app.handle(message, Tracking("shoe", driver.shoe_notification))


def incidents(app: DealingApplication) -> list[tuple[str, str]]:
    found = []
    for notification in app.recorder.select_notifications(1, 10_000):
        event = app.mapper.to_domain_event(notification)
        if isinstance(event, IncidentLog.Raised):
            found.append((event.code, event.message))
    return found


class SilentDraws(ScriptedShoe):
    """Shuffles and burns like the shoe but answers no DrawCards: the test deals."""

    def handle(self, command: Message) -> list[Message]:
        return [] if isinstance(command, DrawCards) else super().handle(command)


def test_a_card_for_a_request_never_made_is_refused() -> None:
    driver, coup_id = closed_table()
    forge(driver, coup_id, f"{coup_id}.draw-1", 11, "9H")  # the old, guessable request id
    [(code, message)] = incidents(driver.app)
    assert code == "UNEXPECTED_CARD" and "no card was asked for" in message
    driver.bets_closed("t1", coup_id)
    driver.pump()  # the shoe deals the coup: the forged card played no part
    [resolved] = driver.of_type(CoupResolved)
    genuine = [m.card for m, _ in driver.shoe_events if isinstance(m, CardDrawn)]
    assert sorted([*resolved.player_cards, *resolved.banker_cards]) == sorted(genuine)
    coup = driver.app.get_coup("t1", coup_id)
    assert coup is not None and coup.dealt == genuine


def test_cards_out_of_the_shoes_order_are_refused_and_a_second_card_at_a_position_conflicts() -> (
    None
):
    app = DealingApplication(env=POPO)
    driver = Driver(app, SilentDraws([list(ORDER)]), settlement=False)
    app.handle(open_table(betting_window_ms=600_000))
    driver.pump()
    coup_id = driver.of_type(BettingOpened)[-1].coup_id
    app.handle(CloseBetting(table_id="t1", coup_id=coup_id))
    driver.pump()
    driver.bets_closed("t1", coup_id)
    driver.pump()
    [request] = driver.of_type(DrawCards)  # as an insider who reads shoe-commands would
    [burned] = [m for m, _ in driver.shoe_events if isinstance(m, CardsBurned)]
    floor = burned.next_position
    other = "AS" if ORDER[floor] != "AS" else "AH"
    forge(driver, coup_id, request.request_id, floor - 1, ORDER[floor - 1])  # burned already
    forge(driver, coup_id, request.request_id, floor, ORDER[floor])  # the genuine first card
    forge(driver, coup_id, request.request_id, floor + 2, ORDER[floor + 2])  # skips one
    forge(driver, coup_id, request.request_id, floor, other)  # another card at a dealt place
    forge(driver, coup_id, request.request_id, floor, ORDER[floor])  # a copy: nothing
    codes = [code for code, _ in incidents(app)]
    assert codes == ["UNEXPECTED_CARD", "UNEXPECTED_CARD", "CONFLICTING_CARD"]
    coup = app.get_coup("t1", coup_id)
    assert coup is not None and coup.positions == [floor] and coup.dealt == [ORDER[floor]]


def test_a_card_for_a_coup_that_does_not_exist_is_refused() -> None:
    driver, _ = closed_table()
    forge(driver, "t1.coup-99", "t1.coup-99.draw-1.0123456789abcdef", 20, "KS")
    assert [code for code, _ in incidents(driver.app)] == ["UNEXPECTED_CARD"]
