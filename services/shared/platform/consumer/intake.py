"""What one partition's fetched records become: fresh deliveries, duplicates, refused records.

Run in the service's worker thread (it reads the store's tracking position), before any
handler is called (``handling.py``), for the records of ONE topic-partition, in order:

1. Each record has a tracking position (:func:`record_position`, ``tracking.py``). On a topic
   with an owner (``contracts.TOPIC_OWNERS``) it comes from the owner's relay headers, checked
   strictly; a record whose headers are missing, repeated, malformed, out of range or from
   another source is REFUSED (a dead letter, never a position). On the other topics the
   ``pb-*`` headers are ignored and records are tracked by offset.
2. Then the writer's signature (``pb-sig``, ``signing.py``), before anything is tracked or
   handled: on an owned topic every record must be signed by a key of the topic's owner (the
   keyring), for its own topic (prefix included), partition, cluster, key and relay position;
   elsewhere a message that only a service may send (``contracts.MESSAGE_SOURCES``: dealing's
   ``OpenBook`` / ``CloseBook`` on bet-commands, which gateways also write) must be signed by
   that service, for the position its relay headers give. A record that fails is refused
   (``signature: ...``), never a position; commands from outside need no signature.
3. Records at or below the recorded position are duplicates (a redelivery after a crash, or a
   relay republishing): skipped, never handed to a handler.
4. A fresh record without a value or that does not decode (``ContractError``) is refused too,
   but it takes its position: its partition goes on past it. Except a PlaceBet whose bet id
   can be read: it is delivered with a :class:`Refusal` naming its first wrong field
   (:func:`refused_bet`), so its operator gets a ``BetRejected`` instead of silence.
5. A table's history is one partition: a message whose key is not its table id (``WRONG_KEY``)
   or whose partition is not its table's (``WRONG_PARTITION``: murmur2 of the table id modulo
   the partition count, ``kafka.key_partition``) is delivered with a :class:`Refusal`: the
   service answers a command from outside with it, raises an incident for a service's fact,
   and changes nothing else. A ``CommandRejected`` (an answer, changing nothing) is the one
   message a partition cell writes in its own partition for another partition's table
   (``relay_records.py``): its key is checked, not its partition.

Refused records keep their original record (bytes, key, headers) for the dead letter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from aiokafka import ConsumerRecord
from eventsourcing.persistence import Tracking
from pydantic import TypeAdapter, ValidationError

from contracts import (
    BET_COMMANDS,
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
from services.shared.platform.consumer.dead_letters import as_text
from services.shared.platform.consumer.deliveries import Delivery, Refusal
from services.shared.platform.consumer.tracking import (
    MESSAGES_PER_NOTIFICATION,
    Headers,
    UntrustedHeaders,
    relayed_position,
)
from services.shared.platform.kafka import SIGNATURE_HEADER, key_partition
from services.shared.platform.security.signing import Keyring, Where, verify
from services.shared.platform.store.application import ServiceApplication

Position = int | UntrustedHeaders
"""A record's tracking position, or why its headers are refused."""


@dataclass
class Refused:
    """A record that goes to the dead letters, and why."""

    record: ConsumerRecord[Any, Any]
    error: str


@dataclass
class Intake:
    """One partition's records sorted out (see the module docstring)."""

    name: str  # the partition's tracking name
    fresh: list[Delivery] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    raw: dict[int, ConsumerRecord[Any, Any]] = field(default_factory=dict)  # fresh, by offset
    duplicates: int = 0
    last: int | None = None  # the last fresh position (valid or not)


