"""The outbox relay against real Kafka and real SQLite / PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from contracts import TABLE_EVENTS, TableClosed
from services.shared.platform.kafka import ensure_topics
from services.shared.platform.relay import OutboxRelay
from services.shared.platform.settings import Settings
from services.shared.platform.store import open_application
from tests.integration.platform.kafka_tools import Received, read_topic, settings_for
from tests.unit.platform.fakes import Counter, CounterApp, counter_messages

pytestmark = [pytest.mark.kafka]

ROOT = Path(__file__).resolve().parents[3]


def fill(app: CounterApp, tables: int, adds: int) -> None:
    for t in range(tables):
        counter = Counter(table_id=f"t{t}")
        for i in range(adds):
            counter.add(table_id=f"t{t}", amount=i)
        app.save(counter)


def notification_ids(records: list[Received]) -> list[int]:
    return [int(r.headers["pb-notification-id"]) for r in records]


def check_order(records: list[Received]) -> None:
    """Per partition, notification ids never go down except when republished from a position."""
    per_table: dict[bytes | None, list[int]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        message = r.message(TABLE_EVENTS)
        assert isinstance(message, TableClosed)
        per_table[r.key].append(int(message.reason))
    for amounts in per_table.values():
        # each table's adds arrive in order; a republish restarts at an earlier amount
        deduped = list(dict.fromkeys(amounts))
        assert deduped == sorted(deduped)


class WatchedRelay(OutboxRelay):
    """An :class:`OutboxRelay` that counts the times it found nothing to publish (it then
    waits for a save or its next poll), and notes whether it ever published while it said it
    was idle (its process collects garbage then)."""

    found_nothing = 0
    idle_while_publishing = False

    async def publish_pending(self) -> int:
        self.idle_while_publishing = self.idle_while_publishing or self.idle
        count = await super().publish_pending()
        if count == 0:
            self.found_nothing += 1
        return count


async def test_relay_publishes_every_event_in_order_with_headers(
    kafka_bootstrap: str, tmp_path: Path, store_env: dict[str, str] | None
) -> None:
    # The relay polls its store only every ``poll`` seconds: an event saved while it waits
    # is published before then only if the save listener wakes it.
    poll = 120.0
    settings = settings_for(
        "counter",
        kafka_bootstrap,
        data_dir=tmp_path,
        postgres_env=store_env,
        relay_poll_interval=poll,
    )
    app = open_application(lambda env: CounterApp(env=env), settings)
    fill(app, tables=5, adds=40)
    relay = WatchedRelay(app, settings, counter_messages)
    await relay.start()
    stopping = asyncio.Event()
    running_since = time.monotonic()  # no poll's timeout can end before running_since + poll
    task = asyncio.create_task(relay.run(stopping))
    try:
        records = await read_topic(settings, TABLE_EVENTS, lambda r: len(r) >= 200)
        assert len(records) == 200
        check_order(records)
        assert {r.headers["pb-source"] for r in records} == {b"counter"}
        # the message type, for readers that skip what they do not need unparsed
        assert {r.headers["pb-type"] for r in records} == {
            json.loads(r.value)["type"].encode() for r in records
        }
        # an event saved while it waits is published without waiting for the next poll (the
        # save listener wakes it)
        deadline = time.monotonic() + 30
        while not (relay.found_nothing and relay.idle):  # all published: it waits, idle
            assert time.monotonic() < deadline, "the relay never found its outbox empty"
            await asyncio.sleep(0.05)
        counter: Counter = app.repository.get(Counter.create_id("t0"))
        counter.add(table_id="t0", amount=999)
        app.save(counter)
        more = await read_topic(settings, TABLE_EVENTS, lambda r: len(r) >= 201, timeout=60)
        assert len(more) == 201
        assert time.monotonic() - running_since < poll  # so no poll published it
        assert not relay.idle_while_publishing
    finally:
        stopping.set()
        await task
        await relay.stop()
        app.close()
    assert app is not None


async def test_relay_killed_mid_batch_resumes_without_losing_events(
    kafka_bootstrap: str, tmp_path: Path, store_env: dict[str, str] | None
) -> None:
    settings = settings_for(
        "counter", kafka_bootstrap, data_dir=tmp_path, postgres_env=store_env, relay_batch_size=100
    )
    await ensure_topics(settings)  # the broker creates no topic on use
    app = open_application(lambda env: CounterApp(env=env), settings)
    fill(app, tables=40, adds=250)  # 10,000 messages
    total = 40 * 250
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "PB_TOPIC_PREFIX": settings.topic_prefix,
        "PB_POSTGRES_SCHEMA_PREFIX": settings.postgres_schema_prefix,
        "PB_DATA_DIR": str(tmp_path),
        "PB_PERSISTENCE": settings.persistence,
        "PB_RELAY_BATCH_SIZE": "100",
        **settings.kafka_auth.env(),  # the child logs in as the test's process does
        **(store_env or {}),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.platform.relay_process"], cwd=ROOT, env=env
    )
    try:
        partial = await read_topic(settings, TABLE_EVENTS, lambda r: len(r) >= 1500, timeout=60)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert len(partial) >= 1500
    killed_at = app.tracked_position("relay:counter")
    last_id = app.process_recorder.max_notification_id()
    assert last_id is not None
    assert killed_at < last_id, "the relay finished before the kill"

    relay = OutboxRelay(app, Settings.from_env("counter", env), counter_messages)
    await relay.start()
    assert relay.position == killed_at
    await relay.publish_pending()
    await relay.stop()
    records = await read_topic(
        settings,
        TABLE_EVENTS,
        lambda r: len(set(notification_ids(r))) >= total,
        timeout=60,
    )
    ids = notification_ids(records)
    expected = {
        n.id
        for n in app.process_recorder.select_notifications(start=1, limit=10 * total)
        if n.topic.endswith("Added")
    }
    assert set(ids) == expected  # nothing lost
    assert len(ids) >= total  # duplicates allowed
    check_order(records)
    app.close()


async def test_relay_publishes_a_coup_sized_fan_out_quickly(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """One stored event -> 10,000 messages (a busy coup's settlement); prints the time taken."""
    from tests.unit.platform.test_platform_relay import to_messages as fan_out

    settings = settings_for("counter", kafka_bootstrap, data_dir=tmp_path)
    await ensure_topics(settings)  # the broker creates no topic on use
    app = open_application(lambda env: CounterApp(env=env), settings)
    relay = OutboxRelay(app, settings, fan_out)
    await relay.start()
    counter = Counter(table_id="t1")
    app.save(counter)
    await relay.publish_pending()  # warm up: connections, metadata
    counter.add(table_id="t1", amount=10_000)
    app.save(counter)
    started = time.perf_counter()
    assert await relay.publish_pending() == 10_000
    elapsed = time.perf_counter() - started
    await relay.stop()
    app.close()
    print(f"relay: 10,000 messages of one stored event published and acked in {elapsed:.2f}s")
