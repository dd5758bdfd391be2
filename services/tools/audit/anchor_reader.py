"""Read the seal anchors from Kafka and keep those their service signed (``audit --anchors``).

The topic ``punto-banco.seals`` is read from its beginning up to the end offsets it had when
the audit began (records published meanwhile are left for the next audit), a bounded batch
at a time; each record is checked and only a verified anchor's few fields are kept
(``anchors.AnchorBook``). A record counts only when:

- its key names a service and its ``pb-sig`` header is that service's signature (a key id
  the keyring gives to THAT service) of this value, for this topic (prefix included),
  partition, cluster, key and relay position (``signing.verify``; an anchor signed with the
  first scheme, v1, for this logical topic, key and position: anchors are kept forever): an
  unsigned record is ``ANCHOR_UNSIGNED``, any other failure ``ANCHOR_BAD_SIGNATURE`` (a forged
  anchor, one copied under another service's key, or from another deployment or cluster);
- its value is a ``SealAnchored`` of the same service. Its ``partition`` (signed with it)
  names the store it vouches for: a partitioned service's cells each anchor their own store
  (``<service>-p<N>``), and an anchor of one partition never vouches for another's.

Read the anchors BEFORE the stores (the CLI does): every anchor read is then of a seal already
in its store, and a running service's newer seals are merely "not anchored yet".

The topic has three writers (each service writes its own key); Kafka cannot limit a writer to
a key, the signature does: another writer can add records (findings), never an anchor.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from contracts import SEALS, ContractError, SealAnchored, decode
from services.shared.platform.consumer import (
    MESSAGES_PER_NOTIFICATION,
    Headers,
    UntrustedHeaders,
    relayed_position,
)
from services.shared.platform.kafka import SIGNATURE_HEADER
from services.shared.platform.security import Keyring, Where, verify
from services.shared.platform.settings import Settings, store_name
from services.tools.audit.anchors import Anchor, AnchorBook
from services.tools.audit.findings import Code, Finding, Severity

MAX_FORGERY_FINDINGS = 20
"""Refused records reported one by one; beyond this they are counted in one finding."""

FETCH_RECORDS = 1_000
"""Records fetched from Kafka at a time."""


class AnchorsUnavailable(RuntimeError):
    """The anchors could not be read (no broker, no topic, too slow); the message says why."""


@dataclass
class AnchorRecords:
    """What the seals topic held: each store's verified anchors (keyed by the store's name:
    the service's, ``<service>-p<N>`` for a partition's) and the refused records."""

    topic: str  # the Kafka topic, with the deployment's prefix
    keyring: Keyring
    cluster: str = ""  # the Kafka cluster's id
    books: dict[str, AnchorBook] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    records: int = 0
    refused: int = 0

    def book(self, service: str, partition: int | None = None) -> AnchorBook:
        """The anchors of ``service``'s store (``partition``: of that partition's store; an
        empty book when it published none)."""
        found = self.books.get(store_name(service, partition))
        return found or AnchorBook(service, partition)

    def stores(self) -> set[tuple[str, int | None]]:
        """The (service, partition) of every store some anchor vouches for."""
        return {(book.service, book.partition) for book in self.books.values()}

    def add(
        self, key: bytes | None, value: bytes | None, headers: Headers, partition: int, offset: int
    ) -> None:
        """One record of the topic, read at ``partition`` and ``offset``."""
        self.records += 1
        place = Where(self.cluster, self.topic, partition)
        result = read_anchor(self.keyring, key, value, headers, place)
        if isinstance(result, Anchor):
            service, cell = (key or b"").decode(), result.partition
            name = store_name(service, cell)
            book = self.books.get(name)
            if book is None:
                book = self.books[name] = AnchorBook(service, cell)
            book.add(result)
            return
        code, claimed, reason = result
        self.refused += 1
        if self.refused <= MAX_FORGERY_FINDINGS:
            self.findings.append(
                Finding(
                    Severity.ERROR,
                    code,
                    f"a record on {self.topic} at partition {partition} offset {offset} is not "
                    f"an anchor its service signed: {reason}",
                    store=claimed,
                )
            )

    def finish(self) -> None:
        """After the last record: the refused records not reported one by one."""
        more = self.refused - MAX_FORGERY_FINDINGS
        if more > 0:
            self.findings.append(
                Finding(
                    Severity.ERROR,
                    Code.ANCHOR_BAD_SIGNATURE,
                    f"{more} more records on {self.topic} are not anchors their service signed",
                )
            )


def read_anchor(
    keyring: Keyring, key: bytes | None, value: bytes | None, headers: Headers, where: Where
) -> Anchor | tuple[Code, str | None, str]:
    """The anchor of one record read ``where``, or (code, the service its key names, why it
    is refused)."""
    try:
        service = (key or b"").decode("utf-8")
    except UnicodeDecodeError:
        return Code.ANCHOR_BAD_SIGNATURE, None, "its key is not UTF-8 (a service's name)"
    if not service or len(service) > 32:
        return Code.ANCHOR_BAD_SIGNATURE, None, f"its key {service[:40]!r} is no service's name"
    signature = [v for k, v in headers or () if k == SIGNATURE_HEADER]
    if not signature:
        return Code.ANCHOR_UNSIGNED, service, "it has no pb-sig header"
    try:
        position = relayed_position(headers, service)
    except UntrustedHeaders as error:
        return Code.ANCHOR_BAD_SIGNATURE, service, error.reason
    notification_id, index = divmod(position, MESSAGES_PER_NOTIFICATION)
    problem = verify(
        keyring, service, where, key, value, notification_id, index, signature[0], v1_topic=SEALS
    )
    if problem is not None:
        return Code.ANCHOR_BAD_SIGNATURE, service, problem
    try:
        message = decode(SEALS, value or b"")
    except ContractError as error:
        return Code.UNREADABLE_EVENT, service, f"signed, but not a SealAnchored ({error.reason})"
    if not isinstance(message, SealAnchored) or message.service != service:
        return Code.ANCHOR_BAD_SIGNATURE, service, "signed, but an anchor of another service"
    return Anchor(
        seal=message.seal,
        from_id=message.from_id,
        to_id=message.to_id,
        count=message.count,
        digest=bytes.fromhex(message.digest),
        previous_digest=bytes.fromhex(message.previous_digest),
        sealed_at=message.sealed_at.isoformat(),
        notification_id=notification_id,
        partition=message.partition,
    )


async def read_anchors(
    settings: Settings, keyring: Keyring, *, timeout: float = 60.0
) -> AnchorRecords:
    """Every record of the seals topic up to its end offsets at the start (module docstring)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from services.shared.platform.kafka import client_options, cluster_id

    topic = settings.topic(SEALS)
    try:
        cluster = await asyncio.wait_for(cluster_id(settings), timeout)
    except Exception as error:
        raise AnchorsUnavailable(
            f"cannot reach Kafka at {settings.kafka_bootstrap_servers} ({error!r})"
        ) from None
    found = AnchorRecords(topic, keyring, cluster)
    consumer = AIOKafkaConsumer(
        **client_options(settings),
        client_id="pb-audit-anchors",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    deadline = time.monotonic() + timeout
    try:
        await asyncio.wait_for(consumer.start(), timeout)
    except Exception as error:
        raise AnchorsUnavailable(
            f"cannot reach Kafka at {settings.kafka_bootstrap_servers} ({error!r})"
        ) from None
    try:
        numbers = await _partitions(consumer, topic, min(deadline, time.monotonic() + 10))
        partitions = [TopicPartition(topic, n) for n in sorted(numbers)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        left = {tp for tp in partitions if ends[tp] > await consumer.position(tp)}
        while left:
            if time.monotonic() > deadline:
                raise AnchorsUnavailable(
                    f"reading {topic} took more than {timeout:.0f} s; "
                    f"{len(left)} partitions not read to their end"
                )
            batches = await consumer.getmany(*left, timeout_ms=1000, max_records=FETCH_RECORDS)
            for tp, records in batches.items():
                for record in records:
                    if record.offset < ends[tp]:
                        headers = list(record.headers)
                        found.add(record.key, record.value, headers, tp.partition, record.offset)
            for tp in list(left):
                if await consumer.position(tp) >= ends[tp]:
                    left.discard(tp)
    finally:
        await consumer.stop()
    found.finish()
    return found


async def _partitions(consumer: object, topic: str, deadline: float) -> Iterable[int]:
    from aiokafka import AIOKafkaConsumer

    assert isinstance(consumer, AIOKafkaConsumer)
    while True:
        numbers: set[int] | None = consumer.partitions_for_topic(topic)
        if numbers:
            return numbers
        if time.monotonic() > deadline:
            raise AnchorsUnavailable(
                f"the topic {topic} does not exist: no service has published an anchor there "
                "(is PB_TOPIC_PREFIX right?)"
            )
        await consumer._client.force_metadata_update()
        await asyncio.sleep(0.2)
