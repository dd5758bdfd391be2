"""Small Kafka helpers for integration tests: send raw records, read a topic from the start."""

from __future__ import annotations

import asyncio
import concurrent.futures
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.client import AIOKafkaClient
from aiokafka.errors import TopicAuthorizationFailedError
from aiokafka.protocol.metadata import MetadataRequest
from aiokafka.record.util import calc_crc32c

from contracts import (
    EXTERNAL,
    MESSAGE_SOURCES,
    TOPIC_OWNERS,
    Message,
    decode,
    encode,
    partition_key,
)
from services.dev.infra.kafka_clients import ADMIN
from services.shared.platform.host import KafkaService, ServiceDefinition
from services.shared.platform.host.service import TApp
from services.shared.platform.kafka import (
    PROJECT_TOPICS,
    SIGNATURE_HEADER,
    client_options,
    cluster_id,
    ensure_topics,
    key_partition,
)
from services.shared.platform.security import Signer, Where, load_keyring, signer_for
from services.shared.platform.settings import Settings, replace
from tests import kafka_logins
from tests.kafka_cleanup import created_under
from tests.signing_keys import ensure_key, key_env


def settings_for(
    service: str,
    kafka_bootstrap: str,
    *,
    data_dir: Any = None,
    postgres_env: dict[str, str] | None = None,
    prefix: str | None = None,
    principal: str | None = None,
    **overrides: Any,
) -> Settings:
    """Settings with a unique topic prefix (and PostgreSQL schema prefix) for one test, and
    the session's signing keys (tests/signing_keys.py; ``service`` gets one if it has none).

    Kafka: as ``principal`` (default: the service's own, the admin for a test's own service,
    tests/kafka_logins.py); on an authenticating broker the prefix's project topics are made
    and the ACL matrix granted for them first, as `infra up` does for the unprefixed ones.
    """
    tag = prefix or f"t{secrets.token_hex(4)}"
    created_under(f"{tag}.")  # deleted at the end of the session
    ensure_key(service)
    login = principal or kafka_logins.principal_of(service)
    env: dict[str, str] = {
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "PB_TOPIC_PREFIX": f"{tag}.",
        "PB_POSTGRES_SCHEMA_PREFIX": f"{tag}_",
        "PB_PERSISTENCE": "postgres" if postgres_env else "sqlite",
        **key_env(),
        **kafka_logins.env(login),
    }
    if postgres_env:
        env.update(postgres_env)
    if data_dir is not None:
        env["PB_DATA_DIR"] = str(data_dir)
    settings = Settings.from_env(service, env, **overrides)
    if login != ADMIN:  # the admin makes its topics itself
        kafka_logins.secure(settings.topic_prefix, settings.topic_partitions, settings.operators)
    return settings


def as_admin(settings: Settings) -> Settings:
    """``settings`` logged in as the broker's admin: what a test's own set-up and probes use
    (it writes as any service, reads every topic, makes topics)."""
    if not settings.kafka_auth.sasl:  # a broker without authentication (a test's own)
        return settings
    return replace(settings, kafka_auth=kafka_logins.auth(ADMIN))


@dataclass(frozen=True)
class Received:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: dict[str, bytes]

    def message(self, logical_topic: str) -> Message:
        return decode(logical_topic, self.value)


async def send_raw(
    settings: Settings,
    logical_topic: str,
    records: Sequence[tuple[bytes | None, bytes]],
    headers: Sequence[tuple[str, bytes]] = (),
) -> None:
    """Send ``records`` (key, value) to the topic, each with ``headers``."""
    await send_records(settings, logical_topic, [(key, value, headers) for key, value in records])


