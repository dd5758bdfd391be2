"""The attacker of the hostile-input tests: any bytes, key and headers to any topic.

:class:`Attacker` writes raw records (a value or none, a key, headers repeated or without a
value, a partition of its choosing) to the run's prefixed topics with a plain producer, and
spies on the topics the services write (their relay headers, offsets and broker timestamps).
With what it saw it can forge a record that the consumer of an owned topic TAKES: the owner's
``pb-source`` and a relay position just past the last one the owner published
(:meth:`Attacker.relay_headers`), so that the test reaches the service's own checks (the
rules engine, the shoe's cards) and not only the header checks.

Such a record is not SIGNED, so the services refuse it (a dead letter, ``signature: ...``):
the writer of a record only one service writes must hold that service's private key. To test
the services' own checks behind the signatures (a stolen key, a service gone wrong),
``forge(..., stolen_key=True)`` signs with the owner's key, read from the run's keys folder,
for the partition the record goes to (its table's, unless one is given) of this cluster.

Every message it forges is remembered (:attr:`Attacker.forged`): :class:`HostileSystem` keeps
them out of the run's ledger and out of the table driver, which judge what the services did,
so a forged fact is never counted as a real one. The system also follows the incidents topic.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.structs import RecordMetadata
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from contracts import (
    BET_COMMANDS,
    EXTERNAL,
    INCIDENTS,
    MESSAGE_SOURCES,
    TOPIC_OWNERS,
    CoupResolved,
    DeadLetter,
    IncidentRaised,
    Message,
    encode,
    partition_key,
    topic_for,
)
from services.dev.demo.bus import Received, cluster_id
from services.dev.demo.processes import SERVICES, ServiceSettings
from services.dev.demo.system import LocalSystem, SystemTimeout
from services.dev.infra.kafka_clients import ADMIN
from services.shared.platform.kafka import SIGNATURE_HEADER
from services.shared.platform.security import Signer, Where, load_keyring, signer_for
from services.shared.platform.settings import KafkaAuth, Settings
from services.shared.rules.cards import Card
from services.shared.rules.tableau import resolve_coup

SOURCE = "pb-source"
NOTIFICATION = "pb-notification-id"
INDEX = "pb-message-index"
TYPE = "pb-type"

LOG_APPEND_TIME = 1
"""Kafka's record timestamp type when the broker stamped the record (bet-commands' config)."""

INDEX_SPAN = 2**20
"""Relay positions are notification id * 2**20 + message index."""
FORGED_INDEX = INDEX_SPAN - 4096
"""Forged positions use indexes from here: past every real message of the notification (an
event becomes at most a few thousand messages), below the next notification's first."""

SPIED: tuple[str, ...] = (*TOPIC_OWNERS, BET_COMMANDS)
"""What the attacker reads: every owned topic (relay headers) and the bets with their marks."""

Headers = Sequence[tuple[str, bytes | None]]
T = TypeVar("T")


def examples(strategy: st.SearchStrategy[T], count: int) -> list[T]:
    """``count`` examples of ``strategy``, the same ones on every run (hypothesis, derandomized,
    generation only).

    An end-to-end attack costs seconds of real services, so the tests send a fixed budget of
    generated hostile records at ONE running system and check each answer, instead of running
    (and shrinking) a test per example; a failure names the record it is about.
    """
    found: list[T] = []

    @settings(
        max_examples=count,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        deadline=None,
    )
    @given(strategy)
    def collect(example: T) -> None:
        found.append(example)

    collect()
    return found


@dataclass(frozen=True, slots=True)
class Raw:
    """One record as the broker holds it."""

    topic: str  # logical
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    value: bytes | None

    def header(self, name: str) -> bytes | None:
        return next((value for key, value in self.headers if key == name), None)

    def document(self) -> dict[str, Any] | None:
        """The value as a JSON object, or None."""
        try:
            found = json.loads(self.value or b"")
        except (ValueError, RecursionError):  # the attacker's own pills are in there too
            return None
        return found if isinstance(found, dict) else None

    @property
    def type_name(self) -> str | None:
        kind = self.header(TYPE)
        if kind is not None:
            return kind.decode("utf-8", "replace")
        document = self.document()
        name = None if document is None else document.get("type")
        return name if isinstance(name, str) else None


def relay_position(headers: Iterable[tuple[str, bytes | None]]) -> tuple[str, int, int] | None:
    """(source, notification id, index) of a relay's headers, or None when they are not one."""
    found = dict(headers)
    try:
        source = (found[SOURCE] or b"").decode()
        return source, int(found[NOTIFICATION] or b""), int(found[INDEX] or b"")
    except (KeyError, ValueError):
        return None


