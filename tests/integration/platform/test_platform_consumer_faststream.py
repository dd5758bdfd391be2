"""The shoe service's FastStream application on FastStream's in-memory broker (TestKafkaBroker).

Fast checks of the real wiring: the service's subscriber hands what it receives to the batch
processor, which applies it once, commits the offset after the store, dead-letters what it
refuses with the original bytes, and the relay publishes the service's events. The same
behaviours are proven on real Kafka in tests/integration/platform/test_platform_edge_kafka.py
(TestKafkaBroker calls the handler with one record per publish, every record at offset 0).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import pytest
from aiokafka import TopicPartition
from faststream import TestApp
from faststream.kafka import TestKafkaBroker

from contracts import (
    DEAD_LETTERS,
    SHOE_COMMANDS,
    SHOE_EVENTS,
    STUDIO_READS,
    CloseShoe,
    DeadLetter,
    DrawCards,
    ShuffleShoe,
    decode,
    encode,
)
from services.shared.platform.host import KafkaService
from services.shared.platform.security import Where
from services.shared.platform.settings import Settings
from services.shoe.application import ShoeApplication
from services.shoe.service import build_service
from tests.signing_keys import key_env
from tests.unit.platform.fakes import FakeConsumer, FakeProducer
from tests.unit.platform.keys_fakes import KEYRING, SIGNERS

PREFIX = "p."


class Shoe:
    """The shoe service on TestKafkaBroker, its producers in memory."""

    def __init__(self, service: KafkaService[ShoeApplication], broker: object) -> None:
        self.service = service
        self.broker = broker
        self.dead_letters = service.consumer_options["producer"]
        self.relayed = service.relay_options["producer_factory"]()

    @property
    def kafka(self) -> FakeConsumer:
        subscriber = self.service.batch_subscriber
        assert subscriber is not None and isinstance(subscriber.consumer, FakeConsumer)
        return subscriber.consumer

    async def send(
        self, message: ShuffleShoe | DrawCards | CloseShoe, notification: int, signed: bool = True
    ) -> None:
        value = encode(message)
        headers = {
            "pb-source": "dealing",
            "pb-notification-id": str(notification),
            "pb-message-index": "0",
        }
        if signed:
            where = Where("cluster", PREFIX + SHOE_COMMANDS, 0)  # TestKafkaBroker's partition
            signature = SIGNERS["dealing"].sign(where, b"t1", value, notification, 0)
            headers["pb-sig"] = signature.decode()
        await self.broker.publish(  # type: ignore[attr-defined]
            value, topic=PREFIX + SHOE_COMMANDS, key=b"t1", headers=headers
        )

    def letters(self) -> list[DeadLetter]:
        return [
            letter
            for sent in self.dead_letters.sent
            if sent.topic == PREFIX + DEAD_LETTERS
            and isinstance(letter := decode(DEAD_LETTERS, sent.value), DeadLetter)
        ]


async def relayed(producer: FakeProducer, count: int) -> list[str]:
    """The types of the first ``count`` records the relay sent (waits for them)."""
    for _ in range(200):
        if len(producer.sent) >= count:
            break
        await asyncio.sleep(0.01)
    return [dict(sent.headers)["pb-type"].decode() for sent in producer.sent]


@pytest.fixture
async def shoe(tmp_path: Path) -> AsyncIterator[Shoe]:
    env = {"PB_DATA_DIR": str(tmp_path), "PB_TOPIC_PREFIX": PREFIX, **key_env()}
    service = build_service(Settings.from_env("shoe", env))
    service.create_topics = False

    async def topic_ids(topics: Iterable[str]) -> dict[str, str]:
        return dict.fromkeys(topics, "topic-id")

    relay_producer = FakeProducer()
    service.relay_options = {"producer_factory": lambda: relay_producer}
    service.consumer_options = {
        "producer": FakeProducer(),
        "cluster_id": "cluster",
        "topic_ids": topic_ids,
        "keyring": KEYRING,
    }
    async with (
        TestKafkaBroker(service.broker, connect_only=True) as broker,
        TestApp(service.fast),
    ):
        subscriber = service.batch_subscriber
        assert subscriber is not None
        # offsets committed here; TestKafkaBroker's one partition is assigned
        subscriber.consumer = FakeConsumer(assigned={TopicPartition(PREFIX + SHOE_COMMANDS, 0)})
        yield Shoe(service, broker)


async def test_a_command_is_applied_once_and_its_offset_committed(shoe: Shoe) -> None:
    shuffle = ShuffleShoe(table_id="t1", shoe_id="s1", decks=1, cut_card_from_end=10)
    await shoe.send(shuffle, 1)
    await shoe.send(shuffle, 1)  # republished by dealing's relay: a duplicate
    await shoe.send(
        DrawCards(table_id="t1", shoe_id="s1", coup_id="c1", request_id="r", count=4), 2
    )
    app = shoe.service.app
    found = app.get_shoe("t1", "s1")
    assert found is not None
    consumer = shoe.service.consumer
    assert consumer is not None
    assert (consumer.stats.handled, consumer.stats.duplicates) == (2, 1)
    assert shoe.kafka.committed  # after the store: every record here is at offset 0
    assert app.tracked_position(f"dealing:{SHOE_COMMANDS}:0") == 2 * 2**20
    types = await relayed(shoe.relayed, count=6)  # the relay runs as the app's task
    assert types.count("ShoeShuffled") == 1 and types.count("CardDrawn") == 4
    assert {sent.topic for sent in shoe.relayed.sent} == {PREFIX + SHOE_EVENTS}


async def test_an_unsigned_or_undecodable_command_is_a_dead_letter_with_its_bytes(
    shoe: Shoe,
) -> None:
    shuffle = ShuffleShoe(table_id="t1", shoe_id="s1", decks=1, cut_card_from_end=10)
    await shoe.send(shuffle, 1, signed=False)
    await shoe.broker.publish(  # type: ignore[attr-defined]
        b"\xff not json", topic=PREFIX + SHOE_COMMANDS, key=b"t1"
    )
    letters = shoe.letters()
    assert [letter.error.split(":")[0] for letter in letters] == ["signature", "untrusted headers"]
    assert base64.b64decode(letters[0].payload_b64) == encode(shuffle)
    assert base64.b64decode(letters[1].payload_b64) == b"\xff not json"
    assert shoe.service.app.get_shoe("t1", "s1") is None
    consumer = shoe.service.consumer
    assert consumer is not None and consumer.stats.dead_letters == 2


async def test_the_subscriber_declared_in_service_py_reads_the_shoe_commands(shoe: Shoe) -> None:
    subscriber = shoe.service.batch_subscriber
    assert subscriber is not None and subscriber in shoe.service.broker.subscribers
    assert subscriber.topic_names == [PREFIX + SHOE_COMMANDS, PREFIX + STUDIO_READS]
    assert shoe.service.inputs == (SHOE_COMMANDS, STUDIO_READS)


async def test_a_close_of_a_table_of_another_partition_closes_no_shoe(shoe: Shoe) -> None:
    """Dealing's genuine signature, but read where t1's history is not (t1 belongs in
    partition 1 of 3, TestKafkaBroker delivers to 0): not the request of the cell owning the
    table. The shoe closes nothing and reveals nothing: an incident."""
    await shoe.send(ShuffleShoe(table_id="t1", shoe_id="s1", decks=1, cut_card_from_end=10), 1)
    shoe.kafka.partitions = 3
    await shoe.send(CloseShoe(table_id="t1", shoe_id="s1"), 2)
    found = shoe.service.app.get_shoe("t1", "s1")
    assert found is not None and not found.closed
    types = await relayed(shoe.relayed, count=3)
    assert "IncidentRaised" in types and "ShoeClosed" not in types
