"""What one partition's records become: fresh deliveries, duplicates, refused records.

Tracking positions: on a topic with an owner (``contracts.TOPIC_OWNERS``) a record's position
is ``notification id * 2**20 + message index`` from the owner's relay headers, checked strictly
(:func:`relayed_position`), under the name ``<owner>:<topic>:<partition>``; elsewhere it is
``offset + 1`` under ``<cluster id>:<topic>:<topic id>:<partition>`` (a recreated topic or
another cluster starts a new name; a position of the older name without a topic id is carried
over once, :func:`adopt_legacy_position`). :class:`RecordIntake` refuses a record whose headers
or signature fail (never a position), skips duplicates, refuses what does not decode (it takes
its position), answers a PlaceBet whose bet id can be read (:func:`refused_bet`), and marks a
message out of its table's history (:func:`misplaced`: key or partition).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import ConsumerRecord, TopicPartition
from eventsourcing.persistence import IntegrityError, Tracking
from pydantic import TypeAdapter, ValidationError

from contracts import (
    BET_COMMANDS,
    BET_EVENTS,
    EXTERNAL,
    MESSAGE_SOURCES,
    TOPIC_OWNERS,
    CommandRejected,
    ContractError,
    Message,
    PlaceBet,
    base_topic,
    decode,
)
from contracts.bet_events import EchoedText
from contracts.envelope import MAX_TEXT, BetId, Identifier, TableId, TableMessage
from services.shared.platform.consumer.deliveries import Delivery, Refusal
from services.shared.platform.kafka import (
    INDEX_HEADER,
    NOTIFICATION_HEADER,
    SIGNATURE_HEADER,
    SOURCE_HEADER,
    UnreadableRecord,
    key_partition,
)
from services.shared.platform.security.signing import Keyring, Where, verify
from services.shared.platform.store.application import AppWorker, ServiceApplication

MESSAGES_PER_NOTIFICATION = 2**20
"""Positions of relayed messages: notification_id * this + message index."""

MAX_POSITION = 2**63 - 1
"""The largest tracking position a store keeps (PostgreSQL bigint, SQLite integer)."""

Headers = Sequence[tuple[str, bytes | None]] | None

_RELAY_HEADERS = (SOURCE_HEADER, NOTIFICATION_HEADER, INDEX_HEADER)
_NOTIFICATION = re.compile(rb"[1-9][0-9]{0,14}")  # 1-15 digits, no leading zero, >= 1
_INDEX = re.compile(rb"0|[1-9][0-9]{0,6}")  # 1-7 digits, no leading zero
_SHOWN = 40  # characters of a refused header value quoted in the error

CLAIM_SUFFIX = ":topic-id-claim"
"""Suffix of the marker naming which topic id took over a legacy offset name."""

UNCLAIMED = 1
"""Marker value: the legacy position belongs to no topic read since."""


class UntrustedHeaders(ValueError):
    """A record on an owned topic whose relay headers cannot be trusted; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def relayed_tracking_name(owner: str, logical_topic: str, partition: int) -> str:
    """The tracking name of a relayed topic's partition (see the module docstring)."""
    return f"{owner}:{logical_topic}:{partition}"


def offset_tracking_name(
    cluster_id: str | None, topic: str, partition: int, topic_id: str | None = None
) -> str:
    """The tracking name of records tracked by offset (see the module docstring)."""
    parts = [part for part in (cluster_id, topic, topic_id) if part]
    return ":".join([*parts, str(partition)])


