"""The platform's published stored fact: an incident a service raised."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar
from uuid import UUID

from services.shared.facts.base import Fact


@dataclass(frozen=True)
class IncidentRaisedFact(Fact):
    """A fact a service refused to believe (``IncidentRaised`` on punto-banco.incidents);
    ``evidence_*``, ``source_topic``, ``partition`` and ``offset`` name the message it is
    about and where it was read."""

    STORED_TOPIC: ClassVar[str] = "services.platform.incidents:IncidentLog.Raised"
    service: str
    table_id: str | None
    code: str
    message: str
    coup_id: str | None
    evidence_type: str | None
    evidence_id: UUID | None
    source_topic: str | None
    partition: int | None
    offset: int | None