def record_position(logical: str, record: ConsumerRecord[Any, Any]) -> Position:
    """The record's tracking position (``tracking.py``), or why it is refused."""
    owner = TOPIC_OWNERS.get(logical)
    if owner is None:
        return int(record.offset) + 1
    try:
        return relayed_position(record.headers, owner)
    except UntrustedHeaders as refused:
        return refused


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
        records: list[tuple[ConsumerRecord[Any, Any], Position]],
    ) -> Intake:
        """Drop duplicates, decode the rest (the refused and invalid ones go to dead letters).

        ``where``: the partition the records were read from (its topic, with the prefix, and
        cluster); ``partitions``: the topic's partition count."""
        intake = Intake(name)
        recorded = self.app.tracked_position(name)
        owner = TOPIC_OWNERS.get(logical)
        bets = base_topic(logical) == BET_COMMANDS
        for record, position in records:
            if isinstance(position, UntrustedHeaders):
                intake.refused.append(Refused(record, f"untrusted headers: {position.reason}"))
                continue
            if owner is not None:
                refused = self._signature(owner, where, record, position)
                if refused is not None:
                    intake.refused.append(Refused(record, f"signature: {refused}"))
                    continue
            if position <= recorded:
                intake.duplicates += 1
                continue
            recorded = position
            intake.last = position
            if record.value is None:
                intake.refused.append(Refused(record, "empty message (no value)"))
                continue
            refusal: Refusal | None = None
            try:
                message: Message = decode(logical, record.value)
            except ContractError as error:
                found = refused_bet(error, record.key) if bets else None
                if found is None:
                    intake.refused.append(Refused(record, error.reason))
                    continue
                message, refusal = found
            source = owner or _sender(message)
            if owner is None and source is not None:  # a service's message on a shared topic
                refused = self._signature(source, where, record, None)
                if refused is not None:
                    intake.refused.append(Refused(record, f"signature: {refused}"))
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
        """Why ``record`` is not ``signer``'s (signing.verify), or None when it is.

        ``position``: the record's relay position, read from its headers when None.
        """
        if position is None:
            try:
                position = relayed_position(record.headers, signer)
            except UntrustedHeaders as refused:
                return f"its relay position cannot be read: {refused.reason}"
        header = _only(record.headers, SIGNATURE_HEADER)
        if isinstance(header, _Repeated):
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
            header,
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
            f"the record's key is {_shown(key)}, not its table id {table!r}: {KEYED_BY_TABLE}",
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
_TABLE_ID: TypeAdapter[str] = TypeAdapter(TableId)
_IDENTIFIER: TypeAdapter[str] = TypeAdapter(Identifier)
_ECHOED: TypeAdapter[str] = TypeAdapter(EchoedText)


def refused_bet(error: ContractError, key: bytes | None) -> tuple[PlaceBet, Refusal] | None:
    """A PlaceBet the contract refuses but whose bet id can be read: the bet as echoed in its
    ``BetRejected`` (each field as received if it fits, else cut or replaced so that the
    answer is a valid message) and why; None when there is no bet id to answer."""
    document = error.document
    if error.message_type != PlaceBet.__name__ or document is None or not error.fields:
        return None
    bet_id = _valid(_BET_ID, document.get("bet_id"))
    if bet_id is None or "bet_id" in error.fields:
        return None
    first = error.fields[0]
    table = _valid(_TABLE_ID, document.get("table_id")) or _valid(_TABLE_ID, as_text(key))
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


def _valid(adapter: TypeAdapter[str], value: object) -> str | None:
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
    return _valid(adapter, text[:limit])


def _shown(key: bytes | None, limit: int = 40) -> str:
    if key is None:
        return "missing"
    text = repr(key[: limit + 1])
    return text if len(key) <= limit else text + "..."


def _sender(message: Message) -> str | None:
    """The one service that may send ``message``; None for a message from outside."""
    sender = MESSAGE_SOURCES.get(type(message).__name__)
    return None if sender is None or sender == EXTERNAL else sender


class _Repeated:
    """A header found more than once."""


def _only(headers: Headers, name: str) -> bytes | _Repeated | None:
    """The value of the header ``name`` (None when absent or null), or _Repeated."""
    found: list[bytes | None] = [value for key, value in headers or () if key == name]
    if len(found) > 1:
        return _Repeated()
    return found[0] if found else None