async def send_records(
    settings: Settings,
    logical_topic: str,
    records: Sequence[tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]],
) -> None:
    """Send ``records`` (key, value, headers) to the topic, in order (as the admin; a project
    topic is made first as the service would make it: an authenticating broker creates no
    topic on use)."""
    if logical_topic in PROJECT_TOPICS:
        await ensure_topics(as_admin(settings), [logical_topic])
    producer = AIOKafkaProducer(**client_options(as_admin(settings)), acks="all")
    await producer.start()
    try:
        futures = [
            await producer.send(
                settings.topic(logical_topic), value=value, key=key, headers=list(headers) or None
            )
            for key, value, headers in records
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def send_unreadable(
    settings: Settings,
    logical_topic: str,
    key: bytes,
    values: Sequence[bytes],
    unreadable: int,
    partition: int,
) -> int:
    """Send ``values`` in one record batch, record ``unreadable`` with a header key that is not
    UTF-8, as a client other than aiokafka can write it (librdkafka takes a header name as
    bytes): the broker keeps it, aiokafka raises UnicodeDecodeError parsing it. The batch's
    first offset."""
    producer = AIOKafkaProducer(**client_options(as_admin(settings)), acks="all")
    await producer.start()
    try:
        batch = producer.create_batch()
        for index, value in enumerate(values):
            headers = [("Q", b"v")] if index == unreadable else []
            batch.append(key=key, value=value, timestamp=None, headers=headers)
        raw = bytearray(batch._builder.build())
        raw[raw.index(b"Q\x02v")] = 0xFF  # the header key "Q" becomes b"\xff"
        raw[17:21] = calc_crc32c(bytes(raw[21:])).to_bytes(4, "big")  # the batch's CRC again
        batch._buffer = bytes(raw)
        sent = await producer.send_batch(batch, settings.topic(logical_topic), partition=partition)
        return int((await sent).offset)
    finally:
        await producer.stop()


def relay_headers(source: str, notification: int, index: int = 0) -> list[tuple[str, bytes]]:
    """The headers a service's outbox relay puts on a message it publishes."""
    return [
        ("pb-source", source.encode()),
        ("pb-notification-id", str(notification).encode()),
        ("pb-message-index", str(index).encode()),
    ]


_last_notification = 0


def next_notification() -> int:
    """A notification id for a test posing as a relay: increasing, from the time in ms."""
    global _last_notification
    _last_notification = max(_last_notification + 1, int(time.time() * 1000))
    return _last_notification


_signers: dict[tuple[str, str], Signer] = {}


def signer_as(settings: Settings, service: str) -> Signer:
    """``service``'s signer, from where ``settings`` (for any service) say its key is."""
    own = settings.for_service(service)
    found = (str(own.signing_key_path), str(own.keyring_path))
    if found not in _signers:
        _signers[found] = signer_for(own, load_keyring(own))
    return _signers[found]


_clusters: dict[str, str] = {}


def cluster_of(settings: Settings) -> str:
    """The id of the Kafka cluster ``settings`` name (read once, in a thread of its own: the
    tests' helpers that sign are not coroutines)."""
    servers = settings.kafka_bootstrap_servers
    if servers not in _clusters:
        with concurrent.futures.ThreadPoolExecutor(1) as thread:
            asked = thread.submit(asyncio.run, cluster_id(as_admin(settings)))
            _clusters[servers] = asked.result(timeout=60)
    return _clusters[servers]


def signed_headers(
    settings: Settings,
    service: str,
    logical_topic: str,
    key: bytes,
    value: bytes,
    notification: int,
    index: int = 0,
) -> list[tuple[str, bytes]]:
    """The relay headers and signature ``service``'s relay puts on a record it publishes
    (signed for the partition murmur2 gives ``key`` on a topic of the settings' partitions)."""
    topic = settings.topic(logical_topic)
    where = Where(cluster_of(settings), topic, key_partition(key, settings.topic_partitions))
    signature = signer_as(settings, service).sign(where, key, value, notification, index)
    return [*relay_headers(service, notification, index), (SIGNATURE_HEADER, signature)]


def signed_record(
    settings: Settings,
    service: str,
    logical_topic: str,
    record: tuple[bytes, bytes],
    notification: int,
    index: int = 0,
) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """(key, value, headers) of ``record`` as ``service``'s relay publishes it (for
    ``send_records``)."""
    key, value = record
    headers = signed_headers(settings, service, logical_topic, key, value, notification, index)
    return key, value, headers


async def send_messages(
    settings: Settings, logical_topic: str, messages: Sequence[Message]
) -> None:
    """Send contract messages, keyed by table.

    A message only one service sends (on a topic with an owner, ``contracts.TOPIC_OWNERS``,
    or dealing's marks on bet-commands) goes as that service's relay sends it: with its
    headers, signed with its key (where ``settings`` say the keys are), as one new
    notification (``next_notification``) whose messages are indexed in order.
    """
    notification = next_notification()
    records: list[tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]] = []
    for index, message in enumerate(messages):
        key, value = partition_key(message), encode(message)
        sender = TOPIC_OWNERS.get(logical_topic) or MESSAGE_SOURCES.get(message.type, EXTERNAL)
        headers: list[tuple[str, bytes]] = []
        if sender != EXTERNAL:
            headers = signed_headers(
                settings, sender, logical_topic, key, value, notification, index
            )
        records.append((key, value, headers))
    await send_records(settings, logical_topic, records)


