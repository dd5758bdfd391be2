"""The Application worker: one call at a time, and a call that never returns is reported."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from services.shared.platform.store.application import AppWorker, watch_worker


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_watched_call_running_longer_than_its_bound_is_stuck_until_it_returns() -> None:
    clock = Clock()
    worker = AppWorker("settlement", stuck_after=120.0, clock=clock)
    worker.watching = True
    started, release = threading.Event(), threading.Event()

    def handle_batch() -> str:
        started.set()
        release.wait(30)
        return "done"

    call = asyncio.ensure_future(worker.call(handle_batch))
    assert await asyncio.to_thread(started.wait, 30)
    assert worker.stuck() is None  # just started
    clock.now += 120.0
    assert worker.stuck() is None  # at the bound, not beyond
    clock.now += 1.0
    why = worker.stuck()
    assert why is not None and "handle_batch" in why and "121 s" in why
    release.set()
    assert await call == "done"
    assert worker.stuck() is None  # nothing runs
    worker.shutdown()


async def test_calls_before_the_service_serves_are_not_judged() -> None:
    clock = Clock()
    worker = AppWorker("settlement", stuck_after=1.0, clock=clock)
    started, release = threading.Event(), threading.Event()

    def open_store() -> None:  # a start-up (a migration) may take long
        started.set()
        release.wait(30)

    call = asyncio.ensure_future(worker.call(open_store))
    assert await asyncio.to_thread(started.wait, 30)
    clock.now += 3600.0
    assert worker.stuck() is None
    release.set()
    await call
    worker.shutdown()


async def test_the_watchdog_logs_a_stuck_call_once_and_its_return(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("services.shared.platform.store.application.WATCH_SECONDS", 0.01)
    clock = Clock()
    worker = AppWorker("dealing", stuck_after=10.0, clock=clock)
    worker.watching = True
    started, release = threading.Event(), threading.Event()

    def deal() -> None:
        started.set()
        release.wait(30)

    stopping = asyncio.Event()
    caplog.set_level(logging.WARNING, "services.shared.platform.store.application")
    call = asyncio.ensure_future(worker.call(deal))
    assert await asyncio.to_thread(started.wait, 30)
    clock.now += 11.0
    watchdog = asyncio.ensure_future(watch_worker(worker, stopping))
    for _ in range(500):  # until it has looked a few times
        await asyncio.sleep(0.01)
        if any(r.levelno == logging.ERROR for r in caplog.records):
            break
    await asyncio.sleep(0.05)  # more rounds, still stuck: no second error
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "dealing: the store call" in errors[0].getMessage()
    release.set()
    await call
    for _ in range(500):
        await asyncio.sleep(0.01)
        if any("has returned" in r.getMessage() for r in caplog.records):
            break
    assert any("has returned" in r.getMessage() for r in caplog.records)
    stopping.set()
    await asyncio.wait_for(watchdog, 5)
    worker.shutdown()
