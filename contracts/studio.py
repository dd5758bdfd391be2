"""Reads of a studio table's card-reading shoe (topic `punto-banco.studio-reads`).

The device bridge (``punto-banco serve studio-bridge``) publishes one ``StudioRead`` for each
event its device reported once (a second line with the same device sequence number is the same
read, not published again), and one ``what="gap"`` read for sequence numbers it never received.
The device's line protocol is docs/studio.md's PB1.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from contracts.envelope import CardCode, TableMessage, UtcDatetime

MAX_DEVICE_SEQ = 2**63 - 1
"""The largest device sequence number (PB1's bound)."""

DeviceId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,32}$")]
"""A device's id: 1 to 32 of ``A-Z a-z 0-9 _ -`` (PB1's)."""

DeviceSeq = Annotated[int, Field(ge=0, le=MAX_DEVICE_SEQ)]
"""A device's sequence number: 0 to 2^63 - 1."""

ReadKind = Literal[
    "card",
    "unreadable",
    "shoe-in",
    "shoe-out",
    "cut-card",
    "burn-start",
    "burn-end",
    "button",
    "gap",
]
"""What the device reported (PB1's events but the heartbeat), or ``gap``: sequence numbers
that never arrived."""

ButtonName = Literal["CONFIRM", "RESCAN", "SUPERVISOR"]
"""A dealer's button on the shoe."""


class StudioRead(TableMessage):
    """One read of a studio table's device, once, in the device's order (as recorded)."""

    type: Literal["StudioRead"] = "StudioRead"
    device: DeviceId = Field(description="The device that reported it (the table's one).")
    seq: DeviceSeq = Field(
        description="The device's sequence number of the read; of a gap, its first missing one."
    )
    what: ReadKind = Field(description="What was read (`gap`: sequence numbers never received).")
    card: CardCode | None = Field(
        default=None, description="The card, when `what` is `card` (else null)."
    )
    button: ButtonName | None = Field(
        default=None, description="The button pressed, when `what` is `button` (else null)."
    )
    last_seq: DeviceSeq | None = Field(
        default=None,
        description="Of a gap, its last missing sequence number (at least `seq`; else null).",
    )
    read_at: UtcDatetime = Field(description="When the bridge received the line (or the gap).")
