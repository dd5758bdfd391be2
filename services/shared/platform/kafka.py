"""Kafka clients configured alike (:func:`client_options`), topics created with their configs, the
partitioner every table's records must follow (murmur2 of the table id: :func:`key_partition`),
and a fetch no record can stop (:class:`SafeFetch`).

:func:`ensure_topics` creates what is missing with its :data:`TOPIC_CONFIGS` and aligns an
existing topic's configs (keeping its other dynamic configs); a principal that may not is told
so, and the service still starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import (
    ConsumerStoppedError,
    CorruptRecordException,
    KafkaError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from aiokafka.partitioner import murmur2

from contracts import (
    BET_COMMANDS,
    SEALS,
    SHOE_EVENTS,
    TOPIC_MESSAGES,
    base_topic,
    operator_topics,
)
from services.shared.platform.settings import Settings

log = logging.getLogger(__name__)

SOURCE_HEADER = "pb-source"
NOTIFICATION_HEADER = "pb-notification-id"
INDEX_HEADER = "pb-message-index"
TYPE_HEADER = "pb-type"
"""The message type (``BetSettled``...): lets a reader skip what it does not need unparsed."""
SIGNATURE_HEADER = "pb-sig"
"""The writer's signature of the record (``signing.py``): a detached JWS."""


@lru_cache(maxsize=65_536)
def key_partition(key: bytes, partitions: int) -> int:
    """The partition of a record keyed ``key`` on a topic of ``partitions`` partitions: Kafka's
    default partitioner (murmur2 of the key, made positive, modulo the count), which every
    message of a table must be sent with (key = table id: docs/integrating.md). Cached: murmur2
    in pure Python costs about 2.6 us, a cached answer 0.07 us."""
    return int(murmur2(key) & 0x7FFFFFFF) % partitions


def table_partition(table_id: str, partitions: int) -> int:
    """The partition of a table's records on every topic (:func:`key_partition`)."""
    return key_partition(table_id.encode(), partitions)


PROJECT_TOPICS: tuple[str, ...] = tuple(TOPIC_MESSAGES)
"""Every logical topic of the project (commands, events, dead letters): the house's."""


def project_topics(settings: Settings) -> tuple[str, ...]:
    """The logical topics of a deployment: the project's and its operators' own."""
    return tuple(dict.fromkeys((*PROJECT_TOPICS, *operator_topics(settings.operators))))


def topic_config(logical: str) -> Mapping[str, str]:
    """The configs a logical topic must have (an operator's topic: its base topic's)."""
    return TOPIC_CONFIGS.get(base_topic(logical), {})


TIMESTAMP_TYPE = "message.timestamp.type"
LOG_APPEND_TIME = "LogAppendTime"

