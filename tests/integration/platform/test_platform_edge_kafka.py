"""The FastStream edge on real Kafka: a bad record in a fetch loses nothing, a redelivery after
a crash is absorbed, a handover to a standby instance keeps exactly-once.

The Counter service of test_platform_consumer_kafka: table-commands (CloseTable, tracked by
offset) and table-events (TableClosed from dealing); each message adds its ``reason`` to its
table's counter. FastStream's own parser would fail a whole fetch on one record with a null
or non-UTF-8 header; the platform's subscriber hands the records over raw.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from contracts import DEAD_LETTERS, TABLE_COMMANDS, DeadLetter, decode
from services.shared.platform.host import KafkaService
from services.shared.platform.kafka import client_options
from services.shared.platform.settings import Settings
from tests.integration.platform.kafka_tools import as_admin, read_topic, send_records, settings_for
from tests.integration.platform.test_platform_consumer_kafka import (
    close,
    counter,
    total,
    wait_for,
)

pytestmark = [pytest.mark.kafka]


async def committed(settings: Settings) -> dict[int, int]:
    """The service's committed offsets of table-commands, by partition."""
    admin = AIOKafkaAdminClient(**client_options(as_admin(settings)))
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(settings.consumer_group)
    finally:
        await admin.close()
    topic = settings.topic(TABLE_COMMANDS)
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic}


