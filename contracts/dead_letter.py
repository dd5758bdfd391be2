"""Dead letters (topic `punto-banco.dead-letters`): messages a service could not decode."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contracts.envelope import Message, TableId


class DeadLetter(Message):
    """A message that could not be decoded or validated, kept byte for byte for inspection."""

    type: Literal["DeadLetter"] = "DeadLetter"
    table_id: TableId | None = Field(
        default=None, description="The table, when the original key names one; else null."
    )
    original_topic: str = Field(description="Topic the message was read from.")
    partition: int = Field(ge=0, description="Partition it was read from.")
    offset: int = Field(ge=0, description="Its offset in that partition.")
    key: str | None = Field(
        description="The original Kafka key, decoded as UTF-8 (bad bytes replaced); null if none."
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="The original headers (e.g. `pb-source`), values decoded as UTF-8.",
    )
    payload_b64: str = Field(description="The original message value, base64 (standard alphabet).")
    error: str = Field(description="Why it was refused (the `ContractError` reason).")
    service: str = Field(description="The service that refused it, e.g. `settlement`.")
