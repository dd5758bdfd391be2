"""The relay loses nothing when its broker is briefly unreachable.

Uses a broker of its own (temporary folder, free port), stopped and started again on the
same port while the relay runs, so the session's broker is not disturbed.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts import TABLE_EVENTS
from services.dev.infra.common import InfraError
from services.dev.infra.kafka import KafkaBroker
from services.dev.infra.programs import checked_java
from services.shared.platform.kafka import ensure_topics
from services.shared.platform.relay import OutboxRelay
from services.shared.platform.settings import KafkaAuth
from services.shared.platform.store import open_application
from tests.integration.platform.kafka_tools import Received, read_topic, settings_for
from tests.unit.platform.fakes import Counter, CounterApp, counter_messages

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[KafkaBroker]:
    try:
        checked_java()
    except InfraError as error:
        pytest.skip(f"no local Java for a broker of our own: {error.problem}")
    # An outage, not logins: the PLAINTEXT broker (PB_KAFKA_AUTH=none) is enough.
    broker = KafkaBroker(home=tmp_path / "kafka", preferred_port=None, heap="512m", auth="none")
    try:
        yield broker
    finally:
        broker.stop()


def add(app: CounterApp, counters: list[Counter], start: int, count: int) -> None:
    for amount in range(start, start + count):
        for counter in counters:
            counter.add(table_id=counter.table_id, amount=amount)
    app.save(*counters)


def amounts_per_table(records: list[Received]) -> dict[bytes | None, list[int]]:
    """Each table's amounts in partition order, a republished stretch dropped as a consumer
    tracking by position would (nothing may be missing: the amounts go 0, 1, 2, ...)."""
    seen: dict[bytes | None, list[int]] = defaultdict(list)
    last: dict[int, tuple[int, int]] = {}
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        position = (
            int(record.headers["pb-notification-id"]),
            int(record.headers["pb-message-index"]),
        )
        if record.partition in last and position <= last[record.partition]:
            continue  # a duplicate
        last[record.partition] = position
        message = record.message(TABLE_EVENTS)
        seen[record.key].append(int(getattr(message, "reason", "-1")))
    return seen


async def test_a_broker_briefly_unreachable_loses_nothing(
    own_broker: KafkaBroker, tmp_path: Path
) -> None:
    bootstrap = await asyncio.to_thread(own_broker.start)
    settings = settings_for(
        "counter", bootstrap, data_dir=tmp_path / "store", kafka_auth=KafkaAuth()
    )
    await ensure_topics(settings)
    app = open_application(lambda env: CounterApp(env=env), settings)
    counters = [Counter(table_id=f"t{n}") for n in range(6)]
    relay = OutboxRelay(app, settings, counter_messages)
    await relay.start()
    stopping = asyncio.Event()
    running = asyncio.create_task(relay.run(stopping))
    try:
        add(app, counters, 0, 20)
        before = await read_topic(settings, TABLE_EVENTS, lambda r: len(r) >= 120)
        assert len(before) == 120

        assert await asyncio.to_thread(own_broker.stop)
        add(app, counters, 20, 20)  # saved while the broker is down
        await asyncio.sleep(3)  # the relay tries meanwhile
        newest = app.process_recorder.max_notification_id()
        assert newest is not None and app.tracked_position("relay:counter") < newest
        assert not running.done()
        assert await asyncio.to_thread(own_broker.start) == bootstrap  # the same port again
        add(app, counters, 40, 20)  # and after

        records = await read_topic(settings, TABLE_EVENTS, lambda r: len(r) >= 360, timeout=120)
        seen = amounts_per_table(records)
        assert set(seen) == {c.table_id.encode() for c in counters}
        for amounts in seen.values():
            assert amounts == list(range(60))  # every one, in order
        for _ in range(100):  # the position catches up once everything is acknowledged
            if app.tracked_position("relay:counter") == app.process_recorder.max_notification_id():
                break
            await asyncio.sleep(0.1)
        assert app.tracked_position("relay:counter") == app.process_recorder.max_notification_id()
        assert relay.quarantined == 0
    finally:
        stopping.set()
        await asyncio.wait_for(running, 60)
        await relay.stop()
        app.close()