def relayed_position(headers: Headers, owner: str) -> int:
    """The position of a record published by ``owner``'s relay, from its headers."""
    found: dict[str, bytes | None] = {}
    for key, value in headers or ():  # one pass: this runs for every record consumed
        if key in _RELAY_HEADERS:
            if key in found:
                raise UntrustedHeaders(f"header {key} appears more than once")
            found[key] = value
    for key in _RELAY_HEADERS:
        if key not in found:
            raise UntrustedHeaders(
                f"header {key} is missing (only {owner}'s outbox relay publishes here)"
            )
        if not isinstance(found[key], bytes):
            raise UntrustedHeaders(f"header {key} has no value")
    source = found[SOURCE_HEADER]
    if source != owner.encode():
        raise UntrustedHeaders(
            f"header {SOURCE_HEADER} is {_shown(source)}, but only {owner} publishes here"
        )
    notification = _number(found[NOTIFICATION_HEADER], NOTIFICATION_HEADER, _NOTIFICATION)
    index = _number(found[INDEX_HEADER], INDEX_HEADER, _INDEX)
    if index >= MESSAGES_PER_NOTIFICATION:
        raise UntrustedHeaders(
            f"header {INDEX_HEADER} is {index}, not below {MESSAGES_PER_NOTIFICATION}"
        )
    position = notification * MESSAGES_PER_NOTIFICATION + index
    if position > MAX_POSITION:
        raise UntrustedHeaders(
            f"header {NOTIFICATION_HEADER} is {notification}: its position "
            f"{notification} * 2**20 + {index} does not fit 63 bits"
        )
    return position


def _number(raw: bytes | None, name: str, pattern: re.Pattern[bytes]) -> int:
    if raw is None or pattern.fullmatch(raw) is None:
        wanted = "1-15 digits, from 1" if name == NOTIFICATION_HEADER else "1-7 digits"
        raise UntrustedHeaders(
            f"header {name} is {_shown(raw)}, not a decimal number ({wanted}, no leading zero)"
        )
    return int(raw)


def _shown(raw: bytes | None, none: str = "null") -> str:
    """``raw`` quoted, cut to 40 bytes (``none`` when there is none)."""
    if raw is None:
        return none
    text = repr(raw[: _SHOWN + 1])
    return text if len(raw) <= _SHOWN else text + "..."


# ---- stores written before topic ids -----------------------------------------------------


def topic_id_claim(topic_id: str) -> int:
    """The marker value naming ``topic_id``: 62 bits of its SHA-256, from 2 (1 is UNCLAIMED)."""
    digest = hashlib.sha256(topic_id.encode("utf-8")).digest()
    return 2 + (int.from_bytes(digest[:8], "big") >> 2)


def adopt_legacy_position(
    app: ServiceApplication, legacy: str, name: str, topic_id: str, end_offset: int
) -> int:
    """Carry ``legacy``'s position over to ``name`` once, for the topic it was read from."""
    position = app.tracked_position(legacy)
    if not position:
        return 0
    marker = legacy + CLAIM_SUFFIX
    claim = app.tracked_position(marker)
    if not claim:
        # The record at offset position - 1 was read: a log that ends before it is not the
        # log the legacy name counted (a topic deleted and created again).
        wanted = topic_id_claim(topic_id) if end_offset >= position else UNCLAIMED
        claim = _record_once(app, marker, wanted)
    if claim != topic_id_claim(topic_id):
        return 0
    if app.tracked_position(name) < position:
        _record_once(app, name, position)
    return position


def _record_once(app: ServiceApplication, name: str, position: int) -> int:
    """Record ``position`` for a new ``name``; what is recorded if another did it first."""
    with contextlib.suppress(IntegrityError):
        app.record_position(name, position)
    return app.tracked_position(name)


log = logging.getLogger(__name__)

TopicIdFetcher = Callable[[Iterable[str]], Awaitable[dict[str, str]]]
"""Kafka topic names -> their topic ids (``TopicIdReader.topic_ids``)."""