class Attacker:
    """A raw producer for any record, and a spy on the topics the services write."""

    def __init__(
        self, bootstrap: str, prefix: str, data_dir: Any = None, login: KafkaAuth | None = None
    ) -> None:
        """``login``: a malicious insider's broker credentials (the tests: the admin's, who
        may write any topic; the services' signatures, not the ACLs, are what is tested)."""
        self.prefix = prefix
        self.bootstrap = bootstrap
        self.login = login or KafkaAuth()
        self.cluster = ""  # the cluster's id, read at start (what the services' signatures bind)
        options = self.login.client_options()
        self.data_dir = data_dir  # the run's: its keys/ is what a key thief would hold
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            **options,
            client_id="pb-attacker",
            acks="all",
            linger_ms=0,
            max_request_size=4 * 1024 * 1024,
            max_batch_size=4 * 1024 * 1024,
            request_timeout_ms=15_000,
        )
        self._spy = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            **options,
            client_id="pb-attacker-spy",
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=8 * 1024 * 1024,
            fetch_max_bytes=64 * 1024 * 1024,
        )
        self._partitioner = DefaultPartitioner()
        self.forged: set[UUID] = set()
        """event_id of every message forged: the services' own messages never have them."""
        self.records: dict[tuple[str, int], list[Raw]] = {}
        """Every record of the spied topics, by (logical topic, partition), in offset order."""
        self.last_notification: dict[str, int] = {}
        """Per service, the highest notification id its relay has published (as far as seen)."""
        self._sent: set[tuple[str, int, int]] = set()
        self._forges: Counter[tuple[str, int]] = Counter()

    # ---- life cycle --------------------------------------------------------------------

    async def start(self, timeout: float = 30.0) -> None:
        self.cluster = await cluster_id(self.bootstrap, timeout, self.login)
        await asyncio.wait_for(self._producer.start(), timeout)
        await asyncio.wait_for(self._spy.start(), timeout)
        partitions: list[TopicPartition] = []
        for topic in SPIED:
            physical = self.prefix + topic
            found: set[int] | None = None
            for _ in range(100):
                found = self._spy.partitions_for_topic(physical)
                if found:
                    break
                await self._spy._client.force_metadata_update()
                await asyncio.sleep(0.2)
            assert found, f"topic {physical} has no partitions"
            partitions.extend(TopicPartition(physical, p) for p in sorted(found))
        self._spy.assign(partitions)
        await self._spy.seek_to_beginning(*partitions)

    async def stop(self) -> None:
        try:
            await self._producer.stop()
        finally:
            await self._spy.stop()

    # ---- writing -----------------------------------------------------------------------

    async def partition_of(self, topic: str, key: bytes) -> int:
        """The partition the default partitioner gives ``key`` on the logical ``topic``."""
        partitions = sorted(await self._producer.partitions_for(self.prefix + topic))
        return int(self._partitioner(key, partitions, partitions))

    async def send(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        headers: Headers = (),
        partition: int | None = None,
        timeout: float = 30.0,
    ) -> RecordMetadata:
        """Write one record to the logical ``topic``; its metadata once the broker has it."""
        metadata: RecordMetadata = await asyncio.wait_for(
            self._producer.send_and_wait(
                self.prefix + topic, value, key=key, headers=list(headers), partition=partition
            ),
            timeout,
        )
        self._sent.add((topic, metadata.partition, metadata.offset))
        return metadata

    async def forge(
        self,
        message: Message,
        *,
        headers: Headers | None = None,
        topic: str | None = None,
        key: bytes | None = None,
        stolen_key: bool = False,
        partition: int | None = None,
    ) -> RecordMetadata:
        """Write ``message`` where the services would, keyed by its table (to ``partition``
        when given); on an owned topic with relay headers the consumer takes
        (:meth:`relay_headers`) unless ``headers``.

        Unsigned unless ``stolen_key``: then signed with the key of the one service that may
        send it (the topic's owner; dealing for a mark on bet-commands), for the place it is
        written (topic, partition, cluster), its key and the position its headers give (relay
        headers are made for a mark that has none)."""
        topic = topic or topic_for(message)
        self.forged.add(message.event_id)
        if headers is None:
            headers = await self.relay_headers(topic, message.type) if topic in TOPIC_OWNERS else ()
        record_key = partition_key(message) if key is None else key
        value = encode(message)
        if stolen_key:
            sender = TOPIC_OWNERS.get(topic) or MESSAGE_SOURCES.get(message.type, EXTERNAL)
            assert sender != EXTERNAL, f"nobody signs a {message.type}"
            if not headers:
                headers = await self.relay_headers(topic, message.type, owner=sender)
            position = relay_position(headers)
            assert position is not None, f"no relay position to sign in {headers}"
            if partition is None:
                partition = await self.partition_of(topic, record_key)
            where = Where(self.cluster, self.prefix + topic, partition)
            signature = self.stolen_signer(sender).sign(
                where, record_key, value, position[1], position[2]
            )
            headers = [*headers, (SIGNATURE_HEADER, signature)]
        return await self.send(topic, value, key=record_key, headers=headers, partition=partition)

    def stolen_signer(self, service: str) -> Signer:
        """``service``'s signer, from the run's keys (what an attacker who stole them has)."""
        assert self.data_dir is not None, "the attacker was not told where the run's keys are"
        settings = Settings(service=service, data_dir=self.data_dir)
        return signer_for(settings, load_keyring(settings))

    async def relay_headers(
        self, topic: str, message_type: str, owner: str | None = None
    ) -> list[tuple[str, bytes | None]]:
        """Headers of the owner of ``topic`` (or ``owner``) with a position just past everything
        its relay published so far (notification ids only grow): the consumer takes the record
        (once signed), and the owner's next message still comes after it."""
        owner = owner or TOPIC_OWNERS[topic]
        await self.catch_up()
        notification = self.last_notification.get(owner)
        assert notification is not None, f"nothing published by {owner} seen yet"
        count = self._forges[(owner, notification)]
        self._forges[(owner, notification)] += 1
        assert count < INDEX_SPAN - FORGED_INDEX, "too many forged records on one notification"
        return [
            (SOURCE, owner.encode()),
            (NOTIFICATION, str(notification).encode()),
            (INDEX, str(FORGED_INDEX + count).encode()),
            (TYPE, message_type.encode()),
        ]

    # ---- spying ------------------------------------------------------------------------

    async def observe(self, timeout_ms: int = 0) -> int:
        """Take in what arrived on the spied topics; how many records."""
        batches = await self._spy.getmany(timeout_ms=timeout_ms, max_records=10_000)
        count = 0
        for tp, records in batches.items():
            logical = tp.topic[len(self.prefix) :]
            kept = self.records.setdefault((logical, tp.partition), [])
            owner = TOPIC_OWNERS.get(logical)
            for record in records:
                raw = Raw(
                    logical,
                    tp.partition,
                    record.offset,
                    record.timestamp,
                    record.timestamp_type,
                    record.key,
                    tuple(record.headers),
                    record.value,
                )
                kept.append(raw)
                count += 1
                position = relay_position(raw.headers)
                if (
                    owner is not None
                    and position is not None
                    and position[0] == owner
                    and (logical, tp.partition, record.offset) not in self._sent
                ):
                    seen = self.last_notification.get(owner, 0)
                    self.last_notification[owner] = max(seen, position[1])
        return count

    async def catch_up(self, timeout: float = 20.0) -> None:
        """Read the spied topics up to their ends as they are now."""
        assigned = list(self._spy.assignment())
        ends = await self._spy.end_offsets(assigned)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        for tp in assigned:
            while await self._spy.position(tp) < ends[tp]:
                assert loop.time() < deadline, f"the spy did not reach the end of {tp}"
                await self.observe(timeout_ms=100)

    def seen(self, topic: str, type_name: str | None = None, key: bytes | None = None) -> list[Raw]:
        """Records of the logical ``topic`` (of a type, with a key), by partition and offset."""
        return [
            raw
            for (logical, _), records in sorted(self.records.items())
            if logical == topic
            for raw in records
            if (type_name is None or raw.type_name == type_name) and (key is None or raw.key == key)
        ]


