"""A whole shoe played by a crowd, and each service killed mid-coup: nothing lost, nothing twice.

Real Kafka, the three real services as subprocesses, SQLite and PostgreSQL. Every amount is
recomputed by the test's ledger from the cards in CoupResolved, independently of settlement.
"""

from __future__ import annotations

import asyncio

import pytest

from contracts import BetAccepted, BettingOpened, CardDealt, CardDrawn, Message
from services.dev.demo.system import LocalSystem
from tests.e2e.helpers import assert_books_clean, crowd_driver, wait

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.mark.timeout(300)
async def test_a_whole_shoe_with_many_bettors_settles_every_accepted_bet_exactly_once(
    system: LocalSystem,
) -> None:
    driver = crowd_driver(system, bettors=40, wildness=0.3, betting_window_ms=400)
    await driver.start()
    ledger = system.ledger

    await wait(system, lambda: any(s.closed for s in ledger.shoes.values()), 200, "a whole shoe")
    await driver.close_all("test over")
    await wait(system, driver.drained, 90, "every bet answered and settled")

    assert_books_clean(ledger)
    summary = ledger.summary()
    assert summary.coups_resolved >= 5
    assert summary.bets_accepted >= 100
    assert summary.bets_settled == summary.bets_accepted
    assert summary.rejected_total > 0  # the wild bets
    coups_with_bets = {b.accepted.coup_id for b in ledger.bets.values() if b.accepted}
    settled_coups = {c.coup_id for c in ledger.coups.values() if c.settled}
    assert coups_with_bets <= settled_coups  # each with a CoupSettled that adds up
    assert not driver.dead_letters


@pytest.mark.timeout(300)
@pytest.mark.parametrize("service", ["shoe", "dealing", "settlement"])
async def test_a_service_killed_mid_coup_comes_back_and_nothing_is_lost_or_settled_twice(
    system: LocalSystem, service: str
) -> None:
    driver = crowd_driver(system, bettors=15, betting_window_ms=500)
    ledger = system.ledger
    killed_at: list[str] = []
    in_flight: list[int] = []  # bets sent but not answered when the service was killed
    kill_coup = 2

    async def kill_mid_coup(message: Message) -> None:
        # settlement: right after the coup's bets went out (the driver reacted first), so bets
        # are in flight; shoe and dealing: while the coup is dealt (cards asked, drawn, dealt).
        trigger = BettingOpened if service == "settlement" else CardDealt
        if killed_at or not isinstance(message, trigger):
            return
        coup = ledger.coups.get((message.table_id, message.coup_id))
        if coup is None or coup.coup_number != kill_coup:
            return
        assert coup.resolved is None
        system.kill(service)
        killed_at.append(message.type)
        in_flight.append(len(ledger.unanswered()))

    system.reactors.append(kill_mid_coup)
    await driver.start()
    await wait(system, lambda: killed_at, 90, f"coup {kill_coup} to be under way")
    await asyncio.sleep(1.0)
    await system.restart(service)

    resolved_after = kill_coup + 3
    await wait(
        system,
        lambda: ledger.summary().coups_resolved >= resolved_after,
        150,
        f"{resolved_after} coups resolved after {service} restarted",
    )
    await driver.close_all("test over")
    await wait(system, driver.drained, 90, "every bet answered and settled")

    assert_books_clean(ledger)
    numbers = sorted(c.resolved.coup_number for c in ledger.coups.values() if c.resolved)
    assert numbers[:resolved_after] == list(range(1, resolved_after + 1))  # the shoe went on
    assert ledger.summary().bets_settled == ledger.summary().bets_accepted > 0
    accepted_twice = [
        bet_id
        for bet_id in {m.bet_id for m in system.seen(BetAccepted)}
        if len({m.event_id for m in system.seen(BetAccepted) if m.bet_id == bet_id}) > 1
    ]
    assert not accepted_twice
    # No card handed out twice: one CardDrawn event per shoe position, one CardDealt per card.
    drawn: dict[tuple[str, int], set[object]] = {}
    for event in system.seen(CardDrawn):
        drawn.setdefault((event.shoe_id, event.position), set()).add(event.event_id)
    assert all(len(ids) == 1 for ids in drawn.values())
    dealt: dict[tuple[str, int], set[object]] = {}
    for dealt_card in system.seen(CardDealt):
        key = (dealt_card.shoe_id, dealt_card.position)
        dealt.setdefault(key, set()).add(dealt_card.event_id)
    assert all(len(ids) == 1 for ids in dealt.values())
    assert system.services[service].starts == 2
    if service == "settlement":
        assert in_flight[0] > 0, "settlement was killed with no bet in flight"
