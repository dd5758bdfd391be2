"""Stored events -> contract messages (what a service's ``messages.py`` is written with).

Every message's ``event_id`` and ``occurred_at`` derive from the stored event
(:func:`envelope`), so a message published again after a crash is the same message.
:func:`publish_one` builds a contract from the event's fields of the same names, validated;
:func:`publish_lines` one message per line of a batch fact, unvalidated (the values were
validated when recorded), by a builder compiled once per shape. The platform's own facts: a
seal publishes its anchor (:func:`with_anchors`), an incident its ``IncidentRaised``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Any, TypeVar, cast
from uuid import UUID, SafeUUID, uuid5

from contracts import IncidentRaised, Message, SealAnchored
from contracts.trusted import trusted
from services.shared.platform.settings import store_name
from services.shared.platform.store.incidents import IncidentLog
from services.shared.platform.store.sealing import LEDGER_ID, SealLedger

NAMESPACE = UUID("6f1c1d2e-9a57-4b53-8a43-2f0c1b7d9e10")


def message_id(originator_id: UUID, originator_version: int, index: int = 0) -> UUID:
    """Deterministic id of the ``index``-th message published for a stored event."""
    return uuid5(NAMESPACE, f"{originator_id}:{originator_version}:{index}")


def envelope(event: Any, index: int = 0) -> dict[str, Any]:
    """``event_id`` and ``occurred_at`` for the ``index``-th message made from ``event``."""
    timestamp: datetime = event.timestamp
    if timestamp.tzinfo is None:
        timestamp = timestamp.replace(tzinfo=UTC)
    return {
        "event_id": message_id(event.originator_id, event.originator_version, index),
        "occurred_at": timestamp,
    }


M = TypeVar("M", bound=Message)

ENVELOPE = ("type", "event_id", "schema_version", "occurred_at")
"""The fields every message has that no fact holds (the envelope made here)."""


@cache
def payload_fields(contract: type[Message]) -> tuple[str, ...]:
    """The contract's fields a fact supplies: all but the envelope, in the contract's order."""
    return tuple(name for name in contract.model_fields if name not in ENVELOPE)


def publish_one(contract: type[M], event: Any, index: int = 0, **given: Any) -> M:
    """``contract`` from ``event``'s fields of the same names, validated."""
    fields = payload_fields(contract)
    unknown = given.keys() - fields - {"event_id", "occurred_at"}
    if unknown:
        raise TypeError(f"{contract.__name__} has no fields {sorted(unknown)}")
    values: dict[str, Any] = envelope(event, index)
    for name in fields:
        if name not in given and hasattr(event, name):
            values[name] = getattr(event, name)
    values.update(given)
    return contract.model_validate(values)


class Publication:
    """The messages of a one-to-one fact: ``contract`` from the event's fields, and
    ``derive`` computing the contract fields the event does not hold by name."""

    def __init__(self, contract: type[Message], derive: Mapping[str, Callable[[Any], Any]]):
        self.contract = contract
        self.contracts: tuple[type[Message], ...] = (contract,)
        self.derive = dict(derive)

    def __call__(self, event: Any) -> list[Message]:
        derived = {name: make(event) for name, make in self.derive.items()}
        return [publish_one(self.contract, event, **derived)]

    def __repr__(self) -> str:
        return f"one({self.contract.__name__}, derive={sorted(self.derive)})"


def one(contract: type[Message], **derive: Callable[[Any], Any]) -> Publication:
    """The publication of a fact as one ``contract`` message (see :class:`Publication`)."""
    return Publication(contract, derive)


def shaped(*contracts: type[Message]) -> Callable[[Callable[[Any], list[Message]]], Any]:
    """Mark a hand-written translation with the contracts it makes (for the tests that hold
    every publication to its fact)."""

    def mark(translate: Callable[[Any], list[Message]]) -> Callable[[Any], list[Message]]:
        translate.contracts = contracts  # type: ignore[attr-defined]
        return translate

    return mark


def attr(name: str) -> Callable[[Any], Any]:
    """A derivation that reads another field of the event (``causation_id=attr("x")``)."""
    return lambda event: getattr(event, name)


# -- many messages of one stored event ------------------------------------------------
_new_uuid = UUID.__new__
_set = object.__setattr__
_UNKNOWN_SAFETY = SafeUUID.unknown  # read once: an enum member read from its class costs 1 us


def _uuid(value: int) -> UUID:
    """``UUID(int=value)`` for a value known to fit 128 bits, without re-checking it
    (two fifths of the cost, for 10,000 ids per coup)."""
    made = _new_uuid(UUID)
    _set(made, "int", value)
    _set(made, "is_safe", _UNKNOWN_SAFETY)
    return made


def line_ids(event: Any, count: int) -> list[UUID]:
    """``event_id`` of each of ``count`` messages of one stored event (deterministic, cheap)."""
    base = envelope(event, 0)["event_id"].int
    return [_uuid(base ^ index) for index in range(count)]


