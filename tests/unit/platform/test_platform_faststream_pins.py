"""What the platform relies on of FastStream (host/faststream.py, the one module importing it),
one test per reliance: an upgrade that changes any of them fails here first, by name."""

from __future__ import annotations

import asyncio
from importlib.metadata import version
from typing import Any

import pytest
from aiokafka import ConsumerRecord
from aiokafka.errors import ConsumerStoppedError
from faststream import TestApp
from faststream.asgi import AsgiFastStream
from faststream.kafka import TestKafkaBroker, TopicPartition
from faststream.kafka.message import KafkaAckableMessage

from services.shared.platform.consumer import RebalanceListener
from services.shared.platform.host import KafkaService, ServiceDefinition
from services.shared.platform.host.faststream import (
    asyncapi_json,
    fetch_promptly,
    keep_raw,
    service_broker,
    subscriber_options,
)
from services.shared.platform.settings import Settings
from tests.unit.platform.fakes import CounterApp, FakeConsumer


async def nothing(count: int) -> None:
    """What a fetch tells: ignored here."""


def record(offset: int, headers: list[tuple[str, bytes | None]]) -> ConsumerRecord[Any, Any]:
    return ConsumerRecord("t", 0, offset, 0, 0, b"k", b"v", None, 1, 1, headers)


def test_the_version_is_the_one_pinned_in_pyproject() -> None:
    assert version("faststream").startswith("0.7.")  # faststream[kafka]>=0.7,<0.8


async def test_keep_raw_wraps_a_fetch_in_faststream_s_message_and_gives_it_back_unread() -> None:
    fetched = (record(5, [("pb-source", b"\xff\x00")]), record(6, [("x", None)]))
    message = await keep_raw(fetched)
    assert isinstance(message, KafkaAckableMessage)  # faststream.kafka.message internals
    assert message.message_id == "t:0@5+2"
    assert await keep_raw(message) == fetched  # the handler's body: the records themselves


async def test_the_handler_gets_the_raw_fetch_and_faststream_commits_nothing() -> None:
    broker = service_broker(Settings("shoe"))
    got: list[Any] = []
    options = subscriber_options(Settings("shoe"), RebalanceListener(), title="t", description="d")
    subscriber = broker.subscriber("t", **options)

    @subscriber
    async def handle(batch: Any) -> None:
        got.append(batch)

    async with TestKafkaBroker(broker) as test_broker:
        subscriber.consumer = consumer = FakeConsumer()  # the running consumer, an attribute
        await test_broker.publish(b"v", topic="t", key=b"k", headers={"h": "\xff"})
    assert len(got) == 1 and got[0][0].value == b"v"  # the raw records of the fetch
    assert consumer.committed == {}


class Fetches:
    """An aiokafka consumer's ``getmany`` answering from a script (an empty fetch, then
    records), then stopped as a stopping consumer is."""

    def __init__(self, *answers: dict[Any, list[ConsumerRecord[Any, Any]]]) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[int, int | None]] = []

    async def getmany(self, *, timeout_ms: int, max_records: int | None) -> Any:
        self.asked.append((timeout_ms, max_records))
        if not self.answers:
            raise ConsumerStoppedError
        return self.answers.pop(0)


async def test_the_consume_loop_hands_over_a_fetch_without_sleeping_after_an_empty_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """FastStream's batch subscriber sleeps ``batch_timeout_ms`` after an empty fetch: a record
    arriving meanwhile waited at every service it crossed. Its consume loop calls the
    subscriber's ``get_msg``, which ``fetch_promptly`` replaces with a fetch alone."""
    import faststream.kafka.subscriber.usecase as usecase

    async def no_sleep(seconds: float) -> None:
        raise AssertionError(f"the consume loop slept {seconds} s")

    monkeypatch.setattr(usecase.anyio, "sleep", no_sleep)
    settings = Settings("shoe")
    options = subscriber_options(settings, RebalanceListener(), title="t", description="d")
    subscriber: Any = service_broker(settings).subscriber("t", **options)
    fetch_promptly(subscriber, nothing)
    handed: list[Any] = []

    async def consume_one(message: Any) -> None:
        handed.append(message)

    subscriber.consume_one = consume_one
    subscriber.running = True
    fetches = Fetches({}, {"p0": [record(1, [])], "p1": [record(2, []), record(3, [])]})
    await subscriber._run_consume_loop(fetches)  # returns when the consumer stops
    assert [[r.offset for r in message] for message in handed] == [[1, 2, 3]]
    assert fetches.asked == [(options["batch_timeout_ms"], options["max_records"])] * 3


def test_a_service_s_subscriber_fetches_promptly_and_only_a_batch_one_can() -> None:
    definition = ServiceDefinition(name="counter", application=lambda env: CounterApp(env=env))
    service = KafkaService(definition, Settings("counter"))

    @service.subscriber("table-commands", description="d")
    async def handle(batch: Any) -> None: ...

    assert "get_msg" in vars(service.batch_subscriber)  # the instance's, not FastStream's
    one_by_one = service_broker(Settings("shoe")).subscriber("t")
    with pytest.raises(TypeError, match="batch subscriber"):
        fetch_promptly(one_by_one, nothing)


def test_a_cell_s_subscriber_is_assigned_its_partitions() -> None:
    cell = Settings("shoe").for_partition(2)
    broker = service_broker(cell)
    options = subscriber_options(cell, RebalanceListener(), title="t", description="d")
    subscriber = broker.subscriber(partitions=[TopicPartition("t", 2)], **options)
    assert [(tp.topic, tp.partition) for tp in subscriber.partitions] == [("t", 2)]


async def test_the_asgi_app_runs_the_four_lifespan_hooks_in_order() -> None:
    broker = service_broker(Settings("shoe"))
    seen: list[str] = []

    def hook(name: str) -> Any:
        async def run() -> None:
            seen.append(name)

        return run

    app = AsgiFastStream(
        broker,
        on_startup=[hook("on_startup")],
        after_startup=[hook("after_startup")],
        on_shutdown=[hook("on_shutdown")],
        after_shutdown=[hook("after_shutdown")],
    )
    async with TestKafkaBroker(broker), TestApp(app):
        await asyncio.sleep(0)
    assert seen == ["on_startup", "after_startup", "on_shutdown", "after_shutdown"]


def test_its_asyncapi_document_is_version_3_with_the_broker_s_channels() -> None:
    broker = service_broker(Settings("shoe"))
    broker.publisher("punto-banco.incidents", title="shoe publishes incidents", description="d")
    document = asyncapi_json([broker], title="pin")
    assert '"asyncapi":"3.0.0"' in document and "punto-banco.incidents" in document