async def wait_committed(
    settings: Settings, check: Callable[[dict[int, int]], bool], what: str, timeout: float = 60.0
) -> None:
    """Poll :func:`committed` until ``check`` holds: a running service commits its offsets
    last, after the store and its stats, so they may lag what the test has seen."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check(found := await committed(settings)):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"committed offsets never became {what}: last {found}")
        await asyncio.sleep(0.1)


def watch_commits(host: KafkaService[Any], settings: Settings) -> list[tuple[int, int]]:
    """Record, at every offset commit, (offset committed, position in the store then)."""
    subscriber = host.batch_subscriber
    assert subscriber is not None and subscriber.consumer is not None
    kafka = subscriber.consumer
    original = kafka.commit
    seen: list[tuple[int, int]] = []
    consumer = host.consumer
    assert consumer is not None

    async def commit(offsets: dict[TopicPartition, int]) -> None:
        for tp, offset in offsets.items():
            topic_id = consumer.names.topic_ids[tp.topic]
            name = f"{consumer.names.cluster_id}:{tp.topic}:{topic_id}:{tp.partition}"
            seen.append((offset, host.app.tracked_position(name)))
        await original(offsets)

    kafka.commit = commit
    return seen


async def test_a_bad_record_in_a_fetch_loses_nothing(
    kafka_bootstrap: str, tmp_path: Path, store_env: dict[str, str] | None
) -> None:
    settings = settings_for(
        "counter", kafka_bootstrap, data_dir=tmp_path, postgres_env=store_env, topic_partitions=1
    )
    key, one = close("1")
    _key, two = close("20")
    # Written before the service starts: one partition, one fetch.
    await send_records(
        settings,
        TABLE_COMMANDS,
        [
            (key, one, []),
            (key, b"\xff not json", []),  # undecodable
            (key, two, [("x-trace", b"\xff\xfe"), ("x-empty", None)]),  # headers FastStream's
            (key, None, []),  # parser cannot read; no value at all
            (key, close("300")[1], [("pb-source", b"\xff")]),  # pb-* ignored on this topic
        ],
    )
    async with counter(settings) as host:
        consumer = host.consumer
        assert consumer is not None
        await wait_for(lambda: total(host.app) == 321)
        await wait_for(lambda: consumer.stats.dead_letters == 2)
        await wait_for(lambda: consumer.stats.batches >= 1)  # counted after the store commit
        await asyncio.sleep(0.5)
        assert total(host.app) == 321  # each valid record once
        assert consumer.stats.handled == 3 and consumer.stats.batches == 1  # one fetch
        await wait_committed(settings, lambda found: found == {0: 5}, "{0: 5}")
    letters = await read_topic(settings, DEAD_LETTERS, lambda found: len(found) >= 2)
    decoded = [decode(DEAD_LETTERS, r.value) for r in letters]
    assert all(isinstance(letter, DeadLetter) for letter in decoded)
    by_offset = {letter.offset: letter for letter in decoded if isinstance(letter, DeadLetter)}
    assert base64.b64decode(by_offset[1].payload_b64) == b"\xff not json"
    assert by_offset[3].error == "empty message (no value)"


async def test_offsets_are_committed_after_the_store_commits(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = settings_for("counter", kafka_bootstrap, data_dir=tmp_path, topic_partitions=1)
    async with counter(settings) as host:
        await host.wait_ready()
        seen = watch_commits(host, settings)
        for batch in range(5):
            await send_records(
                settings, TABLE_COMMANDS, [(*close("1", "t1"), []) for _ in range(100)]
            )
            await wait_for(lambda b=batch: total(host.app) == 100 * (b + 1))  # type: ignore[misc]
        await wait_for(lambda: bool(seen) and seen[-1][0] == 500)
    # Every commit came after the store had recorded at least that far (offset + 1).
    assert seen and all(position >= offset for offset, position in seen)


async def test_a_redelivery_after_a_crash_is_absorbed(
    kafka_bootstrap: str, tmp_path: Path, store_env: dict[str, str] | None
) -> None:
    settings = settings_for(
        "counter", kafka_bootstrap, data_dir=tmp_path, postgres_env=store_env, topic_partitions=1
    )
    async with counter(settings) as host:
        await host.wait_ready()
        subscriber = host.batch_subscriber
        assert subscriber is not None and subscriber.consumer is not None

        async def crash_before_commit(offsets: object) -> None:
            return None  # the process dies between the store commit and the offset commit

        subscriber.consumer.commit = crash_before_commit
        await send_records(settings, TABLE_COMMANDS, [(*close("7"), []) for _ in range(50)])
        await wait_for(lambda: total(host.app) == 350)
    assert await committed(settings) in ({}, {0: -1})  # nothing committed
    async with counter(settings) as again:
        consumer = again.consumer
        assert consumer is not None
        await wait_for(lambda: consumer.stats.duplicates == 50)
        await asyncio.sleep(0.3)
        assert consumer.stats.handled == 0 and total(again.app) == 350
    assert await committed(settings) == {0: 50}


async def test_a_handover_to_a_standby_while_records_flow_keeps_exactly_once(
    kafka_bootstrap: str, tmp_path: Path, store_env: dict[str, str] | None
) -> None:
    """A second instance on the same store waits for the writer lease (store/lease.py) in no
    consumer group; when the first leaves mid-flow, the second takes every partition over from
    the committed offsets and the store's tracking: nothing lost, nothing counted twice."""
    settings = settings_for(
        "counter", kafka_bootstrap, data_dir=tmp_path, postgres_env=store_env, topic_partitions=3
    )
    tables = [f"t{n}" for n in range(9)]

    def grand_total(host: KafkaService[Any]) -> int:
        return sum(total(host.app, table) for table in tables)

    await send_records(
        settings, TABLE_COMMANDS, [(*close("1", tables[n % 9]), []) for n in range(3000)]
    )
    first = counter(settings)
    await first.start()
    second = counter(settings)
    starting = asyncio.create_task(second.start())
    try:
        await wait_for(lambda: grand_total(first) > 0)
        await asyncio.sleep(0.5)
        assert not starting.done() and second.consumer is None  # a standby: no group, no store
        await send_records(
            settings, TABLE_COMMANDS, [(*close("1", tables[n % 9]), []) for n in range(3000)]
        )
        await first.stop()  # leaves mid-flow: the standby takes the lease and the partitions
        await asyncio.wait_for(starting, 60)
        await wait_for(lambda: grand_total(second) == 6000, timeout=60)
        await asyncio.sleep(1.0)
        assert grand_total(second) == 6000
        consumer = second.consumer
        assert consumer is not None and len(consumer.stops) == 0
        await wait_committed(settings, lambda found: sum(found.values()) == 6000, "6000 in all")
    finally:
        await first.stop()
        if not starting.done():
            starting.cancel()
        await second.stop()