class PartitionNames:
    """Tracking names of one consumer's partitions; ``cluster_id`` and ``fetch`` set at start."""

    def __init__(
        self,
        app: ServiceApplication,
        worker: AppWorker,
        cluster_id: str | None = None,
        fetch: TopicIdFetcher | None = None,
    ) -> None:
        self.app = app
        self.worker = worker
        self.cluster_id = cluster_id
        self.fetch = fetch
        self.topic_ids: dict[str, str] = {}  # Kafka topic -> id, for the current assignment
        self._names: dict[TopicPartition, str] = {}
        self._next: dict[TopicPartition, int] = {}  # the next offset, as far as we know

    async def name(
        self,
        tp: TopicPartition,
        logical: str,
        first_offset: int,
        end_offset: Callable[[], Awaitable[int]],
    ) -> str:
        """The name of ``tp``, whose fetched records start at ``first_offset``."""
        owner = TOPIC_OWNERS.get(logical)
        if owner is not None:
            return relayed_tracking_name(owner, logical, tp.partition)
        expected = self._next.get(tp)
        if expected is not None and first_offset < expected:
            log.warning(
                "%s:%d went back from offset %d to %d; reading its topic id again",
                tp.topic,
                tp.partition,
                expected,
                first_offset,
            )
            self.forget_topic(tp.topic)
        name = self._names.get(tp)
        if name is not None:
            return name
        topic_id = self.topic_ids.get(tp.topic)
        if topic_id is None:
            if self.fetch is None:
                raise RuntimeError("consumer not started: no topic ids")
            self.topic_ids.update(await self.fetch([tp.topic]))
            topic_id = self.topic_ids[tp.topic]
        name = offset_tracking_name(self.cluster_id, tp.topic, tp.partition, topic_id)
        legacy = offset_tracking_name(self.cluster_id, tp.topic, tp.partition)
        end = await end_offset()
        adopted = await self.worker.call(
            adopt_legacy_position, self.app, legacy, name, topic_id, end
        )
        if adopted:
            log.info("%s: took over position %d of %s", name, adopted, legacy)
        self._names[tp] = name
        return name

    def handled_to(self, tp: TopicPartition, next_offset: int) -> None:
        """``tp`` was read up to ``next_offset`` (or sought there on purpose)."""
        self._next[tp] = next_offset

    def rewound(self, tp: TopicPartition) -> None:
        """``tp`` is sought back on purpose: a lower offset next is no surprise."""
        self._next.pop(tp, None)

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """The assignment changed: the ids of these topics are read again."""
        for tp in partitions:
            self.forget_topic(tp.topic)
            self._next.pop(tp, None)

    def forget_topic(self, topic: str) -> None:
        self.topic_ids.pop(topic, None)
        for tp in [tp for tp in self._names if tp.topic == topic]:
            del self._names[tp]


@dataclass
class Intake:
    """One partition's records sorted out (see the module docstring)."""

    name: str  # the partition's tracking name
    fresh: list[Delivery] = field(default_factory=list)
    # The records for the dead letters, each with why it is refused.
    refused: list[tuple[ConsumerRecord[Any, Any], str]] = field(default_factory=list)
    raw: dict[int, ConsumerRecord[Any, Any]] = field(default_factory=dict)  # fresh, by offset
    duplicates: int = 0
    last: int | None = None  # the last fresh position (valid or not)


UNSIGNED = frozenset({BET_EVENTS})
"""Owned topics whose writer does not sign (``relay.SIGNED_TOPICS`` leaves them out: settlement
does not sign its 10,000 BetSettled a coup; only settlement may write bet-events, the broker's
ACLs say, and only the gateway reads it): their relay headers are checked, not a signature."""


