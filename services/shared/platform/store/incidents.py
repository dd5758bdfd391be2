"""Incidents: facts a service refused to believe, recorded with the rest of the unit of work.

:func:`raise_incident` adds an ``IncidentLog.Raised`` event (one log per service and table)
and logs it at ERROR; the relay publishes it as ``IncidentRaised`` (``relay/publishing.py``).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event
from eventsourcing.utils import register_topic

from contracts import Message
from services.shared.facts.incidents import IncidentRaisedFact
from services.shared.facts.topics import record, register_stored_topics
from services.shared.platform.store.application import UnitOfWork

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 1000
"""An incident's message is cut to this length (it may quote untrusted input)."""


@dataclass(frozen=True, slots=True)
class Evidence:
    """The message an incident is about, and where it was read."""

    message_type: str
    event_id: UUID | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None

    @classmethod
    def of(cls, message: Message, origin: Origin | None = None) -> Evidence:
        return cls(type(message).__name__, message.event_id, **asdict(origin or Origin()))


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a message was read: logical topic, partition and offset (all None: not Kafka)."""

    topic: str | None = None
    partition: int | None = None
    offset: int | None = None


class IncidentLog(Aggregate):
    """The incidents one service raised about one table."""

    class Started(Aggregate.Created):
        TOPIC = "services.platform.incidents:IncidentLog.Started"  # stored: never changes
        service: str
        table_id: str | None

    class Raised(IncidentRaisedFact, Aggregate.Event):
        TOPIC = IncidentRaisedFact.STORED_TOPIC  # stored: never changes

        def apply(self, log: IncidentLog) -> None:
            log.count += 1

    @staticmethod
    def create_id(service: str, table_id: str | None, **_: Any) -> UUID:
        return uuid5(NAMESPACE_URL, f"/punto-banco/{service}/incidents/{table_id or '-'}")

    @event(Started)
    def __init__(self, service: str, table_id: str | None) -> None:
        self.service = service
        self.table_id = table_id
        self.count = 0

    def raise_incident(self, incident: IncidentRaisedFact) -> None:
        record(self, self.Raised, incident)


register_stored_topics(IncidentLog)  # its events, under their stored topics
# A log's first event names the aggregate's class by its module path when it was created:
# logs created before the layout move (services/platform) still load.
for _moved in ("services.platform.incidents", "services.shared.platform.incidents"):
    register_topic(f"{_moved}:IncidentLog", IncidentLog)


def raise_incident(
    uow: UnitOfWork,
    service: str,
    code: str,
    message: str,
    *,
    table_id: str | None,
    coup_id: str | None = None,
    evidence: Evidence | None = None,
) -> None:
    """Record an incident in ``uow`` (committed with the rest of the unit) and log it."""
    text = (
        message if len(message) <= MAX_MESSAGE_CHARS else message[: MAX_MESSAGE_CHARS - 3] + "..."
    )
    incidents = uow.get(IncidentLog.create_id(service, table_id), IncidentLog)
    if incidents is None:
        incidents = IncidentLog(service=service, table_id=table_id)
        uow.add(incidents)
    found = evidence or Evidence("")
    incident = IncidentRaisedFact(
        service=service,
        table_id=table_id,
        code=code,
        message=text,
        coup_id=coup_id,
        evidence_type=found.message_type or None,
        evidence_id=found.event_id,
        source_topic=found.topic,
        partition=found.partition,
        offset=found.offset,
    )
    incidents.raise_incident(incident)
    log.error(
        "incident %s at table %s%s: %s",
        code,
        table_id,
        f" coup {coup_id}" if coup_id else "",
        text,
        extra={"table_id": table_id, "coup_id": coup_id},
    )


def refuse_fact(
    uow: UnitOfWork, service: str, fact: Message, code: str, why: str, origin: Origin | None
) -> None:
    """A service's fact the consumer refused where it read it (``Delivery.refusal``: not
    where its table's history is): an incident about it (``code``, ``why``), nothing else."""
    raise_incident(
        uow,
        service,
        code,
        f"{type(fact).__name__} refused: {why}",
        table_id=getattr(fact, "table_id", None),
        coup_id=getattr(fact, "coup_id", None),
        evidence=Evidence.of(fact, origin),
    )