class HostileSystem(LocalSystem):
    """The running system with an attacker beside it; also follows the incidents topic.

    What the attacker forged is kept apart (``forged_echoes``): the ledger and the reactors
    (the table driver) see only what the services published.
    """

    def __init__(
        self, settings: ServiceSettings, log_dir: Any, services: Iterable[str] = SERVICES
    ) -> None:
        super().__init__(settings, log_dir, services, follow=(INCIDENTS,))
        self.attacker = Attacker(
            settings.bootstrap,
            settings.topic_prefix,
            settings.data_dir,
            settings.logins.auth(ADMIN),
        )
        self.forged_echoes: list[Received] = []
        self.http: dict[str, str] = {}
        """Service name -> base URL of its HTTP endpoints (/ready, /metrics), when known."""
        self._attacker_started = False

    async def start(self, ready_timeout: float = 90.0) -> None:
        await super().start(ready_timeout)
        await self.attacker.start()
        self._attacker_started = True

    async def stop(self, timeout: float = 20.0) -> list[str]:
        if self._attacker_started:
            self._attacker_started = False
            with contextlib.suppress(Exception):  # best effort while shutting down
                await asyncio.wait_for(self.attacker.stop(), 20)
        return await super().stop(timeout)

    async def pump(self, timeout_ms: int = 100) -> list[Received]:
        received = await self.feed.poll(timeout_ms=timeout_ms)
        if self._attacker_started:
            await self.attacker.observe()
        taken: list[Received] = []
        for record in received:
            message = record.message
            if message is not None and message.event_id in self.attacker.forged:
                self.forged_echoes.append(record)
                continue
            taken.append(record)
            self.history.append(record)
            if message is None:
                self.undecodable += 1
                continue
            if self.accept is None or self.accept(message):
                self.ledger.observe(message)
            for react in self.reactors:
                await react(message)
        return taken