class RecordIntake:
    """Sorts out one partition's records against the store's position and the keyring."""

    def __init__(self, app: ServiceApplication, keyring: Keyring) -> None:
        self.app = app
        self.keyring = keyring  # who may write what (signing.py): every service's public keys

    def sort(
        self,
        logical: str,
        where: Where,
        partitions: int,
        name: str,
        records: Sequence[ConsumerRecord[Any, Any]],
    ) -> Intake:
        """Drop duplicates, decode the rest (the refused and invalid ones go to dead letters)."""
        intake = Intake(name)
        recorded = self.app.tracked_position(name)
        owner = TOPIC_OWNERS.get(logical)
        bets = base_topic(logical) == BET_COMMANDS
        signed = owner is not None and base_topic(logical) not in UNSIGNED
        for record in records:
            if isinstance(record, UnreadableRecord):  # its place only (kafka.SafeFetch)
                if owner is None and record.offset < recorded:
                    intake.duplicates += 1  # passed over before
                    continue
                if owner is None:
                    recorded = intake.last = record.offset + 1
                intake.refused.append((record, record.reason))
                continue
            try:
                position = (
                    record.offset + 1 if owner is None else relayed_position(record.headers, owner)
                )
            except UntrustedHeaders as untrusted:
                intake.refused.append((record, f"untrusted headers: {untrusted.reason}"))
                continue
            if signed and owner is not None:
                refused = self._signature(owner, where, record, position)
                if refused is not None:
                    intake.refused.append((record, f"signature: {refused}"))
                    continue
            if position <= recorded:
                intake.duplicates += 1
                continue
            recorded = position
            intake.last = position
            if record.value is None:
                intake.refused.append((record, "empty message (no value)"))
                continue
            refusal: Refusal | None = None
            try:
                message: Message = decode(logical, record.value)
            except ContractError as error:
                found = _answerable(error, record.key) if bets else None
                if found is None:
                    intake.refused.append((record, error.reason))
                    continue
                message, refusal = found
            except Exception as error:  # a bug; decoding is pure: reading again fails again
                log.exception("decoding a record of %s raised; it is dead-lettered", logical)
                intake.refused.append((record, f"unreadable: decoding raised {error!r}"[:500]))
                continue
            source = owner or _sender(message)
            if owner is None and source is not None:  # a service's message on a shared topic
                refused = self._signature(source, where, record, None)
                if refused is not None:
                    intake.refused.append((record, f"signature: {refused}"))
                    continue
            intake.raw[record.offset] = record
            intake.fresh.append(
                Delivery(
                    message=message,
                    topic=logical,
                    partition=where.partition,
                    offset=record.offset,
                    key=as_text(record.key),
                    source=source,
                    tracking=Tracking(name, position),
                    timestamp=record.timestamp,
                    timestamp_type=record.timestamp_type,
                    refusal=misplaced(message, record.key, where, partitions) or refusal,
                )
            )
        return intake

    def _signature(
        self,
        signer: str,
        where: Where,
        record: ConsumerRecord[Any, Any],
        position: int | None,
    ) -> str | None:
        """Why ``record`` is not ``signer``'s (signing.verify), or None when it is."""
        if position is None:
            try:
                position = relayed_position(record.headers, signer)
            except UntrustedHeaders as refused:
                return f"its relay position cannot be read: {refused.reason}"
        found = [value for key, value in record.headers or () if key == SIGNATURE_HEADER]
        if len(found) > 1:
            return f"header {SIGNATURE_HEADER} appears more than once"
        notification_id, index = divmod(position, MESSAGES_PER_NOTIFICATION)
        return verify(
            self.keyring,
            signer,
            where,
            record.key,
            record.value,
            notification_id,
            index,
            found[0] if found else None,
        )


KEYED_BY_TABLE = (
    "key every message with its table id (UTF-8) and partition with murmur2, Kafka's default "
    "partitioner (librdkafka clients: partitioner=murmur2_random); docs/integrating.md"
)
"""The fix of a misplaced command, said in every refusal."""


def misplaced(message: Message, key: bytes | None, where: Where, partitions: int) -> Refusal | None:
    """Why ``message`` (keyed ``key``) is not where its table's history is, or None."""
    if not isinstance(message, TableMessage):
        return None
    table = message.table_id
    if key != table.encode():
        return Refusal(
            "WRONG_KEY",
            f"the record's key is {_shown(key, 'missing')}, not its table id {table!r}: "
            + KEYED_BY_TABLE,
        )
    home = key_partition(key, partitions)
    if home == where.partition or isinstance(message, CommandRejected):
        return None
    return Refusal(
        "WRONG_PARTITION",
        f"table {table} is in partition {home} of {where.topic} (murmur2 of the table id, "
        f"{partitions} partitions), not in partition {where.partition}: {KEYED_BY_TABLE}",
    )


