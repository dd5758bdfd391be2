"""Against real Kafka: the bet-commands topic stamps records with the broker's append time,
deliveries carry it, and offset tracking is per cluster and real topic name."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from contracts import (
    BET_COMMANDS,
    TABLE_COMMANDS,
    TABLE_EVENTS,
    PlaceBet,
    bet_commands_topic,
    bet_events_topic,
    encode,
)
from services.dev.infra.kafka_clients import ADMIN
from services.shared.platform.consumer import LOG_APPEND_TIME, Delivery, Subscription
from services.shared.platform.host import ServiceDefinition
from services.shared.platform.kafka import (
    LOG_APPEND_TIME as LOG_APPEND_TIME_CONFIG,
)
from services.shared.platform.kafka import (
    TIMESTAMP_TYPE,
    client_options,
    cluster_id,
    ensure_topics,
    topic_configs,
)
from services.shared.platform.settings import Settings, replace
from tests import kafka_logins
from tests.integration.platform.kafka_tools import as_admin, hosted, send_raw, settings_for
from tests.integration.platform.test_platform_consumer_kafka import (
    close,
    counter,
    total,
    wait_for,
)
from tests.kafka_cleanup import created_under
from tests.unit.platform.fakes import CounterApp

pytestmark = [pytest.mark.kafka]


async def timestamp_type_of(settings: Settings, logical_topic: str) -> str | None:
    admin = AIOKafkaAdminClient(**client_options(as_admin(settings)))
    await admin.start()
    try:
        name = settings.topic(logical_topic)
        found = await topic_configs(admin, [name])
    finally:
        await admin.close()
    value, _source = found[name].get(TIMESTAMP_TYPE, (None, 0))
    return None if value is None else str(value)


async def test_bet_commands_are_created_with_log_append_time(kafka_bootstrap: str) -> None:
    settings = settings_for("settlement", kafka_bootstrap, principal=ADMIN)  # makes topics
    await ensure_topics(settings)
    assert await timestamp_type_of(settings, BET_COMMANDS) == LOG_APPEND_TIME_CONFIG
    assert await timestamp_type_of(settings, TABLE_EVENTS) == "CreateTime"


async def test_every_operators_topics_are_created_and_its_bets_get_log_append_time(
    kafka_bootstrap: str,
) -> None:
    """PB_OPERATORS=acme,bravo: each operator's bet-commands topic stamps its bets with the
    broker's time, as the house's does; its bet-events topic is made too."""
    settings = as_admin(
        settings_for("settlement", kafka_bootstrap, principal=ADMIN, operators=("acme", "bravo"))
    )
    created = await ensure_topics(settings)  # as the admin: made here, not by the test set-up
    for operator in ("acme", "bravo"):
        assert settings.topic(bet_events_topic(operator)) in created
        commands = bet_commands_topic(operator)
        assert await timestamp_type_of(settings, commands) == LOG_APPEND_TIME_CONFIG


async def test_an_existing_bet_commands_topic_is_altered_and_keeps_its_other_configs(
    kafka_bootstrap: str,
) -> None:
    settings = settings_for("settlement", kafka_bootstrap, principal=ADMIN)  # makes topics
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap, **kafka_logins.options())
    await admin.start()
    try:
        await admin.create_topics(
            [
                NewTopic(
                    settings.topic(BET_COMMANDS),
                    num_partitions=1,
                    replication_factor=1,
                    topic_configs={"retention.ms": "86400001"},
                )
            ]
        )
    finally:
        await admin.close()
    assert await timestamp_type_of(settings, BET_COMMANDS) == "CreateTime"
    await ensure_topics(settings)
    deadline = time.monotonic() + 10  # the broker applies a config change asynchronously
    while await timestamp_type_of(settings, BET_COMMANDS) != LOG_APPEND_TIME_CONFIG:
        assert time.monotonic() < deadline, "bet-commands still has CreateTime"
        await asyncio.sleep(0.1)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap, **kafka_logins.options())
    await admin.start()
    try:
        name = settings.topic(BET_COMMANDS)
        configs = (await topic_configs(admin, [name]))[name]
    finally:
        await admin.close()
    assert configs["retention.ms"][0] == "86400001"


async def test_a_delivery_carries_the_brokers_append_time_not_the_producers(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = settings_for("recorder", kafka_bootstrap, data_dir=tmp_path)
    seen: list[Delivery] = []

    def subscriptions(app: CounterApp) -> list[Subscription]:
        def handle(deliveries: object, tracking: object) -> None:
            assert isinstance(deliveries, list)
            seen.extend(deliveries)

        return [Subscription(BET_COMMANDS, handle)]

    recorder = ServiceDefinition(
        name="recorder", application=lambda env: CounterApp(env=env), subscriptions=subscriptions
    )
    backdated = datetime(2001, 1, 1, tzinfo=UTC)
    command = PlaceBet(
        occurred_at=backdated,
        table_id="t1",
        bet_id="b1",
        coup_id="c1",
        bettor_id="alice",
        bet_type="player",
        amount=1000,
        currency="EUR",
    )
    async with hosted(recorder, settings, BET_COMMANDS) as host:
        await host.wait_ready()
        before = datetime.now(UTC)
        await send_raw(settings, BET_COMMANDS, [(b"t1", encode(command))])
        await wait_for(lambda: len(seen) == 1)
        after = datetime.now(UTC)
    [delivery] = seen
    assert delivery.timestamp_type == LOG_APPEND_TIME
    appended = delivery.appended_at
    assert appended is not None
    assert before.timestamp() - 1 <= appended.timestamp() <= after.timestamp() + 1
    assert delivery.message.occurred_at == backdated  # the client's stamp, not used


async def test_a_store_reused_with_a_new_topic_prefix_handles_the_new_commands(
    kafka_bootstrap: str, tmp_path: Path, store_env: dict[str, str] | None
) -> None:
    first = settings_for("counter", kafka_bootstrap, data_dir=tmp_path, postgres_env=store_env)
    async with counter(first) as host:
        await host.wait_ready()
        await send_raw(first, TABLE_COMMANDS, [close("5")])  # external: tracked by offset
        await wait_for(lambda: total(host.app) == 5)
        consumer = host.consumer
        assert consumer is not None
        assert consumer.names.cluster_id == await cluster_id(first)
    # The same store with fresh topics: their offset 0 is a new command, not a handled one.
    second = replace(first, topic_prefix=created_under(f"r{first.topic_prefix}"))
    assert second.eventsourcing_env() == first.eventsourcing_env()
    async with counter(second) as host2:
        await host2.wait_ready()
        await send_raw(second, TABLE_COMMANDS, [close("7")])
        await wait_for(lambda: total(host2.app) == 12)
        consumer2 = host2.consumer
        assert consumer2 is not None and consumer2.stats.duplicates == 0
