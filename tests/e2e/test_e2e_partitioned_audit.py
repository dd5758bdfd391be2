"""The audit of a partitioned deployment the real services wrote (PB_PARTITIONED): every
partition's stores pass, each matched with its own cells' signed seal anchors on Kafka.

Real Kafka, the three real services as subprocesses, each partitioned (a cell per partition,
each with its own store and its own seal anchors), tables on every partition; after a clean
stop (the last seals anchored), ``punto-banco audit --anchors`` with PB_PARTITIONED=yes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest
from typer.testing import CliRunner

from services.dev.demo.processes import ServiceSettings, service_env, stop_all
from services.dev.demo.system import LocalSystem
from services.dev.infra.kafka_clients import AUDITOR
from services.tools.cli.main import app
from tests import kafka_logins
from tests.e2e.helpers import wait
from tests.e2e.test_e2e_partitioned import PARTITIONS, driver_on_every_partition

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SERVICES = ("shoe", "dealing", "settlement")


@pytest.fixture
def system_settings(system_settings: ServiceSettings) -> ServiceSettings:
    extra = {**system_settings.extra, "PB_PARTITIONED": "yes"}
    return dataclasses.replace(system_settings, extra=extra)


@pytest.mark.timeout(300)
async def test_the_audit_passes_on_every_partition_and_its_own_anchors(
    system: LocalSystem,
) -> None:
    driver = driver_on_every_partition(system, tables=3)
    await driver.start()
    await wait(system, lambda: system.ledger.summary().coups_resolved >= 6, 120, "6 coups")
    await driver.close_all("test over")
    await wait(system, driver.drained, 120, "every bet answered and settled")
    # A clean stop of the services (the last seals anchored); the run's topics stay (the
    # fixture ends the run after the test).
    assert await asyncio.to_thread(stop_all, system.services.values(), 30) == []

    env = {**service_env(system.settings), **kafka_logins.env(AUDITOR)}
    result = await asyncio.to_thread(  # the CLI runs its own event loop
        CliRunner().invoke,
        app,
        ["audit", "--anchors", "--json", "--partitions", str(PARTITIONS), "--allow-warnings"],
        env={**env, "PB_TOPIC_PARTITIONS": None},
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["errors"] == 0, report["findings"]
    assert sorted(report["partitions"]) == [str(n) for n in range(PARTITIONS)]
    names = {f"{s}-p{n}" for s in SERVICES for n in range(PARTITIONS)}
    assert set(report["stores"]) == names
    anchored = report["anchors"]["stores"]
    assert set(anchored) == names
    for name, summary in anchored.items():
        assert summary["matched"] == summary["anchors"] > 0, name
    coups = sum(p["checked"]["coups"] for p in report["partitions"].values())
    assert report["checked"]["coups"] == coups >= 6
