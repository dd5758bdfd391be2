"""Seal anchors (topic `punto-banco.seals`): each service's seal heads, outside its store.

Every service seals its event store (a SHA-256 chain of seals over its notification log,
recorded in the store itself). Its outbox relay publishes each seal here as a
``SealAnchored``, signed with the service's key (the ``pb-sig`` header), keyed by the
service's name; the topic keeps every record forever. An auditor compares a store's seals
with the anchors: someone who can rewrite the store (and recompute its chain) cannot rewrite
what was anchored, nor sign a new anchor without the service's key. The seal's own
notification id in its store is the record's relay position (``pb-notification-id``, signed).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contracts.dead_letter import ServiceName
from contracts.envelope import MAX_COUNT, HexDigest, Message, UtcDatetime

MAX_PARTITION = 999
"""The highest partition number of a partitioned service's store."""
MAX_NOTIFICATION_ID = 2**63 - 1
"""The largest notification id (a store's row id: a signed 64-bit integer)."""


class SealAnchored(Message):
    """A seal recorded in a service's store (the store's chain up to ``to_id``)."""

    type: Literal["SealAnchored"] = "SealAnchored"
    service: ServiceName = Field(description="The service whose store was sealed; the Kafka key.")
    partition: int | None = Field(
        default=None,
        ge=0,
        le=MAX_PARTITION,
        description="A partitioned service's store: the partition whose cell it is (its "
        "tables' partition on every topic); none for a service's one store.",
    )
    scheme: Literal["pb-seal-v1"] = Field(
        default="pb-seal-v1", description="The sealing scheme (how `digest` is computed)."
    )
    seal: int = Field(
        ge=1, le=MAX_NOTIFICATION_ID, description="The seal's number in its store: 1, 2, ..."
    )
    from_id: int = Field(
        ge=0, le=MAX_NOTIFICATION_ID, description="Notifications covered: after this id..."
    )
    to_id: int = Field(ge=1, le=MAX_NOTIFICATION_ID, description="... up to this id, inclusive.")
    count: int = Field(ge=1, le=MAX_COUNT, description="How many stored events the seal covers.")
    digest: HexDigest = Field(description="The seal's digest (SHA-256, hex): the chain's head.")
    previous_digest: HexDigest = Field(
        description="The previous seal's digest (64 zeros for the first seal)."
    )
    sealed_at: UtcDatetime = Field(description="When the seal was recorded, UTC ISO 8601.")
