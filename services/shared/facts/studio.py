"""The device bridge's stored facts (``services.studio_bridge.domain.DeviceReads``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from services.shared.facts.base import Fact


@dataclass(frozen=True)
class DeviceAttachedFact(Fact):
    """A device first heard by the bridge at a table (not published)."""

    STORED_TOPIC: ClassVar[str] = "services.studio_bridge.domain:DeviceReads.Attached"
    table_id: str
    device: str


@dataclass(frozen=True)
class StudioReadFact(Fact):
    """One read of the device, or a gap (``what="gap"``: ``seq`` to ``last_seq`` never
    received); published as ``StudioRead``."""

    STORED_TOPIC: ClassVar[str] = "services.studio_bridge.domain:DeviceReads.Read"
    table_id: str
    device: str
    seq: int
    what: str
    card: str | None
    button: str | None
    last_seq: int | None
    read_at: datetime


STUDIO_FACTS: tuple[type[Fact], ...] = (DeviceAttachedFact, StudioReadFact)
