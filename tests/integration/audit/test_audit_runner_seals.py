"""Every service seals its store periodically and on a clean shutdown (KafkaService wiring)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from services.shared.platform.host import KafkaService, ServiceDefinition
from services.shared.platform.settings import Settings
from services.shared.platform.store import SEALED_TOPIC
from services.tools.audit.auditor import audit
from services.tools.audit.seals import expand_runs
from services.tools.audit.stores import SqliteStore
from tests.integration.audit.helpers import TallyApp


def _definition() -> ServiceDefinition[TallyApp]:
    return ServiceDefinition(name="tally", application=lambda env: TallyApp(env=env))


def _seals(path: Path) -> list[dict[str, Any]]:
    import sqlite3

    connection = sqlite3.connect(path)
    rows = connection.execute(
        "SELECT state FROM stored_events WHERE topic = ? ORDER BY rowid", (SEALED_TOPIC,)
    ).fetchall()
    connection.close()
    return [json.loads(row[0]) for row in rows]


async def test_a_service_seals_while_running_and_on_shutdown(
    tmp_path: Path,
) -> None:
    env = {"PB_SEAL_INTERVAL": "0.1"}
    settings = Settings.from_env("tally", env, data_dir=tmp_path, persistence="sqlite")
    async with KafkaService(_definition(), settings, create_topics=False) as host:
        await host.worker.call(host.app.add, 5)
        deadline = asyncio.get_running_loop().time() + 30
        while not _seals(settings.sqlite_path):  # the periodic sealer (every 0.1 s) seals it
            assert asyncio.get_running_loop().time() < deadline, "no periodic seal in 30 s"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # three more intervals: nothing new, so no second seal
        assert len(_seals(settings.sqlite_path)) == 1  # the periodic sealer, once
        await host.worker.call(host.app.add, 3)
    seals = _seals(settings.sqlite_path)
    assert len(seals) == 2  # and once more when stopping
    assert seals[1]["previous_digest"] == seals[0]["digest"]
    covered = expand_runs(seals[0]["ids"]) + expand_runs(seals[1]["ids"])
    assert covered == list(range(1, seals[1]["to_id"] + 1))
    store = SqliteStore("tally", settings.sqlite_path)
    try:
        report = audit({"settlement": store})  # any store name: only the seals are checked
    finally:
        store.close()
    assert report.findings == []
    assert report.seals["settlement"].seals == 2
