"""Refused table commands, one log per table id (the table may not exist)."""

from __future__ import annotations

from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from contracts import MISPLACED
from services.shared.facts.dealing import CommandRejectedFact
from services.shared.facts.topics import record, register_stored_topics


def rejections_aggregate_id(table_id: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"/punto-banco/dealing/rejections/{table_id}")


class CommandRejections(Aggregate):
    """The commands refused for one table id; a command id is refused once (except one read
    where its table's history is not, ``contracts.MISPLACED``: it may be sent again there)."""

    class Started(Aggregate.Created):
        table_id: str

    class CommandRejected(CommandRejectedFact, Aggregate.Event):
        TOPIC = CommandRejectedFact.STORED_TOPIC

        def apply(self, rejections: CommandRejections) -> None:
            if self.reason_code not in MISPLACED:  # sent to the wrong place: still free
                rejections.command_ids.add(self.command_id)

    @staticmethod
    def create_id(table_id: str, **_: Any) -> UUID:
        return rejections_aggregate_id(table_id)

    @event(Started)
    def __init__(self, table_id: str) -> None:
        self.table_id = table_id
        self.command_ids: set[UUID] = set()

    def reject(self, command_id: UUID, command_type: str, reason_code: str, message: str) -> None:
        if command_id in self.command_ids:
            return
        rejected = CommandRejectedFact(
            table_id=self.table_id,
            command_id=command_id,
            command_type=command_type,
            reason_code=reason_code,
            message=message,
        )
        record(self, self.CommandRejected, rejected)


register_stored_topics(CommandRejections)
