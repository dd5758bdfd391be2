"""A restarted dealing Application (same store) carries on where the first one stopped."""

from __future__ import annotations

from typing import Any, ClassVar

from contracts import BettingOpened, CardDealt, CoupResolved, DrawCards, ShuffleShoe
from services.dealing.application import DealingApplication
from services.dealing.domain import ShoeState, Table, TableStatus
from services.dealing.messages import to_messages
from services.shared.rules.cards import Card
from services.shared.rules.tableau import resolve_coup
from tests.unit.dealing.harness import Driver, ScriptedShoe, open_table, shuffled_order


def test_restart_in_betting_and_mid_deal_carries_on(store_env: dict[str, str]) -> None:
    first = DealingApplication(env=store_env)
    driver = Driver(first, ScriptedShoe([shuffled_order(1, seed=21), shuffled_order(1, seed=22)]))
    first.handle(open_table(betting_window_ms=30_000))
    driver.pump()
    for _ in range(3):
        driver.close_betting_and_pump()
    waiting = first.betting_deadlines()
    assert len(waiting) == 1
    first.close()

    # Restart while the fourth coup takes bets: the betting clock re-arms from the store.
    second = DealingApplication(env=store_env)
    driver.app = second
    assert second.betting_deadlines() == waiting
    assert second.table_ids() == ["t1"]
    # Close betting: no cards before settlement's BetsClosed; crash while waiting for it.
    second.close_expired_betting(waiting[0].closes_at)

    def draws(app: DealingApplication) -> list[DrawCards]:
        notifications = app.recorder.select_notifications(driver.position + 1, 100)
        return [
            m
            for n in notifications
            for m in to_messages(app.mapper.to_domain_event(n))
            if isinstance(m, DrawCards)
        ]

    assert draws(second) == []
    second.close()

    # Restarted, it still waits (derived from the store); BetsClosed (twice) -> ONE DrawCards,
    # then a crash before the shoe's answer is handled.
    waiting_app = DealingApplication(env=store_env)
    driver.app = waiting_app
    assert draws(waiting_app) == []
    driver.bets_closed("t1", waiting[0].coup_id)
    driver.bets_closed("t1", waiting[0].coup_id)
    assert len(draws(waiting_app)) == 1
    waiting_app.close()

    third = DealingApplication(env=store_env)
    driver.app = third
    driver.pump()  # the relay resumes; the shoe answers; the coup is dealt and resolved
    for message, tracking in driver.shoe_events[-4:]:
        third.handle(message, tracking)  # redelivered after the crash: no second effect
    for _ in range(20):
        driver.close_betting_and_pump()
        if len(driver.of_type(ShuffleShoe)) == 2:
            break
    resolved = [m for m in driver.of_type(CoupResolved) if isinstance(m, CoupResolved)]
    assert len(resolved) >= 5
    assert len({m.coup_id for m in resolved}) == len(resolved)
    for coup in resolved:
        dealt = [m for m in driver.of_type(CardDealt) if isinstance(m, CardDealt)]
        cards = [Card.parse(m.card) for m in dealt if m.coup_id == coup.coup_id]
        result = resolve_coup(cards)
        assert result.outcome.value == coup.outcome
        assert result.cards_used == len(cards)
    opened = [m for m in driver.of_type(BettingOpened) if isinstance(m, BettingOpened)]
    assert [m.coup_number for m in opened] == list(range(1, len(opened) + 1))
    assert len(driver.of_type(ShuffleShoe)) == 2
    third.close()


class OftenSnapshotted(DealingApplication):
    snapshotting_intervals: ClassVar[dict[type[Any], int]] = {Table: 5}


def test_a_table_restored_from_a_snapshot_is_the_same(store_env: dict[str, str]) -> None:
    first = OftenSnapshotted(env=store_env)
    driver = Driver(first, ScriptedShoe([shuffled_order(1, seed=s) for s in range(4)]))
    first.handle(open_table())
    driver.pump()
    for _ in range(12):
        driver.close_betting_and_pump()
    before = first.get_table("t1")
    assert before is not None and first.snapshots is not None
    assert list(first.snapshots.get(before.id))  # snapshots were taken
    state = dict(vars(before))
    first.close()

    second = OftenSnapshotted(env=store_env)
    after = second.get_table("t1")
    assert after is not None
    assert vars(after) == state
    assert after.status is TableStatus.OPEN and isinstance(after.shoe_state, ShoeState)
    driver.app = second
    driver.close_betting_and_pump()  # and play goes on
    second.close()
