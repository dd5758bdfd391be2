"""Dead letters (topic `punto-banco.dead-letters`): what a service could not read or publish."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from contracts.envelope import HexDigest, Message, TableId, TypeName, Uuid

MAX_DEAD_LETTER_PAYLOAD = 256 * 1024
"""Original bytes kept in a dead letter at most (the rest is named by its digest)."""

MAX_HEADERS = 32
"""Headers of the original record kept in a dead letter at most."""

MAX_HEADER_CHARS = 256
"""Characters of a header's name or value kept in a dead letter at most."""

TopicName = Annotated[str, StringConstraints(min_length=1, max_length=249)]
"""A Kafka topic name (Kafka allows at most 249 characters)."""

ServiceName = Annotated[str, StringConstraints(min_length=1, max_length=32)]
"""The name of a punto-banco service (``settlement``...)."""

ErrorText = Annotated[str, StringConstraints(max_length=2000)]
"""Why something was refused, in words (at most 2,000 characters)."""

HeaderText = Annotated[str, StringConstraints(max_length=MAX_HEADER_CHARS)]


class DeadLetter(Message):
    """A record that could not be decoded, validated or handled, kept for inspection.

    The original bytes are kept up to 256 KiB (``payload_b64``); ``payload_size`` and
    ``payload_sha256`` name the whole original, so a truncated payload can still be matched
    to the record it came from.
    """

    type: Literal["DeadLetter"] = "DeadLetter"
    table_id: TableId | None = Field(
        default=None, description="The table, when the original key names one; else null."
    )
    original_topic: TopicName = Field(description="Topic the message was read from.")
    partition: int = Field(ge=0, le=2**31 - 1, description="Partition it was read from.")
    offset: int = Field(ge=0, le=2**63 - 1, description="Its offset in that partition.")
    key: HeaderText | None = Field(
        description=(
            "The original Kafka key, decoded as UTF-8 (bad bytes replaced, at most 256 "
            "characters); null if none."
        )
    )
    headers: dict[HeaderText, HeaderText | None] = Field(
        default_factory=dict,
        max_length=MAX_HEADERS,
        description=(
            "The original headers (e.g. `pb-source`), values decoded as UTF-8 with bad bytes "
            "replaced, at most 32 headers of at most 256 characters; null for a header without "
            "a value."
        ),
    )
    payload_b64: str = Field(
        max_length=(MAX_DEAD_LETTER_PAYLOAD + 2) // 3 * 4,
        description="The original message value (its first 256 KiB), base64 (standard alphabet).",
    )
    payload_size: int | None = Field(
        default=None, ge=0, le=2**31 - 1, description="Size of the whole original value, bytes."
    )
    payload_sha256: HexDigest | None = Field(
        default=None, description="SHA-256 of the whole original value (hex)."
    )
    error: ErrorText = Field(description="Why it was refused (e.g. the `ContractError` reason).")
    service: ServiceName = Field(description="The service that refused it, e.g. `settlement`.")


class MessageQuarantined(Message):
    """A message a service could not publish (e.g. larger than the broker accepts).

    It stays in the service's event store (``notification_id``); this small record takes its
    place so that nothing behind it waits, and an operator is alarmed.
    """

    type: Literal["MessageQuarantined"] = "MessageQuarantined"
    table_id: TableId | None = Field(default=None, description="The table of the message.")
    service: ServiceName = Field(description="The service that could not publish it.")
    original_topic: TopicName = Field(description="The topic it was meant for.")
    message_type: TypeName = Field(description="Its type, e.g. `BetRejected`.")
    message_id: Uuid = Field(description="Its `event_id`.")
    notification_id: int = Field(
        ge=1, le=2**63 - 1, description="Where the stored event is in the service's event log."
    )
    message_index: int = Field(
        ge=0, le=2**20 - 1, description="Which message of that stored event it was (0, 1...)."
    )
    size: int = Field(ge=0, le=2**31 - 1, description="Its size in bytes, encoded.")
    sha256: HexDigest = Field(description="SHA-256 of its encoded bytes (hex).")
    reason: ErrorText = Field(description="Why it could not be published.")