TOPIC_CONFIGS: Mapping[str, Mapping[str, str]] = {
    # The broker's append time is when a bet was placed: settlement judges a bet's time by it.
    BET_COMMANDS: {TIMESTAMP_TYPE: LOG_APPEND_TIME},
    # ... and when the shoe drew a card: settlement refuses a card appended before the coup's
    # CloseBook mark (no genuine card leaves the shoe while bets are taken).
    SHOE_EVENTS: {TIMESTAMP_TYPE: LOG_APPEND_TIME},
    # The seal anchors are evidence: kept forever, never compacted (services/tools/audit).
    SEALS: {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"},
}
"""Configs a logical topic must have (set at creation, altered on existing topics)."""

_DYNAMIC_TOPIC_CONFIG = 1
"""DescribeConfigs ``config_source`` of a config set on the topic itself."""


def client_options(settings: Settings) -> dict[str, Any]:
    """What every aiokafka client of the service connects with: servers and security."""
    return {
        "bootstrap_servers": settings.kafka_bootstrap_servers,
        **settings.kafka_auth.client_options(),
    }


MAX_BATCH_BYTES = 1_000_000
"""A producer's record batch at most: under the broker's default ``message.max.bytes`` (1 MiB +
12 bytes), so a coup's 10,001 answers (about 5.5 MB) take a quarter of the acknowledged round
trips that 256 KiB took (BENCHMARKS.md, issue 25)."""


def idempotent_producer(settings: Settings, role: str) -> AIOKafkaProducer:
    """An idempotent producer (acks=all): retries never duplicate or reorder within a partition."""
    return AIOKafkaProducer(
        **client_options(settings),
        client_id=f"pb-{settings.service}-{role}",
        enable_idempotence=True,
        acks="all",
        linger_ms=2,
        max_batch_size=MAX_BATCH_BYTES,
        request_timeout_ms=30_000,
    )


@asynccontextmanager
async def _admin(settings: Settings) -> AsyncIterator[AIOKafkaAdminClient]:
    """The service's admin client, started, closed on leaving."""
    admin = AIOKafkaAdminClient(
        **client_options(settings), client_id=f"pb-{settings.service}-admin"
    )
    await admin.start()
    try:
        yield admin
    finally:
        await admin.close()


async def ensure_topics(settings: Settings, topics: Iterable[str] | None = None) -> list[str]:
    """Create the (prefixed) project topics that do not exist yet; returns the ones created."""
    logical = list(dict.fromkeys(project_topics(settings) if topics is None else topics))
    async with _admin(settings) as admin:
        existing = set(await admin.list_topics())
        missing = [t for t in logical if settings.topic(t) not in existing]
        if missing:
            await _create(admin, settings, missing)
        present = [t for t in logical if topic_config(t) and t not in missing]
        if present:
            await _align_configs(admin, {settings.topic(t): topic_config(t) for t in present})
    return [settings.topic(t) for t in missing]


async def _create(admin: AIOKafkaAdminClient, settings: Settings, logical: list[str]) -> None:
    names = [settings.topic(t) for t in logical]
    response = await admin.create_topics(
        [
            NewTopic(
                name=settings.topic(t),
                num_partitions=settings.topic_partitions,
                replication_factor=settings.topic_replication_factor,
                topic_configs=dict(topic_config(t)),
            )
            for t in logical
        ]
    )
    concurrent: dict[str, Mapping[str, str]] = {}
    denied: list[str] = []
    for name, code, *rest in response.topic_errors:
        # 36 = TOPIC_ALREADY_EXISTS: created concurrently by another service.
        if code == TopicAlreadyExistsError.errno:
            wanted = topic_config(settings.logical_topic(name))
            if wanted:
                concurrent[name] = wanted
        elif code == TopicAuthorizationFailedError.errno:
            denied.append(name)  # a principal without CREATE: the admin makes the topics
        elif code != 0:
            message = rest[0] if rest else ""
            raise RuntimeError(f"cannot create Kafka topic {name}: error {code} {message}")
    if denied:
        log.info(
            "not allowed to create Kafka topics %s (nor to see them if they exist): this "
            "principal may not, the administrator creates them (`punto-banco infra up` does)",
            ", ".join(denied),
        )
    if len(denied) < len(names):
        log.info("created topics %s", ", ".join(n for n in names if n not in denied))
    if concurrent:  # created by someone else at the same moment: check its configs too
        await _align_configs(admin, concurrent)


async def topic_configs(
    admin: AIOKafkaAdminClient, topics: Iterable[str], wait: float = 10.0
) -> dict[str, Any]:
    """Per (prefixed) topic name: config name -> (value, config_source). A topic just created
    may be unknown for a moment: asked again for ``wait`` seconds. TopicAuthorizationFailedError:
    the principal may not describe its configs (no DESCRIBE_CONFIGS)."""
    names = list(topics)
    deadline = asyncio.get_running_loop().time() + wait
    while True:
        try:
            return await _topic_configs(admin, names)
        except UnknownTopicOrPartitionError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.1)


