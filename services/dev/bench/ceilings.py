"""The ceilings the pipeline is compared with, measured in the same run.

- :func:`kafka_ceiling`: raw aiokafka produce-and-consume of N copies of one message (a real
  encoded ``BetSettled``) through the same broker: an idempotent producer (acks=all, the relay's
  settings) sends while a consumer reads; messages per second from the first send to the last
  record consumed. Nothing is decoded: this is the broker-and-client ceiling. Measured twice:
  one ``send()`` per keyed message (what the relay does) and ``send_batch`` (the fastest
  aiokafka path); the better is the ceiling.
- :func:`store_ceiling`: raw appends to the same event store with an eventsourcing
  ``Application.save`` of small events: one event per save (one transaction each), and many
  events per save (one transaction per 1,000 events, as settlement records a coup).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import uuid4

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

from services.dev.bench.stats import rate
from services.dev.demo.bus import NOBODY, delete_topics
from services.shared.platform.kafka import MAX_BATCH_BYTES
from services.shared.platform.settings import KafkaAuth


@dataclass(frozen=True)
class Ceiling:
    what: str
    count: int
    seconds: float

    @property
    def per_second(self) -> float:
        return rate(self.count, self.seconds)


async def kafka_ceiling(
    bootstrap: str,
    prefix: str,
    payload: bytes,
    count: int,
    partitions: int = 3,
    batched: bool = False,
    auth: KafkaAuth = NOBODY,
) -> Ceiling:
    """Produce ``count`` copies of ``payload`` and consume them (a new topic each time).

    ``batched=False``: one ``producer.send`` per message with its key (the partitioner hashes
    each key), as the relay publishes today. ``batched=True``: records appended to producer
    batches and sent with ``send_batch`` to explicit partitions (no per-message future or hash).
    """
    topic = f"{prefix}ceiling-{'batched' if batched else 'each'}"
    options = auth.client_options()  # the admin's on the local broker: a topic of its own
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="pb-bench-admin", **options)
    await asyncio.wait_for(admin.start(), 60)
    try:
        await asyncio.wait_for(
            admin.create_topics([NewTopic(topic, partitions, replication_factor=1)]), 60
        )
    finally:
        await admin.close()
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        **options,
        client_id="pb-bench-ceiling",
        enable_idempotence=True,
        acks="all",
        linger_ms=2,
        max_batch_size=MAX_BATCH_BYTES,  # the relay's
    )
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        **options,
        client_id="pb-bench-ceiling-reader",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=8 * 1024 * 1024,
        fetch_max_bytes=32 * 1024 * 1024,
    )
    await asyncio.wait_for(producer.start(), 60)
    await asyncio.wait_for(consumer.start(), 60)
    try:
        deadline = time.monotonic() + 60
        while not (found := consumer.partitions_for_topic(topic)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic} has no partitions")
            await consumer._client.force_metadata_update()
            await asyncio.sleep(0.2)
        assigned = [TopicPartition(topic, p) for p in sorted(found)]
        consumer.assign(assigned)
        await consumer.seek_to_beginning(*assigned)
        keys = [f"table-{n}".encode() for n in range(partitions * 4)]

        async def produce_each() -> None:
            pending = []
            for n in range(count):
                pending.append(await producer.send(topic, payload, key=keys[n % len(keys)]))
                if len(pending) >= 10_000:
                    await asyncio.gather(*pending)
                    pending = []
            await asyncio.gather(*pending)

        async def produce_batched() -> None:
            partitions = sorted(found)
            pending = []
            batch = None
            for n in range(count):
                partition = partitions[n % len(partitions)]
                if batch is None:
                    batch = producer.create_batch()
                if batch.append(key=keys[n % len(keys)], value=payload, timestamp=None) is None:
                    pending.append(await producer.send_batch(batch, topic, partition=partition))
                    batch = producer.create_batch()
                    batch.append(key=keys[n % len(keys)], value=payload, timestamp=None)
            if batch is not None and batch.record_count():
                pending.append(await producer.send_batch(batch, topic, partition=partitions[0]))
            await asyncio.gather(*pending)

        produce = produce_batched if batched else produce_each

        async def consume() -> None:
            seen = 0
            while seen < count:
                batches = await consumer.getmany(timeout_ms=200, max_records=20_000)
                seen += sum(len(records) for records in batches.values())

        started = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(produce(), consume()), max(120.0, count / 1000))
        seconds = time.perf_counter() - started
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(producer.stop(), 30)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(consumer.stop(), 30)
        with contextlib.suppress(Exception):
            await delete_topics(bootstrap, topic, auth=auth)  # this run's topic only
    how = "send_batch" if batched else "send() per message"
    return Ceiling(f"{len(payload)}-byte messages, {how}", count, seconds)


class Counter(Aggregate):
    """A small aggregate whose events carry one small field."""

    @event("Created")
    def __init__(self, name: str) -> None:
        self.name = name
        self.ticks = 0

    @event("Ticked")
    def tick(self, note: str) -> None:
        self.ticks += 1


def store_ceiling(env: Mapping[str, str], saves: int, batch: int = 1000) -> tuple[Ceiling, Ceiling]:
    """(one event per save, ``batch`` events per save) appends per second to the store."""
    app = Application[Any](env=dict(env))
    try:
        counters = [Counter(name=f"c{n}") for n in range(saves)]
        started = time.perf_counter()
        for counter in counters:
            app.save(counter)
        single = Ceiling("one event per save", saves, time.perf_counter() - started)
        big = Counter(name=f"big-{uuid4().hex[:6]}")
        app.save(big)
        rounds = max(1, saves * 10 // batch)
        started = time.perf_counter()
        for _ in range(rounds):
            for _ in range(batch):
                big.tick("x")
            app.save(big)
        batched = Ceiling(
            f"{batch:,} events per save", rounds * batch, time.perf_counter() - started
        )
    finally:
        app.close()
    return single, batched


def sqlite_store_env(path: Path) -> dict[str, str]:
    return {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)}


def postgres_store_env(postgres: Mapping[str, str], schema: str) -> dict[str, str]:
    """eventsourcing's PostgreSQL env for ``schema`` (created here if missing)."""
    import psycopg

    from services.dev.bench.cluster import postgres_conninfo

    with psycopg.connect(postgres_conninfo(postgres), autocommit=True) as connection:
        connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    env = {key: value for key, value in postgres.items() if key.startswith("POSTGRES_")}
    env.update(
        {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_SCHEMA": schema,
            "CREATE_TABLE": "y",
        }
    )
    return env
