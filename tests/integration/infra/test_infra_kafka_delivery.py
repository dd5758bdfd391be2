"""Idempotent producer, consumer groups and transactions against a real broker."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import TopicPartition

from tests import kafka_logins

pytestmark = pytest.mark.kafka


async def _read(consumer: AIOKafkaConsumer, count: int, timeout: float = 30.0) -> list[bytes]:
    """Read until ``count`` messages came, then a short quiet spell to catch any extra."""
    received: list[bytes] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(received) < count and loop.time() < deadline:
        batch = await consumer.getmany(timeout_ms=500)
        received += [message.value for messages in batch.values() for message in messages]
    batch = await consumer.getmany(timeout_ms=1000)
    received += [message.value for messages in batch.values() for message in messages]
    return received


async def _new_topic(bootstrap: str, name: str) -> str:
    """One partition, made by the admin (the authenticating broker creates no topic on use)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **kafka_logins.options())
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    finally:
        await admin.close()
    return name


def _consumer(bootstrap: str, topic: str, group: str, **options: object) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        **kafka_logins.options(),
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **options,
    )


async def test_idempotent_producer_and_a_group_that_resumes_from_its_committed_offset(
    kafka_bootstrap: str, unique_topic: Callable[[str], str]
) -> None:
    topic, group = await _new_topic(kafka_bootstrap, unique_topic("orders")), unique_topic("group")
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, **kafka_logins.options(), enable_idempotence=True
    )
    await producer.start()
    try:
        for number in range(10):
            await producer.send_and_wait(topic, f"first-{number}".encode(), key=b"table-1")
    finally:
        await producer.stop()

    first = _consumer(kafka_bootstrap, topic, group)
    await first.start()
    try:
        received = await _read(first, 10)
        await first.commit()
    finally:
        await first.stop()
    assert received == [f"first-{number}".encode() for number in range(10)]

    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, **kafka_logins.options(), enable_idempotence=True
    )
    await producer.start()
    try:
        for number in range(5):
            await producer.send_and_wait(topic, f"second-{number}".encode(), key=b"table-1")
    finally:
        await producer.stop()

    second = _consumer(kafka_bootstrap, topic, group)
    await second.start()
    try:
        resumed = await _read(second, 5)
        await second.commit()
        committed = await second.committed(TopicPartition(topic, 0))
    finally:
        await second.stop()
    assert resumed == [f"second-{number}".encode() for number in range(5)]
    assert committed == 15


async def test_read_committed_consumer_sees_committed_transactions_only(
    kafka_bootstrap: str, unique_topic: Callable[[str], str]
) -> None:
    topic = await _new_topic(kafka_bootstrap, unique_topic("tx"))
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap,
        **kafka_logins.options(),
        transactional_id=unique_topic("tx-id"),
    )
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send(topic, b"committed-1", key=b"table-1")
        await producer.begin_transaction()
        await producer.send(topic, b"aborted-1", key=b"table-1")
        await producer.send(topic, b"aborted-2", key=b"table-1")
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send(topic, b"committed-2", key=b"table-1")
    finally:
        await producer.stop()

    committed_reader = _consumer(
        kafka_bootstrap, topic, unique_topic("rc"), isolation_level="read_committed"
    )
    await committed_reader.start()
    try:
        seen = await _read(committed_reader, 2)
    finally:
        await committed_reader.stop()
    assert seen == [b"committed-1", b"committed-2"]

    uncommitted_reader = _consumer(
        kafka_bootstrap, topic, unique_topic("ru"), isolation_level="read_uncommitted"
    )
    await uncommitted_reader.start()
    try:
        everything = await _read(uncommitted_reader, 4)
    finally:
        await uncommitted_reader.stop()
    assert everything == [b"committed-1", b"aborted-1", b"aborted-2", b"committed-2"]
