"""A second instance of a service is a standby: it writes nothing until the writer dies.

Real Kafka, the three real services as subprocesses, SQLite and PostgreSQL, plus a second
`punto-banco serve settlement` on the same settings and store. Without the writer lease
(services/shared/platform/store/lease.py) the two would both join the consumer group and
append to one store. Here the second waits, in no group and with no store opened, until the
first is SIGKILLed mid-coup; it then takes over and every accepted bet is settled exactly
once, with the amounts the test's ledger recomputes from the cards.
"""

from __future__ import annotations

import pytest

from contracts import BettingOpened, Message
from services.dev.demo.system import LocalSystem
from tests.e2e.helpers import another, assert_settled_once, crowd_driver, wait

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.mark.timeout(300)
async def test_a_second_settlement_waits_as_a_standby_and_takes_over_when_the_first_dies(
    system: LocalSystem,
) -> None:
    standby = another(system, "settlement", "settlement-standby")
    await wait(
        system,
        lambda: "standby: another instance writes" in standby.log_text_since_start(),
        60,
        "the second settlement to wait as a standby",
    )
    assert "settlement: serving" not in standby.log_text_since_start()

    driver = crowd_driver(system, bettors=15, betting_window_ms=500)
    ledger = system.ledger
    killed: list[int] = []
    kill_coup = 2

    async def kill_mid_coup(message: Message) -> None:
        if killed or not isinstance(message, BettingOpened):
            return
        coup = ledger.coups.get((message.table_id, message.coup_id))
        if coup is None or coup.coup_number != kill_coup:
            return
        # The standby has written nothing so far: every answer came from the first instance.
        assert "writer lease of" not in standby.log_text_since_start()
        system.kill("settlement")
        system.services["settlement"] = system.services.pop("settlement-standby")
        killed.append(len(ledger.unanswered()))

    system.reactors.append(kill_mid_coup)
    await driver.start()
    await wait(system, lambda: killed, 90, f"coup {kill_coup} to be under way")
    await wait(
        system,
        lambda: "settlement: serving" in standby.log_text_since_start(),
        90,
        "the standby to take the writer lease and serve",
    )
    assert "writer lease of" in standby.log_text_since_start()

    resolved_after = kill_coup + 3
    await wait(
        system,
        lambda: ledger.summary().coups_resolved >= resolved_after,
        150,
        f"{resolved_after} coups resolved after the standby took over",
    )
    await driver.close_all("test over")
    await wait(system, driver.drained, 90, "every bet answered and settled")

    assert_settled_once(system)
    assert killed[0] > 0, "settlement was killed with no bet in flight"
