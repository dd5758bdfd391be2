"""Several processes of one service share its partitions (PB_PARTITIONED): scale-out.

Real Kafka, the three real services as subprocesses, each partitioned (a cell per partition it
owns, each cell with its own store: services/shared/platform/cells/partitioned.py), on topics of 3
partitions, with tables on every partition. A second settlement process joins mid-shoe (the
group hands it some partitions: their cells stop in the first process and start in the
second, on the same stores), then the first is SIGKILLed during a coup (the second takes its
partitions once the group's session times out), then it is started again (partitions are
handed back). Every accepted bet is settled exactly once, with the amounts the test's ledger
recomputes from the cards.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import urllib.error
import urllib.request
import uuid

import pytest

from contracts import BettingOpened, Message
from services.dev.demo.orchestrator import DemoConfig, TableDriver
from services.dev.demo.processes import ServiceProcess, ServiceSettings
from services.dev.demo.system import LocalSystem
from services.dev.infra.ports import free_port
from services.shared.platform.kafka import table_partition
from tests.e2e.helpers import another, assert_settled_once, wait

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PARTITIONS = 3


@pytest.fixture
def system_settings(system_settings: ServiceSettings) -> ServiceSettings:
    extra = {
        **system_settings.extra,
        "PB_PARTITIONED": "yes",
        "PB_HTTP_PORT_SETTLEMENT": str(free_port()),  # the first process's; later ones: none
    }
    return dataclasses.replace(system_settings, extra=extra)


def get(port: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def driver_on_every_partition(system: LocalSystem, tables: int) -> TableDriver:
    """A table driver whose tables cover every partition (run ids tried in a fixed order)."""
    config = DemoConfig(tables=tables, bettors=10, betting_window_ms=500, seed=7)
    for attempt in range(1000):
        run_id = f"{uuid.UUID(int=attempt).hex[-10:]}"
        ids = [f"demo-{run_id}-{number}" for number in range(1, tables + 1)]
        if {table_partition(table_id, PARTITIONS) for table_id in ids} == set(range(PARTITIONS)):
            driver = TableDriver(config, system, run_id)
            system.reactors.append(driver.react)
            return driver
    raise AssertionError("no run id puts a table on every partition")


def owned(process: ServiceProcess) -> list[str]:
    return [
        line for line in process.log_text_since_start().splitlines() if "owns partitions" in line
    ]


def share(process: ServiceProcess) -> str | None:
    """The partitions the process says it owns now (e.g. ``[0, 2]``), or None yet."""
    lines = owned(process)
    return lines[-1].split("owns partitions ")[1] if lines else None


async def more_coups(system: LocalSystem, count: int, after: str) -> None:
    """Wait until ``count`` more coups are resolved than now."""
    target = system.ledger.summary().coups_resolved + count
    await wait(
        system,
        lambda: system.ledger.summary().coups_resolved >= target,
        150,
        f"{count} more coups resolved after {after}",
    )


@pytest.mark.timeout(420)
async def test_settlement_processes_share_partitions_hand_them_over_and_survive_a_kill(
    system: LocalSystem,
) -> None:
    first = system.services["settlement"]
    assert "owns partitions [0, 1, 2]" in first.log_text_since_start()
    # One set of endpoints for the process: /ready checks every cell, /metrics labels them.
    port = system.settings.extra["PB_HTTP_PORT_SETTLEMENT"]
    status, body = await asyncio.to_thread(get, port, "/ready")
    assert status == 200, body
    assert json.loads(body)["checks"]["cells"] == "ok"
    status, body = await asyncio.to_thread(get, port, "/metrics")
    assert status == 200
    for partition in range(PARTITIONS):
        assert f'pb_service_up{{cell="{partition}",service="settlement"}} 1.0' in body
    # An unpartitioned settlement (a replica without PB_PARTITIONED) waits: the partitioned
    # processes hold its store's lease shared, so the two modes never judge the same bets.
    mixed = another(system, "settlement", "settlement-whole", {"PB_PARTITIONED": "no"})
    await wait(
        system,
        lambda: "standby: another instance writes" in mixed.log_text_since_start(),
        60,
        "an unpartitioned settlement to wait beside the partitioned one",
    )

    driver = driver_on_every_partition(system, tables=4)
    ledger = system.ledger
    await driver.start()
    await wait(system, lambda: ledger.summary().coups_resolved >= 4, 120, "4 coups resolved")
    assert "settlement: serving" not in mixed.log_text_since_start()
    mixed.kill()
    system.services.pop("settlement-whole")

    # A second process joins mid-shoe: the group gives it a share of the partitions.
    second = another(system, "settlement", "settlement-2")
    await wait(
        system,
        lambda: (
            ": serving" in second.log_text_since_start()
            and any("owns partitions [" in line and "none" not in line for line in owned(second))
        ),
        120,
        "the second settlement to own and serve partitions",
    )
    moved = owned(second)[-1]
    await wait(
        system,
        lambda: "moved away: stopping its cell" in first.log_text_since_start(),
        60,
        "the first settlement to hand its cells over",
    )

    # Kill the first during a coup: the second takes every partition.
    killed: list[int] = []
    resolved_before = ledger.summary().coups_resolved

    async def kill_mid_coup(message: Message) -> None:
        if killed or not isinstance(message, BettingOpened):
            return
        if ledger.summary().coups_resolved < resolved_before + 3:
            return
        system.kill("settlement")
        system.services.pop("settlement")  # dead on purpose, until restarted
        killed.append(len(ledger.unanswered()))

    system.reactors.append(kill_mid_coup)
    await wait(system, lambda: killed, 120, "a coup under way to kill the first during")
    await wait(
        system,
        lambda: "owns partitions [0, 1, 2]" in second.log_text_since_start(),
        90,
        "the second settlement to take every partition after the kill",
    )
    await more_coups(system, 4, "the kill")

    # The first comes back: partitions are handed back to it.
    system.services["settlement"] = first
    first.start()
    await system.wait_ready(["settlement"], 120)
    await wait(
        system,
        lambda: any("none" not in line for line in owned(first)),
        90,
        "the restarted settlement to own partitions again",
    )
    await more_coups(system, 3, "the hand-back")
    await driver.close_all("test over")
    await wait(system, driver.drained, 120, "every bet answered and settled")

    assert_settled_once(system)
    assert killed[0] > 0, "settlement was killed with no bet in flight"
    assert "owns partitions [0, 1, 2]" not in moved, "the joining process got no share"


@pytest.mark.timeout(420)
async def test_three_settlements_and_two_of_each_other_service_share_the_tables_and_a_dealing_kill(
    system: LocalSystem,
) -> None:
    """Three settlement processes (one partition each), two dealing and two shoe processes;
    a dealing process is SIGKILLed during a coup: its partitions' betting clocks and coups go
    on in the other once the group's session times out."""
    for service, name in (
        ("settlement", "settlement-2"),
        ("settlement", "settlement-3"),
        ("dealing", "dealing-2"),
        ("shoe", "shoe-2"),
    ):
        another(system, service, name)
    await system.wait_ready(["settlement-2", "settlement-3", "dealing-2", "shoe-2"], 120)
    settlements = [system.services[n] for n in ("settlement", "settlement-2", "settlement-3")]
    await wait(
        system,
        lambda: sorted(str(share(process)) for process in settlements) == ["[0]", "[1]", "[2]"],
        120,
        "each settlement process to own one partition",
    )
    driver = driver_on_every_partition(system, tables=4)
    ledger = system.ledger
    await driver.start()
    await wait(system, lambda: ledger.summary().coups_resolved >= 4, 120, "4 coups resolved")

    killed: list[int] = []

    async def kill_dealing_mid_coup(message: Message) -> None:
        if killed or not isinstance(message, BettingOpened):
            return
        system.kill("dealing")
        system.services.pop("dealing")
        killed.append(len(ledger.unanswered()))

    system.reactors.append(kill_dealing_mid_coup)
    await wait(system, lambda: killed, 120, "a coup under way to kill a dealing during")
    survivor = system.services["dealing-2"]
    await wait(
        system,
        lambda: "owns partitions [0, 1, 2]" in survivor.log_text_since_start(),
        90,
        "the other dealing to take every partition",
    )
    per_table = {table_id: run.coups_resolved for table_id, run in driver.tables.items()}
    await wait(
        system,
        lambda: all(run.coups_resolved >= per_table[t] + 2 for t, run in driver.tables.items()),
        150,
        "2 more coups resolved on every table (every partition) after the kill",
    )
    await driver.close_all("test over")
    await wait(system, driver.drained, 120, "every bet answered and settled")

    assert_settled_once(system)