# ---- what the services answered --------------------------------------------------------


def incidents(
    system: LocalSystem, evidence_id: UUID | None = None, code: str | None = None
) -> list[IncidentRaised]:
    """Incidents raised so far (each once), about one piece of evidence, of one code."""
    found = {
        m.event_id: m
        for m in system.seen(IncidentRaised)
        if (evidence_id is None or m.evidence_id == evidence_id)
        and (code is None or m.code == code)
    }
    return list(found.values())


def dead_letters(system: LocalSystem, value: bytes | None = None) -> list[DeadLetter]:
    """Dead letters so far (each once), of one original value (by its SHA-256)."""
    digest = None if value is None else hashlib.sha256(value).hexdigest()
    found = {
        m.event_id: m
        for m in system.seen(DeadLetter)
        if value is None or m.payload_sha256 == digest
    }
    return list(found.values())


async def until(
    system: LocalSystem,
    check: Callable[[], object],
    timeout: float,
    what: str,
    watch: bool = True,
) -> None:
    """Pump events until ``check()``; on timeout fail with the services' last log lines.
    ``watch=False`` while a service is down on purpose."""
    try:
        await system.until(check, timeout, what, watch=watch)
    except SystemTimeout as error:
        raise AssertionError(f"{error}\n{system.log_tails(25)}") from None


async def await_incident(
    system: LocalSystem, evidence_id: UUID, what: str, timeout: float = 30, watch: bool = True
) -> IncidentRaised:
    """The (first) incident raised about ``evidence_id``."""
    found = lambda: incidents(system, evidence_id)  # noqa: E731
    await until(system, found, timeout, f"an incident for {what}", watch)
    return found()[0]


async def await_dead_letter(
    system: LocalSystem, value: bytes, what: str, timeout: float = 30, watch: bool = True
) -> DeadLetter:
    """The (first) dead letter of the record whose value is ``value``."""
    found = lambda: dead_letters(system, value)  # noqa: E731
    await until(system, found, timeout, f"a dead letter for {what}", watch)
    return found()[0]


def claim(
    table_id: str,
    coup_id: str,
    coup_number: int,
    shoe_id: str,
    player: Sequence[str],
    banker: Sequence[str],
    **facts: Any,
) -> CoupResolved:
    """A CoupResolved for the hands ``player`` and ``banker``: the facts the rules engine gives
    for those cards (dealt P, B, P, B, then third cards), unless ``facts`` says otherwise."""
    order = [player[0], banker[0], player[1], banker[1], *player[2:3], *banker[2:3]]
    given: dict[str, Any] = {}
    with contextlib.suppress(Exception):  # an impossible hand: its facts must all be given
        result = resolve_coup([Card.parse(code) for code in order])
        given = {
            "player_total": result.player_total,
            "banker_total": result.banker_total,
            "outcome": result.outcome.value,
            "natural": result.natural,
            "player_pair": result.player_pair,
            "banker_pair": result.banker_pair,
        }
    given.update(facts)
    return CoupResolved(
        table_id=table_id,
        coup_id=coup_id,
        coup_number=coup_number,
        shoe_id=shoe_id,
        player_cards=list(player),
        banker_cards=list(banker),
        **given,
    )


def condition(*checks: Callable[[], object]) -> Callable[[], bool]:
    """All of ``checks``."""
    return lambda: all(check() for check in checks)
