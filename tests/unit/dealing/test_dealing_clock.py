"""The service's betting clock closes betting when the window ends, from the app's state."""

from __future__ import annotations

import asyncio

from contracts import BettingClosed
from services.dealing.application import DealingApplication
from services.dealing.service import betting_clock, build_service
from services.shared.platform.host import ServiceContext
from services.shared.platform.settings import Settings
from services.shared.platform.store import AppWorker
from tests.unit.dealing.harness import Driver, ScriptedShoe, open_table, shuffled_order
from tests.unit.settlement.harness import POPO


async def test_the_betting_clock_closes_expired_windows() -> None:
    app = DealingApplication(env=POPO)
    driver = Driver(app, ScriptedShoe([shuffled_order(1, seed=1)]))
    app.handle(open_table(betting_window_ms=100))
    driver.pump()
    worker = AppWorker("dealing-test")
    stopping = asyncio.Event()
    ctx = ServiceContext(app, Settings.from_env("dealing", {}), worker, stopping)
    clock = asyncio.create_task(betting_clock(ctx))
    try:
        for _ in range(100):
            await asyncio.sleep(0.02)
            if driver.pump() and driver.of_type(BettingClosed):
                break
        assert len(driver.of_type(BettingClosed)) >= 1
    finally:
        stopping.set()
        await asyncio.wait_for(clock, 5)
        worker.shutdown()


def test_the_service_definition_names_dealing() -> None:
    definition = build_service(Settings.from_env("dealing", {})).definition
    assert definition.name == "dealing"
    assert [task.__name__ for task in definition.tasks] == ["betting_clock"]
