"""The consumer runtime against real Kafka and real SQLite / PostgreSQL."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from contracts import DEAD_LETTERS, TABLE_EVENTS, DeadLetter, TableClosed, encode
from services.platform.application import UnitOfWork
from services.platform.consumer import Delivery, Subscription, with_unit_of_work
from services.platform.runner import ServiceDefinition, ServiceHost
from tests.integration.platform.kafka_tools import read_topic, send_raw, settings_for
from tests.unit.platform.fakes import Counter, CounterApp

pytestmark = [pytest.mark.kafka]


def definition() -> ServiceDefinition[CounterApp]:
    def subscriptions(app: CounterApp) -> list[Subscription]:
        def handle(uow: UnitOfWork, delivery: Delivery) -> None:
            message = delivery.message
            assert isinstance(message, TableClosed)
            counter = uow.get(Counter.create_id(message.table_id), Counter)
            if counter is None:
                counter = Counter(table_id=message.table_id)
                uow.add(counter)
            counter.add(table_id=message.table_id, amount=int(message.reason))

        return [Subscription(TABLE_EVENTS, with_unit_of_work(app, handle))]

    return ServiceDefinition(
        name="counter", application=lambda env: CounterApp(env=env), subscriptions=subscriptions
    )


def total(app: CounterApp, table: str = "t1") -> int:
    try:
        counter: Counter = app.repository.get(Counter.create_id(table))
    except Exception:
        return 0
    return counter.total


async def wait_for(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


def closed(reason: str, table: str = "t1") -> tuple[bytes, bytes]:
    return table.encode(), encode(TableClosed(table_id=table, reason=reason))


RELAYED = [("pb-source", b"dealing"), ("pb-notification-id", b"41"), ("pb-message-index", b"0")]


async def test_the_same_message_delivered_twice_has_one_effect(
    kafka_bootstrap: str, tmp_path: Path, store_env: dict[str, str] | None
) -> None:
    settings = settings_for("counter", kafka_bootstrap, data_dir=tmp_path, postgres_env=store_env)
    async with ServiceHost(definition(), settings) as host:
        await host.wait_ready()
        await send_raw(settings, TABLE_EVENTS, [closed("5")], headers=RELAYED)
        await send_raw(settings, TABLE_EVENTS, [closed("5")], headers=RELAYED)  # republished
        await send_raw(settings, TABLE_EVENTS, [closed("7")])  # external, no notification id
        await wait_for(lambda: total(host.app) == 12)
        await asyncio.sleep(0.5)
        assert total(host.app) == 12
    # Redelivery: a new consumer group reads everything again from offset 0, same store.
    regrouped = dataclasses.replace(settings, consumer_group_id=settings.consumer_group + "-again")
    async with ServiceHost(definition(), regrouped) as host2:
        await host2.wait_ready()
        consumer = host2.consumer
        assert consumer is not None
        await wait_for(lambda: consumer.stats.duplicates >= 3)
        assert consumer.stats.handled == 0
        assert total(host2.app) == 12


async def test_malformed_messages_land_in_dead_letters_and_the_service_goes_on(
    kafka_bootstrap: str, tmp_path: Path, store_env: dict[str, str] | None
) -> None:
    settings = settings_for("counter", kafka_bootstrap, data_dir=tmp_path, postgres_env=store_env)
    async with ServiceHost(definition(), settings) as host:
        await host.wait_ready()
        await send_raw(
            settings,
            TABLE_EVENTS,
            [
                (b"t1", b"this is not JSON"),
                (b"t1", b'{"type": "TableClosed", "table_id": "t1"}'),  # schema: no reason
                (b"t1", b'{"type": "PlaceBet", "table_id": "t1"}'),  # wrong topic
                closed("3"),
            ],
        )
        await wait_for(lambda: total(host.app) == 3)
        letters_raw = await read_topic(settings, DEAD_LETTERS, lambda r: len(r) >= 3)
        letters = [r.message(DEAD_LETTERS) for r in letters_raw]
        assert all(isinstance(d, DeadLetter) for d in letters)
        by_payload = {
            base64.b64decode(d.payload_b64): d for d in letters if isinstance(d, DeadLetter)
        }
        bad = by_payload[b"this is not JSON"]
        assert bad.original_topic == settings.topic(TABLE_EVENTS)
        assert bad.service == "counter"
        assert bad.table_id == "t1"
        assert "not JSON" in bad.error
        assert (
            "invalid TableClosed" in by_payload[b'{"type": "TableClosed", "table_id": "t1"}'].error
        )
        assert "not allowed" in by_payload[b'{"type": "PlaceBet", "table_id": "t1"}'].error
        # still serving
        await send_raw(settings, TABLE_EVENTS, [closed("4")])
        await wait_for(lambda: total(host.app) == 7)


async def test_a_flood_is_applied_in_few_transactions(
    kafka_bootstrap: str, tmp_path: Path, store_env: dict[str, str] | None
) -> None:
    settings = settings_for("counter", kafka_bootstrap, data_dir=tmp_path, postgres_env=store_env)
    await send_raw(settings, TABLE_EVENTS, [closed("1", f"t{i % 7}") for i in range(10_000)])
    async with ServiceHost(definition(), settings) as host:
        started = asyncio.get_running_loop().time()
        await wait_for(
            lambda: sum(total(host.app, f"t{i}") for i in range(7)) == 10_000, timeout=60
        )
        elapsed = asyncio.get_running_loop().time() - started
        consumer = host.consumer
        assert consumer is not None
        print(f"10,000 messages applied in {elapsed:.2f}s in {consumer.stats.batches} polls")
        assert consumer.stats.batches < 200
