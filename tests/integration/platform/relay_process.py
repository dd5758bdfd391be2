"""Run a Counter relay in its own process until killed (used by the relay crash test).

Usage: python -m tests.integration.platform.relay_process  (settings from the environment)
"""

from __future__ import annotations

import asyncio

from services.shared.platform.relay import OutboxRelay
from services.shared.platform.settings import Settings
from services.shared.platform.store import open_application
from tests.unit.platform.fakes import CounterApp, counter_messages


async def main() -> None:
    settings = Settings.from_env("counter")
    app = open_application(lambda env: CounterApp(env=env), settings)
    relay = OutboxRelay(app, settings, counter_messages)
    await relay.start()
    await relay.run(asyncio.Event())


if __name__ == "__main__":
    asyncio.run(main())
