"""Fixtures of the hostile-input tests: the real system with an attacker beside it.

``hostile`` is tests/e2e's ``system`` (the three services as subprocesses on the real broker,
SQLite or PostgreSQL by the ``store`` parameter) as a :class:`HostileSystem`: it also follows
the incidents topic, its attacker writes any record to any of the run's topics, and each
service gets a free loopback HTTP port (``hostile.http``) so a test can read its metrics.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.dev.demo.processes import SERVICES, ServiceSettings
from services.dev.infra.ports import free_port
from tests.e2e.hostile.attacker import HostileSystem


@pytest.fixture
async def hostile(system_settings: ServiceSettings, tmp_path: Path) -> AsyncIterator[HostileSystem]:
    ports = {name: free_port() for name in SERVICES}
    settings = dataclasses.replace(
        system_settings,
        extra={
            **system_settings.extra,
            **{f"PB_HTTP_PORT_{name.upper()}": str(port) for name, port in ports.items()},
        },
    )
    running = HostileSystem(settings, tmp_path / "logs")
    running.http = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    try:
        await running.start(ready_timeout=90)
        yield running
    finally:
        await running.stop(timeout=15)
        for child in running.services.values():
            assert not child.running(), f"{child.name} still running after stop"