class LineShape:
    """How to make ``contract`` from a line record: each field's source, worked out once."""

    def __init__(
        self,
        contract: type[Message],
        record: type[tuple[Any, ...]],
        common: Sequence[str],
        extra: Sequence[str],
    ) -> None:
        line_names: tuple[str, ...] = record._fields  # type: ignore[attr-defined]
        names: dict[str, Any] = {"_trusted": trusted, "_contract": contract}
        items = []
        for name, info in contract.model_fields.items():
            if name == "event_id":
                source = "{event_id}"  # a name, or ids[index] in make_all
            elif name == "occurred_at":
                source = name
            elif name in common:
                source = f"common[{common.index(name)}]"
            elif name in line_names:
                source = f"line[{line_names.index(name)}]"
            elif name in extra:
                source = f"extra[{extra.index(name)}]"
            elif info.is_required():
                raise TypeError(f"{contract.__name__}.{name} has no source in a line")
            else:
                source = f"_default_{len(names)}"
                names[source] = info.get_default(call_default_factory=True)
            items.append(f"{name!r}: {source}")
        defaults = ", ".join(f"{name}={name}" for name in names)
        values = ", ".join(items)
        one, each = values.format(event_id="event_id"), values.format(event_id="ids[index]")
        code = (
            f"def make(event_id, occurred_at, common, line, extra=(), *, {defaults}):\n"
            f"    return _trusted(_contract, {{{one}}})\n"
            f"def make_all(ids, occurred_at, common, lines, extra=(), *, {defaults}):\n"
            f"    return [_trusted(_contract, {{{each}}}) for index, line in enumerate(lines)]\n"
        )
        namespace: dict[str, Any] = {}
        exec(code, names, namespace)  # the shape's own builders, compiled once
        self.make: Callable[..., Message] = namespace["make"]
        """``make(event_id, occurred_at, common, line, extra=())``: the message of one line
        (``common`` and ``extra`` in the shape's order). A line longer than the record (a
        newer writer's) publishes the record's fields; a shorter one raises IndexError."""
        self.make_all: Callable[..., list[Message]] = namespace["make_all"]
        """``make_all(ids, occurred_at, common, lines)``: ``make`` of each line, its id
        ``ids[index]``, in one loop."""


@cache
def line_shape(
    contract: type[Message],
    record: type[tuple[Any, ...]],
    common: tuple[str, ...],
    extra: tuple[str, ...] = (),
) -> LineShape:
    """The (cached) :class:`LineShape` of ``contract`` made from ``record`` lines."""
    return LineShape(contract, record, common, extra)


def publish_lines(
    contract: type[M],
    event: Any,
    lines: Sequence[tuple[Any, ...]],
    record: type[tuple[Any, ...]],
    *,
    common: Mapping[str, Any],
    ids: Sequence[UUID] | None = None,
) -> list[M]:
    """One ``contract`` per line, in line order, unvalidated (``contracts.trusted``)."""
    shape = line_shape(contract, record, tuple(common))
    made = ids if ids is not None else line_ids(event, len(lines))
    occurred_at = envelope(event)["occurred_at"]
    values = tuple(common.values())
    return cast(list[M], shape.make_all(made, occurred_at, values, lines))


def anchor_message(
    service: str, event: SealLedger.Sealed, partition: int | None = None
) -> SealAnchored:
    """The anchor of one recorded seal (seal number = ledger version - 1: Started is 1);
    ``partition``: the store is that partition's cell's (``partitioned.py``)."""
    sealed_at = envelope(event)["occurred_at"]
    return SealAnchored(
        event_id=message_id(
            uuid5(LEDGER_ID, store_name(service, partition)), event.originator_version
        ),
        occurred_at=sealed_at,
        service=service,
        partition=partition,
        seal=event.originator_version - 1,
        from_id=event.from_id,
        to_id=event.to_id,
        count=event.count,
        digest=event.digest,
        previous_digest=event.previous_digest,
        sealed_at=sealed_at,
    )


def with_anchors(
    mapper: Callable[[Any], Sequence[Any]], service: str, partition: int | None = None
) -> Callable[[Any], Sequence[Any]]:
    """Wrap a service's ``to_messages``: each seal publishes its anchor."""

    def mapped(event: Any) -> Sequence[Any]:
        if isinstance(event, SealLedger.Sealed):
            return [anchor_message(service, event, partition)]
        if isinstance(event, SealLedger.Started):
            return []
        return mapper(event)

    return mapped


def with_incidents(mapper: Callable[[Any], Sequence[Any]]) -> Callable[[Any], Sequence[Any]]:
    """Wrap a service's ``to_messages``: recorded incidents are published too."""

    def mapped(event: Any) -> Sequence[Any]:
        if isinstance(event, IncidentLog.Raised):
            return [publish_one(IncidentRaised, event)]  # its fields by name
        if isinstance(event, IncidentLog.Started):
            return []
        return mapper(event)

    return mapped


def without_seals(mapper: Callable[[Any], Sequence[Any]]) -> Callable[[Any], Sequence[Any]]:
    """Wrap ``to_messages``: seal events publish nothing (the in-process simulation; a running
    service publishes their anchors instead, ``anchors.with_anchors``)."""

    def mapped(event: Any) -> Sequence[Any]:
        if isinstance(event, SealLedger.Started | SealLedger.Sealed):
            return []
        return mapper(event)

    return mapped
