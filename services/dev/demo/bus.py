"""Kafka for a client of the system: send commands, follow event topics (plain aiokafka).

Everything goes through :mod:`contracts`: :func:`contracts.encode` / :func:`contracts.decode`,
the message's topic (:func:`contracts.topic_for`) behind the run's topic prefix, and its table
id as the key (:func:`contracts.partition_key`), so a table's messages stay in order.

Operators (``PB_OPERATORS``): each simulated bettor is one operator's (:func:`operator_of`,
by its id), so the run's bets go through every operator's gateway topic at the same tables,
and the demo follows every operator's bet-events topic.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from aiokafka.partitioner import DefaultPartitioner

from contracts import (
    BET_COMMANDS,
    BOOK_EVENTS,
    COMMAND_EVENTS,
    DEAD_LETTERS,
    HOUSE,
    SHOE_EVENTS,
    TABLE_COMMANDS,
    TABLE_EVENTS,
    TOPIC_MESSAGES,
    ContractError,
    Message,
    PlaceBet,
    bet_commands_topic,
    bet_events_topic,
    decode,
    encode,
    operator_topics,
    partition_key,
    topic_for,
)
from services.dev.infra.kafka_clients import ADMIN, GATEWAY, OPERATOR, KafkaLogins, sender_of
from services.shared.platform.settings import KafkaAuth

log = logging.getLogger(__name__)


def event_topics(operators: Sequence[str] = (HOUSE,)) -> tuple[str, ...]:
    """What the demo follows: every service's events (every operator's bet events, dealing's
    answers to table commands), and the dead letters."""
    bets = tuple(bet_events_topic(operator) for operator in operators)
    return (SHOE_EVENTS, TABLE_EVENTS, COMMAND_EVENTS, *bets, BOOK_EVENTS, DEAD_LETTERS)


EVENT_TOPICS: tuple[str, ...] = event_topics()
"""The house's alone."""


def operator_of(bettor_id: str, operators: Sequence[str]) -> str:
    """The operator a simulated bettor plays through (stable: by a checksum of its id)."""
    return operators[zlib.crc32(bettor_id.encode()) % len(operators)]


RAW_SENDERS = {BET_COMMANDS: GATEWAY, TABLE_COMMANDS: OPERATOR}
"""Who writes raw bytes to a topic in a test (anything else: the admin)."""


NOBODY = KafkaAuth()
"""PLAINTEXT: a broker without authentication."""


