"""The consumer runtime against real Kafka and real SQLite / PostgreSQL.

The Counter service reads table-commands (CloseTable: external, tracked by offset) and
table-events (TableClosed: published by dealing, tracked by dealing's relay headers); each
message adds its ``reason`` (a number) to its table's counter.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from contracts import (
    BET_COMMANDS,
    DEAD_LETTERS,
    TABLE_COMMANDS,
    TABLE_EVENTS,
    CloseTable,
    DeadLetter,
    PlaceBet,
    TableClosed,
    encode,
)
from services.shared.platform.consumer import Delivery, Subscription, with_unit_of_work
from services.shared.platform.consumer.topic_ids import TopicIdReader
from services.shared.platform.host import KafkaService, ServiceDefinition
from services.shared.platform.host import faststream as kafka_module
from services.shared.platform.kafka import client_options, cluster_id, key_partition
from services.shared.platform.settings import Settings, replace
from services.shared.platform.store import UnitOfWork, open_application
from tests.integration.platform.kafka_tools import (
    as_admin,
    hosted,
    read_topic,
    relay_headers,
    send_raw,
    send_records,
    send_unreadable,
    settings_for,
    signed_record,
)
from tests.unit.platform.fakes import Counter, CounterApp

pytestmark = [pytest.mark.kafka]


def definition(release: threading.Event | None = None) -> ServiceDefinition[CounterApp]:
    """The Counter service; a TableClosed whose reason is ``flaky`` fails until ``release``
    is set (the test decides when the handler takes it)."""

    def subscriptions(app: CounterApp) -> list[Subscription]:
        def handle(uow: UnitOfWork, delivery: Delivery) -> None:
            message = delivery.message
            if isinstance(message, PlaceBet):
                amount = 1
            else:
                assert isinstance(message, TableClosed | CloseTable)
                if message.reason == "flaky" and release is not None and not release.is_set():
                    raise RuntimeError("the settlement of this coup is not ready")
                amount = 1000 if message.reason == "flaky" else int(message.reason)
            counter = uow.get(Counter.create_id(message.table_id), Counter)
            if counter is None:
                counter = Counter(table_id=message.table_id)
                uow.add(counter)
            counter.add(table_id=message.table_id, amount=amount)

        handler = with_unit_of_work(app, handle)
        return [Subscription(topic, handler) for topic in (TABLE_COMMANDS, TABLE_EVENTS)]

    return ServiceDefinition(
        name="counter", application=lambda env: CounterApp(env=env), subscriptions=subscriptions
    )


def counter(settings: Settings, release: threading.Event | None = None) -> KafkaService[CounterApp]:
    """The Counter service (:func:`definition`) reading table-commands and table-events."""
    return hosted(definition(release), settings, TABLE_COMMANDS, TABLE_EVENTS)


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
    """An internal event (send it on table-events with dealing's relay headers)."""
    return table.encode(), encode(TableClosed(table_id=table, reason=reason))


def close(reason: str, table: str = "t1") -> tuple[bytes, bytes]:
    """An external command (table-commands)."""
    return table.encode(), encode(CloseTable(table_id=table, reason=reason))


async def test_the_same_message_delivered_twice_has_one_effect(
    kafka_bootstrap: str, tmp_path: Path, store_env: dict[str, str] | None
) -> None:
    settings = settings_for("counter", kafka_bootstrap, data_dir=tmp_path, postgres_env=store_env)
    async with counter(settings) as host:
        await host.wait_ready()
        five = signed_record(settings, "dealing", TABLE_EVENTS, closed("5"), 41)
        await send_records(settings, TABLE_EVENTS, [five])
        await send_records(settings, TABLE_EVENTS, [five])  # republished
        await send_raw(settings, TABLE_COMMANDS, [close("7")])  # external: tracked by offset
        await wait_for(lambda: total(host.app) == 12)
        await asyncio.sleep(0.5)
        assert total(host.app) == 12
    # Redelivery: a new consumer group reads everything again from offset 0, same store.
    regrouped = replace(settings, consumer_group_id=settings.consumer_group + "-again")
    async with counter(regrouped) as host2:
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
    async with counter(settings) as host:
        await host.wait_ready()
        await send_raw(
            settings,
            TABLE_COMMANDS,
            [
                (b"t1", b"this is not JSON"),
                (b"t1", b'{"type": "CloseTable", "table_id": "t1", "reason": 3}'),
                (b"t1", b'{"type": "PlaceBet", "table_id": "t1"}'),  # wrong topic
                close("3"),
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
        assert bad.original_topic == settings.topic(TABLE_COMMANDS)
        assert bad.service == "counter"
        assert bad.table_id == "t1"
        assert "not JSON" in bad.error
        assert bad.payload_size == 16
        wrong = by_payload[b'{"type": "CloseTable", "table_id": "t1", "reason": 3}']
        assert "invalid CloseTable" in wrong.error
        assert "not allowed" in by_payload[b'{"type": "PlaceBet", "table_id": "t1"}'].error
        # still serving
        await send_raw(settings, TABLE_COMMANDS, [close("4")])
        await wait_for(lambda: total(host.app) == 7)


async def test_a_record_the_kafka_client_cannot_read_is_passed_over_and_nothing_is_lost(
    kafka_bootstrap: str, tmp_path: Path, store_env: dict[str, str] | None
) -> None:
    """A header key that is not UTF-8 (a forged record: aiokafka raises when it parses it)
    ended the consume loop for good, and the records a fetch had taken with it from other
    partitions were lost. It is dead-lettered by its place, and so is the record after it in
    its batch (the client parses a batch from its start); the records around them, on its
    partition and the others, are each handled once."""
    settings = settings_for("counter", kafka_bootstrap, data_dir=tmp_path, postgres_env=store_env)
    n = settings.topic_partitions
    home = key_partition(b"t1", n)  # the unreadable record's partition
    other = next(f"t{i}" for i in range(2, 99) if key_partition(f"t{i}".encode(), n) != home)
    await send_raw(settings, TABLE_COMMANDS, [close("1", other), close("2", other), close("3")])
    batch = [close("50")[1], close("100")[1], close("200")[1]]  # one batch, the second forged
    first = await send_unreadable(settings, TABLE_COMMANDS, b"t1", batch, 1, home)
    await send_raw(settings, TABLE_COMMANDS, [close("5"), close("6", other)])  # after it
    async with counter(settings) as host:  # a fetch may take them all
        await host.wait_ready()
        await wait_for(lambda: (total(host.app), total(host.app, other)) == (58, 9), 60)
        letters = await read_topic(settings, DEAD_LETTERS, lambda r: len(r) >= 2)
        dead = [r.message(DEAD_LETTERS) for r in letters]
        assert all(isinstance(letter, DeadLetter) for letter in dead)
        assert sorted((d.original_topic, d.offset) for d in dead if isinstance(d, DeadLetter)) == [
            (settings.topic(TABLE_COMMANDS), first + 1),
            (settings.topic(TABLE_COMMANDS), first + 2),
        ]
        for letter in dead:
            assert isinstance(letter, DeadLetter) and "cannot read this record" in letter.error
            assert "UnicodeDecodeError" in letter.error
        await send_raw(settings, TABLE_COMMANDS, [close("10")])  # still serving
        await wait_for(lambda: total(host.app) == 68)
        await asyncio.sleep(0.5)
        assert (total(host.app), total(host.app, other)) == (68, 9)  # nothing twice


async def test_forged_relay_headers_are_dead_letters_never_positions(
    kafka_bootstrap: str, tmp_path: Path, store_env: dict[str, str] | None
) -> None:
    settings = settings_for("counter", kafka_bootstrap, data_dir=tmp_path, postgres_env=store_env)
    async with counter(settings) as host:
        await host.wait_ready()
        await send_records(
            settings,
            TABLE_EVENTS,
            [signed_record(settings, "dealing", TABLE_EVENTS, closed("1"), 5)],
        )
        await wait_for(lambda: total(host.app) == 1)
        # A client writing table-events, posing as another service with a huge position.
        await send_raw(settings, TABLE_EVENTS, [closed("100")], relay_headers("evil", 8 * 10**12))
        await send_raw(settings, TABLE_EVENTS, [closed("1000")])  # no headers at all
        # ... or as dealing, far ahead, without dealing's key: the table would freeze.
        await send_raw(settings, TABLE_EVENTS, [closed("10")], relay_headers("dealing", 8 * 10**12))
        await send_records(
            settings,
            TABLE_EVENTS,
            [signed_record(settings, "dealing", TABLE_EVENTS, closed("2"), 6)],
        )
        await wait_for(lambda: total(host.app) == 3)  # dealing's next message is not skipped
        raw = await read_topic(settings, DEAD_LETTERS, lambda r: len(r) >= 3)
        errors = sorted(
            letter.error for r in raw if isinstance(letter := r.message(DEAD_LETTERS), DeadLetter)
        )
        assert errors == [
            "signature: no pb-sig header (only dealing publishes this, and signs what it "
            "publishes)",
            "untrusted headers: header pb-source is b'evil', but only dealing publishes here",
            "untrusted headers: header pb-source is missing "
            "(only dealing's outbox relay publishes here)",
        ]
        name = f"dealing:{TABLE_EVENTS}:"
        positions = [host.app.tracked_position(name + str(p)) for p in range(3)]
        assert max(positions) == 6 * 2**20


async def test_an_overflowing_notification_id_on_bet_commands_is_tracked_by_offset(
    kafka_bootstrap: str, tmp_path: Path, store_env: dict[str, str] | None
) -> None:
    """bet-commands has no owner: the pb-* headers are ignored (they used to overflow)."""
    settings = settings_for("counter", kafka_bootstrap, data_dir=tmp_path, postgres_env=store_env)
    counted = definition()

    def subscriptions(app: CounterApp) -> list[Subscription]:
        [table_commands, _events] = counted.subscriptions(app)
        return [Subscription(BET_COMMANDS, table_commands.handler)]

    bets = dataclasses.replace(counted, subscriptions=subscriptions)
    bet = PlaceBet(
        table_id="t1",
        bet_id="b1",
        coup_id="c1",
        bettor_id="mallory",
        bet_type="player",
        amount=100,
        currency="EUR",
    )
    forged = [
        ("pb-source", b"dealing"),
        ("pb-notification-id", b"99999999999999999999"),
        ("pb-message-index", b"0"),
    ]
    async with hosted(bets, settings, BET_COMMANDS) as host:
        await host.wait_ready()
        await send_raw(settings, BET_COMMANDS, [(b"t1", encode(bet))] * 2, headers=forged)
        await wait_for(lambda: total(host.app) == 2)
        await send_raw(settings, BET_COMMANDS, [(b"t1", encode(bet))])
        await wait_for(lambda: total(host.app) == 3)  # no rewind loop: it goes on
        consumer = host.consumer
        assert consumer is not None and consumer.stats.dead_letters == 0


async def _recreate(settings: Settings, logical: str, host: KafkaService[CounterApp]) -> None:
    """Delete a topic and, once ``host``'s consumer has seen it go (its partitions revoked),
    create it again under the same name. (A topic recreated before its consumers notice, with
    as many records as before, is a case Kafka's fetch by topic name cannot tell apart: the old
    position is valid on the new topic.)"""
    name = settings.topic(logical)
    admin = AIOKafkaAdminClient(**client_options(as_admin(settings)))
    await admin.start()
    try:
        await admin.delete_topics([name])

        def revoked() -> bool:
            processor = host.consumer
            consumer = processor.consumer if processor is not None else None
            return consumer is not None and all(tp.topic != name for tp in consumer.assignment())

        await wait_for(revoked, timeout=60)
        for _ in range(100):  # deletion finishes in the background
            try:
                await admin.create_topics(
                    [NewTopic(name, settings.topic_partitions, settings.topic_replication_factor)]
                )
                return
            except TopicAlreadyExistsError:
                await asyncio.sleep(0.1)
        raise AssertionError(f"{name} could not be created again")
    finally:
        await admin.close()


async def test_a_topic_deleted_and_created_again_has_its_new_records_handled(
    kafka_bootstrap: str,
    tmp_path: Path,
    store_env: dict[str, str] | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kafka_module, "METADATA_MAX_AGE_MS", 1000)  # notice it quickly
    settings = settings_for("counter", kafka_bootstrap, data_dir=tmp_path, postgres_env=store_env)
    topic = settings.topic(TABLE_COMMANDS)
    reader = TopicIdReader(settings)
    await reader.start()
    try:
        async with counter(settings) as host:
            await host.wait_ready()
            first_id = (await reader.topic_ids([topic]))[topic]
            await send_raw(settings, TABLE_COMMANDS, [close("1"), close("2")])
            await wait_for(lambda: total(host.app) == 3)
            await _recreate(settings, TABLE_COMMANDS, host)
            second_id = first_id
            for _ in range(100):  # the broker answering may not know the new topic yet
                second_id = (await reader.topic_ids([topic]))[topic]
                if second_id != first_id:
                    break
                await asyncio.sleep(0.1)
            assert second_id != first_id
            # Its offsets 0 and 1 again: new commands, not the ones handled before.
            await send_raw(settings, TABLE_COMMANDS, [close("10"), close("20")])
            await wait_for(lambda: total(host.app) == 33, timeout=60)
            consumer = host.consumer
            assert consumer is not None
            cluster = consumer.names.cluster_id
            names = {
                topic_id: [
                    host.app.tracked_position(f"{cluster}:{topic}:{topic_id}:{p}")
                    for p in range(settings.topic_partitions)
                ]
                for topic_id in (first_id, second_id)
            }
            assert max(names[first_id]) == 2 and max(names[second_id]) == 2
    finally:
        await reader.close()


async def test_a_store_written_before_topic_ids_keeps_its_positions(
    kafka_bootstrap: str, tmp_path: Path, store_env: dict[str, str] | None
) -> None:
    settings = settings_for(
        "counter", kafka_bootstrap, data_dir=tmp_path, postgres_env=store_env, topic_partitions=1
    )
    await send_raw(settings, TABLE_COMMANDS, [close("1"), close("2"), close("100")])
    # The store of a version without topic ids handled offsets 0 and 1 (and is upgraded).
    cluster = await cluster_id(settings)
    topic = settings.topic(TABLE_COMMANDS)
    app = open_application(lambda env: CounterApp(env=env), settings)
    app.record_position(f"{cluster}:{topic}:0", 2)
    app.close()
    async with counter(settings) as host:
        await host.wait_ready()
        consumer = host.consumer
        assert consumer is not None
        await wait_for(lambda: total(host.app) == 100)
        await asyncio.sleep(0.5)
        assert total(host.app) == 100 and consumer.stats.duplicates == 2
        reader = TopicIdReader(settings)
        await reader.start()
        topic_id = (await reader.topic_ids([topic]))[topic]
        await reader.close()
        assert host.app.tracked_position(f"{cluster}:{topic}:{topic_id}:0") == 3


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _stopped_gauge(text: str) -> list[float]:
    found = re.findall(r"^pb_partition_stopped\{.*\} ([0-9.e+-]+)$", text, re.MULTILINE)
    return [float(value) for value in found]


async def test_an_internal_message_that_fails_stops_its_partition_until_it_is_taken(
    kafka_bootstrap: str, tmp_path: Path, store_env: dict[str, str] | None
) -> None:
    # The handler fails on it (each try calls it once or twice: the fetched batch, then the
    # message alone) until the test sets ``release``: the hold cannot end before it says so.
    release = threading.Event()
    settings = settings_for(
        "counter", kafka_bootstrap, data_dir=tmp_path, postgres_env=store_env, http_port=0
    )
    async with counter(settings, release) as host:
        await host.wait_ready()
        consumer = host.consumer
        assert consumer is not None and host.http is not None
        consumer.stops.first_delay = 0.5
        consumer.stops.max_delay = 1.0  # once released, taken within a second
        url = host.http.url
        await send_records(
            settings,
            TABLE_EVENTS,
            [signed_record(settings, "dealing", TABLE_EVENTS, closed("1"), 1)],
        )
        await wait_for(lambda: total(host.app) == 1)
        await send_records(
            settings,
            TABLE_EVENTS,
            [
                signed_record(settings, "dealing", TABLE_EVENTS, closed("flaky"), 2),
                signed_record(settings, "dealing", TABLE_EVENTS, closed("2"), 41),
            ],
        )
        await wait_for(lambda: len(consumer.stops) == 1)
        [stopped] = list(consumer.stops)
        assert (stopped.topic, stopped.message_type, stopped.table_id) == (
            TABLE_EVENTS,
            "TableClosed",
            "t1",
        )
        status, body = await asyncio.to_thread(_get, url + "/ready")
        assert status == 503
        handling = json.loads(body)["checks"]["handling"]
        assert f"{TABLE_EVENTS}:{stopped.partition} stopped at offset {stopped.offset}" in handling
        assert "RuntimeError('the settlement of this coup is not ready')" in handling
        _status, metrics = await asyncio.to_thread(_get, url + "/metrics")
        assert _stopped_gauge(metrics) == [1.0]
        assert (
            f'pb_partition_stopped{{partition="{stopped.partition}",service="counter",'
            f'topic="{TABLE_EVENTS}"}} 1.0' in metrics
        )
        # Other partitions go on meanwhile.
        await send_raw(settings, TABLE_COMMANDS, [close("10", "t2")])
        await wait_for(lambda: total(host.app, "t2") == 10)
        # Tried again after the back-off, failed again: still stopped, nothing past it taken.
        await wait_for(lambda: consumer.stats.stops >= 2, timeout=30)
        assert len(consumer.stops) == 1 and total(host.app) == 1
        failed_tries = consumer.stats.stops
        release.set()
        # Taken at last: nothing lost, nothing twice.
        await wait_for(lambda: total(host.app) == 1003, timeout=60)
        await wait_for(lambda: not len(consumer.stops), timeout=30)
        await asyncio.sleep(0.5)
        assert total(host.app) == 1003
        # A try under way when the gate opened may still have failed; none after it.
        assert failed_tries <= consumer.stats.stops <= failed_tries + 1
        assert consumer.stats.dead_letters == 0
        status, body = await asyncio.to_thread(_get, url + "/ready")
        assert status == 200, body
        _status, metrics = await asyncio.to_thread(_get, url + "/metrics")
        assert _stopped_gauge(metrics) == [0.0]
        assert f"pb_partition_stops_total {float(consumer.stats.stops)}" in metrics


async def test_a_flood_is_applied_in_few_transactions(
    kafka_bootstrap: str, tmp_path: Path, store_env: dict[str, str] | None
) -> None:
    settings = settings_for("counter", kafka_bootstrap, data_dir=tmp_path, postgres_env=store_env)
    await send_raw(settings, TABLE_COMMANDS, [close("1", f"t{i % 7}") for i in range(10_000)])
    async with counter(settings) as host:
        started = asyncio.get_running_loop().time()
        await wait_for(
            lambda: sum(total(host.app, f"t{i}") for i in range(7)) == 10_000, timeout=60
        )
        elapsed = asyncio.get_running_loop().time() - started
        consumer = host.consumer
        assert consumer is not None
        print(f"10,000 messages applied in {elapsed:.2f}s in {consumer.stats.batches} polls")
        assert consumer.stats.batches < 200