_FIELD_CODES = {
    "table_id": "NO_SUCH_TABLE",
    "coup_id": "NO_SUCH_COUP",
    "bettor_id": "INVALID_BETTOR_ID",
    "bet_type": "UNKNOWN_BET_TYPE",
    "amount": "INVALID_AMOUNT",
    "currency": "WRONG_CURRENCY",
}
"""A PlaceBet's field -> the reason code of a bet refused for it; any other field (the
envelope's, or one the contract does not know) is ``INVALID_ENVELOPE``."""

_BET_ID: TypeAdapter[str] = TypeAdapter(BetId)
TABLE_ID: TypeAdapter[str] = TypeAdapter(TableId)
_IDENTIFIER: TypeAdapter[str] = TypeAdapter(Identifier)
_ECHOED: TypeAdapter[str] = TypeAdapter(EchoedText)


def _answerable(error: ContractError, key: bytes | None) -> tuple[PlaceBet, Refusal] | None:
    """:func:`refused_bet`, or None (a dead letter) should it raise: like decoding, it is pure,
    and what it raised once it would raise at every reading of the record."""
    try:
        return refused_bet(error, key)
    except Exception:
        log.exception("answering a refused bet raised; it is dead-lettered")
        return None


def refused_bet(error: ContractError, key: bytes | None) -> tuple[PlaceBet, Refusal] | None:
    """A PlaceBet the contract refuses but whose bet id can be read: the bet as echoed in its
    ``BetRejected`` (each field as received if it fits, else cut or replaced so that the
    answer is a valid message) and why; None when there is no bet id to answer."""
    document = error.document
    if error.message_type != PlaceBet.__name__ or document is None or not error.fields:
        return None
    bet_id = valid_as(_BET_ID, document.get("bet_id"))
    if bet_id is None or "bet_id" in error.fields:
        return None
    first = error.fields[0]
    table = valid_as(TABLE_ID, document.get("table_id")) or valid_as(TABLE_ID, as_text(key))
    bet = PlaceBet.model_construct(
        table_id=table or "-",
        bet_id=bet_id,
        coup_id=_echo(_IDENTIFIER, document.get("coup_id"), 128) or "?",
        bettor_id=_echo(_IDENTIFIER, document.get("bettor_id"), 128) or "?",
        bet_type=_echo(_ECHOED, document.get("bet_type"), 40) or "",
        amount=_echo(_ECHOED, document.get("amount"), 40) or "",
        currency=_echo(_ECHOED, document.get("currency"), 40) or "",
    )
    code = _FIELD_CODES.get(first, "INVALID_ENVELOPE")
    why = f"the bet does not follow the contract ({first}): {error.reason}"
    return bet, Refusal(code, why if len(why) <= MAX_TEXT else why[: MAX_TEXT - 3] + "...")


def valid_as(adapter: TypeAdapter[str], value: object) -> str | None:
    """``value`` if the contract's type ``adapter`` takes it (strictly), else None."""
    try:
        return adapter.validate_python(value, strict=True)
    except ValidationError:
        return None


def _echo(adapter: TypeAdapter[str], value: object, limit: int) -> str | None:
    """``value`` as text (a text as it is, anything else as JSON), cut to ``limit``
    characters, if the contract's type takes it."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value)[:limit]
    return valid_as(adapter, text[:limit])


def as_text(raw: object) -> str | None:
    """A Kafka key as text (bad UTF-8 replaced), or None."""
    if raw is None:
        return None
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "replace")
    return str(raw)


def _sender(message: Message) -> str | None:
    """The one service that may send ``message``; None for a message from outside."""
    sender = MESSAGE_SOURCES.get(type(message).__name__)
    return None if sender is None or sender == EXTERNAL else sender