async def ensure_topics(
    bootstrap: str,
    prefix: str,
    partitions: int = 3,
    timeout: float = 30.0,
    operators: Sequence[str] = (HOUSE,),
    auth: KafkaAuth = NOBODY,
) -> None:
    """Create the run's (prefixed) project topics that are missing (every operator's too: the
    services set their configs when they start), as ``auth``, who must be allowed to (on the
    local authenticating broker the admin does it, see ``KafkaLogins.secure_run``)."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap,
        client_id="pb-demo-admin",
        request_timeout_ms=10_000,
        **auth.client_options(),
    )
    await asyncio.wait_for(admin.start(), timeout)
    try:
        existing = set(await asyncio.wait_for(admin.list_topics(), timeout))
        topics = dict.fromkeys((*TOPIC_MESSAGES, *operator_topics(operators)))
        missing = [prefix + topic for topic in topics if prefix + topic not in existing]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):
                await asyncio.wait_for(
                    admin.create_topics(
                        [
                            NewTopic(name, num_partitions=partitions, replication_factor=1)
                            for name in missing
                        ]
                    ),
                    timeout,
                )
    finally:
        await admin.close()


async def delete_topics(
    bootstrap: str, prefix: str, timeout: float = 30.0, auth: KafkaAuth = NOBODY
) -> int:
    """Delete every topic whose name starts with ``prefix`` (a run's own); how many.

    A reused local broker otherwise keeps every run's topics: thousands of partitions
    slow it down for the runs after (and they are nobody's data).
    """
    if not prefix:
        raise ValueError("refusing to delete every topic: give a run's own prefix")
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap,
        client_id="pb-demo-admin",
        request_timeout_ms=30_000,
        **auth.client_options(),
    )
    await asyncio.wait_for(admin.start(), timeout)
    try:
        names = [
            t for t in await asyncio.wait_for(admin.list_topics(), timeout) if t.startswith(prefix)
        ]
        if names:
            await asyncio.wait_for(admin.delete_topics(names), timeout)
        return len(names)
    finally:
        await admin.close()


async def cluster_id(bootstrap: str, timeout: float = 30.0, auth: KafkaAuth = NOBODY) -> str:
    """The Kafka cluster's id (a new broker data folder gets a new one)."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, client_id="pb-demo-admin", **auth.client_options()
    )
    await asyncio.wait_for(admin.start(), timeout)
    try:
        described = await asyncio.wait_for(admin.describe_cluster(), timeout)
    finally:
        await admin.close()
    return str(described.get("cluster_id") or "")


@dataclass
class Received:
    """One record of a followed topic: the decoded message, or why it could not be."""

    topic: str  # logical (without prefix)
    message: Message | None
    error: str | None = None


class CommandSender:
    """Idempotent producers for commands (and, in tests, raw bytes), one per principal that
    sends them (``kafka_clients.sender_of``: the gateway's bets, the operator's table
    commands, the supervisor's voids); a single one when everyone logs in alike."""

    def __init__(
        self,
        bootstrap: str,
        prefix: str = "",
        client_id: str = "pb-demo",
        operators: Sequence[str] = (HOUSE,),
        logins: KafkaLogins | None = None,
    ) -> None:
        self.prefix = prefix
        self.operators = tuple(operators)
        self._bootstrap = bootstrap
        self._client_id = client_id
        self._logins = logins if logins is not None else KafkaLogins()
        self._producers: dict[str, AIOKafkaProducer] = {}
        self._partitioner = DefaultPartitioner()
        self._pending: list[asyncio.Future[object]] = []

    async def start(self, timeout: float = 30.0) -> None:
        for principal in (GATEWAY, OPERATOR):  # the usual senders: fail early
            await asyncio.wait_for(self._producer(principal), timeout)

    async def _producer(self, principal: str) -> AIOKafkaProducer:
        """``principal``'s producer, started on first use."""
        slot = principal if self._logins.home is not None else "shared"
        producer = self._producers.get(slot)
        if producer is None:
            producer = AIOKafkaProducer(
                bootstrap_servers=self._bootstrap,
                client_id=self._client_id if slot == "shared" else f"{self._client_id}-{slot}",
                enable_idempotence=True,
                acks="all",
                linger_ms=5,
                max_batch_size=512 * 1024,
                request_timeout_ms=15_000,
                **self._logins.options(principal),
            )
            self._producers[slot] = producer
            await producer.start()
        return producer

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.flush(), 15)
        finally:
            for producer in self._producers.values():
                await producer.stop()

    def topic(self, message: Message) -> str:
        """The (prefixed) topic of ``message``: a bet its bettor's operator's (the gateway's)."""
        if isinstance(message, PlaceBet):
            return self.prefix + bet_commands_topic(operator_of(message.bettor_id, self.operators))
        return self.prefix + topic_for(message)

    def sender(self, message: Message) -> str:
        """The principal that sends ``message``: a bet its operator's gateway (``gateway`` for
        the house, ``gateway-<operator>``), else ``kafka_clients.sender_of``."""
        if isinstance(message, PlaceBet):
            operator = operator_of(message.bettor_id, self.operators)
            return GATEWAY if operator == HOUSE else f"{GATEWAY}-{operator}"
        return sender_of(type(message).__name__)

    async def send(self, message: Message) -> None:
        """Queue ``message`` on its topic, key = table id; :meth:`flush` waits for delivery."""
        producer = await self._producer(self.sender(message))
        future = await producer.send(
            self.topic(message), encode(message), key=partition_key(message)
        )
        self._pending.append(future)

    async def send_now(self, message: Message, timeout: float = 15.0) -> None:
        await self.send(message)
        await asyncio.wait_for(self.flush(), timeout)

    async def send_raw(
        self,
        topic: str,
        value: bytes,
        key: bytes | None = None,
        timeout: float = 15.0,
        partition: int | None = None,
    ) -> None:
        """Send raw bytes to the logical ``topic`` (for malformed-message tests; to
        ``partition`` when given), as the principal that writes it: the gateway on
        bet-commands, the operator on table-commands, else the admin (a test posing as a
        service)."""
        producer = await self._producer(RAW_SENDERS.get(topic, ADMIN))
        sent = producer.send_and_wait(self.prefix + topic, value, key=key, partition=partition)
        await asyncio.wait_for(sent, timeout)

    async def send_many(self, messages: Sequence[Message]) -> None:
        """Queue many messages with few round trips: one batch per topic and key (so per table,
        in order), on the partition the default partitioner picks for that key, as
        :meth:`send` would. :meth:`flush` waits for delivery."""
        groups: dict[tuple[str, str, bytes], list[Message]] = {}
        for message in messages:
            group = (self.sender(message), self.topic(message), partition_key(message))
            groups.setdefault(group, []).append(message)
        for (sender, topic, key), members in groups.items():
            producer = await self._producer(sender)
            partitions = sorted(await producer.partitions_for(topic))
            partition = self._partitioner(key, partitions, partitions)
            batch = producer.create_batch()
            for message in members:
                value = encode(message)
                if batch.append(key=key, value=value, timestamp=None) is None:
                    self._pending.append(
                        await producer.send_batch(batch, topic, partition=partition)
                    )
                    batch = producer.create_batch()
                    batch.append(key=key, value=value, timestamp=None)
            if batch.record_count():
                self._pending.append(await producer.send_batch(batch, topic, partition=partition))

    async def flush(self) -> None:
        pending, self._pending = self._pending, []
        if pending:
            await asyncio.gather(*pending)