async def _topic_configs(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, Any]:
    resources = [ConfigResource(ConfigResourceType.TOPIC, name) for name in names]
    found: dict[str, dict[str, tuple[str | None, int]]] = {}
    for response in await admin.describe_configs(resources):
        for resource in response.to_object()["resources"]:
            if resource["error_code"] == UnknownTopicOrPartitionError.errno:
                raise UnknownTopicOrPartitionError(f"Kafka topic {resource['resource_name']}")
            if resource["error_code"] == TopicAuthorizationFailedError.errno:
                raise TopicAuthorizationFailedError(resource["resource_name"])
            if resource["error_code"]:
                raise RuntimeError(
                    f"cannot read the config of Kafka topic {resource['resource_name']}: "
                    f"error {resource['error_code']} {resource['error_message'] or ''}"
                )
            found[resource["resource_name"]] = {
                entry["config_names"]: (entry["config_value"], entry["config_source"])
                for entry in resource["config_entries"]
            }
    return found


async def _align_configs(
    admin: AIOKafkaAdminClient, wanted: Mapping[str, Mapping[str, str]]
) -> None:
    """Alter the existing topics in ``wanted`` whose configs differ from it."""
    try:
        current = await topic_configs(admin, wanted)
        changes: list[ConfigResource] = []
        for name, configs in wanted.items():
            have = current.get(name, {})
            if all(have.get(key, (None, 0))[0] == value for key, value in configs.items()):
                continue
            # AlterConfigs REPLACES the topic's dynamic configs: send the others back too.
            keep = {
                key: value
                for key, (value, source) in have.items()
                if source == _DYNAMIC_TOPIC_CONFIG and value is not None
            }
            changes.append(
                ConfigResource(ConfigResourceType.TOPIC, name, {**keep, **dict(configs)})
            )
        if not changes:
            return
        for response in await admin.alter_configs(changes):
            for code, message, _type, name in response.resources:
                if code:
                    raise RuntimeError(f"error {code} {message or ''} on {name}")
        log.warning(
            "changed the config of existing topics: %s",
            "; ".join(f"{c.name} {c.configs}" for c in changes),
        )
    except TopicAuthorizationFailedError:
        # A least-privileged principal: the administrator set the configs with the topics.
        log.info(
            "not allowed to check the configs of Kafka topics %s: the administrator sets them",
            ", ".join(wanted),
        )
    except (KafkaError, RuntimeError) as error:
        # Settlement still works: it falls back to the time it received each bet.
        log.error(
            "cannot give Kafka topics %s their configs %s (%s); set them by hand "
            "(kafka-configs --alter --entity-type topics ...)",
            ", ".join(wanted),
            dict(next(iter(wanted.values()))),
            error,
        )


async def cluster_id(settings: Settings) -> str:
    """The Kafka cluster's id (from the cluster metadata); raises if the broker has none."""
    async with _admin(settings) as admin:
        found = (await admin.describe_cluster()).get("cluster_id")
    if not found:
        raise RuntimeError(
            f"Kafka at {settings.kafka_bootstrap_servers} reports no cluster id "
            "(Kafka 0.10.1 or newer is needed)"
        )
    return str(found)


@dataclass
class UnreadableRecord(ConsumerRecord[Any, Any]):  # type: ignore[misc]
    """The place of a record the Kafka client cannot parse (no key, value or header of it can
    be read): dead-lettered with ``reason``."""

    reason: str = ""


Records = tuple[ConsumerRecord[Any, Any], ...]
CAREFUL_WAIT_MS = 1000
"""How long a partition read alone waits for its records (a fetch after a seek takes a while)."""
CAREFUL_TRIES = 5
"""Reads alone of a partition behind its high watermark that may come back empty."""


def _unparsable(error: Exception) -> bool:
    """A record the client cannot parse: C records raise what the bytes raise (UnicodeDecodeError
    for a header key not UTF-8), pure-Python ones CorruptRecordException; other Kafka errors,
    and a stopped consumer, are the consume loop's."""
    return isinstance(error, CorruptRecordException) or not isinstance(
        error, KafkaError | ConsumerStoppedError
    )


