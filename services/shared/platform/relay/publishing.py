"""Stored events -> contract messages (what a service's ``messages.py`` is written with).

Every message's ``event_id`` and ``occurred_at`` derive from the stored event
(:func:`envelope`), so a message published again after a crash is the same message.
:func:`publish_one` builds a contract from the event's fields of the same names, validated (a
fact of many lines: ``relay/lines.py``). The platform's own facts: a seal publishes its anchor
(:func:`with_anchors`), an incident its ``IncidentRaised``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Any, TypeVar
from uuid import UUID, uuid5

from contracts import IncidentRaised, Message, SealAnchored
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


def shaped(*contracts: type[Message]) -> Callable[[Callable[[Any], Sequence[Message]]], Any]:
    """Mark a hand-written translation with the contracts it makes (for the tests that hold
    every publication to its fact)."""

    def mark(translate: Callable[[Any], Sequence[Message]]) -> Callable[[Any], Sequence[Message]]:
        translate.contracts = contracts  # type: ignore[attr-defined]
        return translate

    return mark


def attr(name: str) -> Callable[[Any], Any]:
    """A derivation that reads another field of the event (``causation_id=attr("x")``)."""
    return lambda event: getattr(event, name)


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