class EventFeed:
    """Follows topics from where they end now (or from the beginning), decoding each record."""

    def __init__(
        self,
        bootstrap: str,
        prefix: str = "",
        topics: Sequence[str] = EVENT_TOPICS,
        client_id: str = "pb-demo-feed",
        auth: KafkaAuth = NOBODY,
    ) -> None:
        self.prefix = prefix
        self.topics = tuple(topics)
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            **auth.client_options(),
            client_id=client_id,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=15_000,
        )

    async def start(self, from_beginning: bool = False, timeout: float = 30.0) -> None:
        """Assign every partition of the topics and fix the start positions before returning,
        so nothing published after this call is missed."""
        await asyncio.wait_for(self._consumer.start(), timeout)
        partitions: list[TopicPartition] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        for topic in self.topics:
            physical = self.prefix + topic
            while True:
                found = self._consumer.partitions_for_topic(physical)
                if found:
                    break
                if loop.time() > deadline:
                    raise TimeoutError(f"topic {physical} has no partitions (does it exist?)")
                await self._consumer._client.force_metadata_update()
                await asyncio.sleep(0.2)
            partitions.extend(TopicPartition(physical, p) for p in sorted(found))
        self._consumer.assign(partitions)
        if from_beginning:
            await self._consumer.seek_to_beginning(*partitions)
        else:
            await self._consumer.seek_to_end(*partitions)
        for partition in partitions:  # resolve the lazy seek now
            await asyncio.wait_for(self._consumer.position(partition), timeout)

    async def stop(self) -> None:
        await self._consumer.stop()

    async def poll(self, timeout_ms: int = 200, max_records: int = 5000) -> list[Received]:
        """The next records of any topic (possibly none), in order per partition."""
        batches = await self._consumer.getmany(timeout_ms=timeout_ms, max_records=max_records)
        received: list[Received] = []
        for partition, records in batches.items():
            topic = partition.topic[len(self.prefix) :]
            for record in records:
                try:
                    received.append(Received(topic, decode(topic, record.value)))
                except ContractError as error:
                    log.warning("undecodable record on %s: %s", partition.topic, error)
                    received.append(Received(topic, None, str(error)))
        return received


def messages(received: Iterable[Received]) -> list[Message]:
    return [r.message for r in received if r.message is not None]