async def read_topic(
    settings: Settings,
    logical_topic: str,
    until: Callable[[list[Received]], bool],
    timeout: float = 30.0,
    *,
    own_login: bool = False,
) -> list[Received]:
    """Everything on the topic from the beginning, until ``until(records)`` or the timeout;
    as the admin (who makes the topics first), or with ``own_login`` as ``settings``' own
    principal."""
    if not own_login:
        await ensure_topics(as_admin(settings))
    topic = settings.topic(logical_topic)
    consumer = AIOKafkaConsumer(
        **client_options(settings if own_login else as_admin(settings)),
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        group_id=None,
    )
    await consumer.start()
    try:
        partitions = sorted(await _partitions(consumer, topic))
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        received: list[Received] = []
        deadline = time.monotonic() + timeout
        while not until(received):
            if time.monotonic() > deadline:
                break
            batch = await consumer.getmany(timeout_ms=200)
            for tp, records in batch.items():
                for r in records:
                    received.append(
                        Received(
                            tp.topic,
                            tp.partition,
                            r.offset,
                            r.key,
                            r.value,
                            {k: v for k, v in (r.headers or ())},
                        )
                    )
        return received
    finally:
        await consumer.stop()


async def refuse_undescribed(bootstrap: str, options: Mapping[str, Any], topic: str) -> None:
    """TopicAuthorizationFailedError if the broker answers error 29 for ``topic``'s metadata
    to the client logged in with ``options`` (aiokafka keyword arguments).

    A consumer assigned a topic it may not even DESCRIBE never fetches: aiokafka only logs
    "not authorized" at each metadata refresh; the broker's refusal is in the metadata.
    """
    client = AIOKafkaClient(bootstrap_servers=bootstrap, **options)
    await client.bootstrap()
    try:
        node = client.cluster.brokers().pop().nodeId
        response = await client.send(node, MetadataRequest([topic], False))
    finally:
        await client.close()
    (code, name, *_rest) = response.topics[0]
    if code == TopicAuthorizationFailedError.errno:
        raise TopicAuthorizationFailedError(name)
    assert code == 0, code


async def _partitions(consumer: AIOKafkaConsumer, topic: str) -> set[int]:
    for _ in range(50):
        partitions = consumer.partitions_for_topic(topic)
        if partitions:
            return set(partitions)
        await consumer._client.force_metadata_update()
        await asyncio.sleep(0.1)
    raise RuntimeError(f"topic {topic} has no partitions")


def hosted(
    definition: ServiceDefinition[TApp], settings: Settings, *topics: str
) -> KafkaService[TApp]:
    """A test's service (it has no ``service.py``) as the platform runs it: its one batch
    subscriber reads the logical ``topics``, which ``definition.subscriptions`` handle."""
    service = KafkaService(definition, settings)

    @service.subscriber(*topics, description=f"The {definition.name} test service reads these.")
    async def consume(batch: list[Any]) -> None:
        await service.consume(batch)

    return service