class SafeFetch:
    """``getmany`` that no record can stop.

    aiokafka raises when it parses a record it cannot read (a header key that is not UTF-8),
    which a forged record may hold. The fetch fails whole: the records it had taken from other
    partitions are lost with it (their positions moved on), and every fetch that reaches the
    record fails the same way. So, after such a failure, every partition is sought back to its
    committed offset (what was handled since is read again: the store's positions make that
    safe), or with ``snapshot`` (a reader without a group, which commits nothing) to where it
    stood before the fetch, and read alone, each once; the one that fails is read a record at a
    time from where it stood, and a record that cannot be read is passed over as an
    :class:`UnreadableRecord`. The client parses a batch from its start, so the records after
    it in its batch cannot be read either: each is passed over likewise, up to the first
    record read (the next batch), and the fetch goes on as before."""

    def __init__(self, *, snapshot: bool = False) -> None:
        self._alone: list[TopicPartition] = []  # partitions still to read alone
        self._snapshot = snapshot

    async def __call__(
        self, consumer: AIOKafkaConsumer, timeout_ms: int, max_records: int | None
    ) -> Records:
        if self._alone:
            return await self._next_alone(consumer, max_records)
        stood = (
            {tp: await consumer.position(tp) for tp in consumer.assignment()}
            if self._snapshot
            else {}
        )
        try:
            found = await consumer.getmany(timeout_ms=timeout_ms, max_records=max_records)
        except Exception as error:
            if not _unparsable(error):
                raise
            log.exception("a fetch raised; reading each partition alone to find the record")
            self._alone = sorted(consumer.assignment() - consumer.paused())
            for tp in self._alone:
                committed = stood[tp] if self._snapshot else await consumer.committed(tp)
                if committed is None:
                    await consumer.seek_to_beginning(tp)
                else:
                    consumer.seek(tp, committed)
            return ()
        return tuple(chain.from_iterable(found.values()))

    async def _next_alone(self, consumer: AIOKafkaConsumer, max_records: int | None) -> Records:
        tp = self._alone.pop(0)
        if tp not in consumer.assignment():
            return ()
        start = await consumer.position(tp)
        try:
            return await _read_alone(consumer, tp, max_records)
        except Exception as error:
            if not _unparsable(error):
                self._alone.append(tp)  # read again after the others
                raise
        consumer.seek(tp, start)
        return await _one_at_a_time(consumer, tp, max_records)


async def _read_alone(
    consumer: AIOKafkaConsumer, tp: TopicPartition, max_records: int | None
) -> Records:
    """``tp``'s next records, read alone (none: it is read to its end, or stays silent). A
    partition at its high watermark is not waited for (a fetch that failed on a record set its
    partition's above the record)."""
    for _ in range(CAREFUL_TRIES):
        highwater = consumer.highwater(tp)
        if highwater is not None and await consumer.position(tp) >= highwater:
            break
        found = await consumer.getmany(tp, timeout_ms=CAREFUL_WAIT_MS, max_records=max_records)
        if found.get(tp):
            return tuple(found[tp])
    return ()


async def _one_at_a_time(
    consumer: AIOKafkaConsumer, tp: TopicPartition, max_records: int | None
) -> Records:
    """``tp``'s records one at a time, those that cannot be read passed over, up to the first
    record read after them (or ``max_records``, or its end)."""
    records: list[ConsumerRecord[Any, Any]] = []
    passed = False
    while max_records is None or len(records) < max_records:
        offset = await consumer.position(tp)  # a failed read leaves it where it was
        try:
            read = await _read_alone(consumer, tp, 1)
        except Exception as error:
            if not _unparsable(error):
                raise
            consumer.seek(tp, offset + 1)
            log.error("%s:%d@%d cannot be read: %r", tp.topic, tp.partition, offset, error)
            why = (
                "the Kafka client cannot read this record, or one before it in its batch: "
                f"{error!r}"
            )[:300]
            records.append(
                UnreadableRecord(
                    tp.topic, tp.partition, offset, -1, 0, None, None, None, -1, -1, (), why
                )
            )
            passed = True
            continue
        records += read
        if not read or passed:
            break
    return tuple(records)
