"""Refused table commands: a log per table id (the table may not exist), and the command ids
refused, as rows of dealing's side table ``refused_commands``.

A command id is refused once per table id, and a void refused once stays refused (its decision
is spent). What was refused is looked up by id in the side table (``side_tables``), a batch's
ids in one query, and written with the ``CommandRejected`` itself, so neither memory nor a
batch's cost grows with the number refused before; the log aggregate holds nothing but its
table id (snapshotted, so a cold read is short too). Stores written before the table hold the
refusals as events only: :func:`index_old_refusals` gives them their rows once, at the first
start.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event
from eventsourcing.persistence import Notification, Recorder, Tracking
from eventsourcing.utils import get_topic

from contracts import MISPLACED
from services.shared.facts.dealing import CommandRejectedFact
from services.shared.facts.topics import record, register_stored_topics
from services.shared.platform.store import (
    REFUSED_COMMANDS,
    ServiceApplication,
    SideRows,
    fill_from_history,
    select_rows,
)

Key = tuple[str, str]
"""(table id, command id as text): a row of ``refused_commands``."""
DONE = "dealing:refused-commands-filled"
"""Tracking name: the refusals of an older store have their rows (position 1)."""
PROGRESS = "dealing:refused-commands-filling"
"""Tracking name: the last notification whose refusal has its row."""
PAGE = 500
"""Notifications read (and rows inserted) at a time."""


def rejections_aggregate_id(table_id: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"/punto-banco/dealing/rejections/{table_id}")


class CommandRejections(Aggregate):
    """The commands refused for one table id, as events (the ids refused: :class:`Refused`;
    one read where its table's history is not, ``contracts.MISPLACED``, keeps its id free)."""

    class Started(Aggregate.Created):
        table_id: str

    class CommandRejected(CommandRejectedFact, Aggregate.Event):
        TOPIC = CommandRejectedFact.STORED_TOPIC

    @staticmethod
    def create_id(table_id: str, **_: Any) -> UUID:
        return rejections_aggregate_id(table_id)

    @event(Started)
    def __init__(self, table_id: str) -> None:
        self.table_id = table_id

    def reject(self, command_id: UUID, command_type: str, reason_code: str, message: str) -> None:
        rejected = CommandRejectedFact(
            table_id=self.table_id,
            command_id=command_id,
            command_type=command_type,
            reason_code=reason_code,
            message=message,
        )
        record(self, self.CommandRejected, rejected)


class Refused:
    """The command ids refused, as one unit of work reads and adds them (:meth:`begin` at
    each unit; :meth:`rows` go with its events)."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder
        self._read: set[Key] = set()  # looked up in this unit
        self._known: set[Key] = set()  # refused, as far as this unit knows
        self._new: list[Key] = []  # refused in this unit
        self.reads = 0  # queries made (a test counts them)

    def begin(self) -> None:
        self._read, self._known, self._new = set(), set(), []

    def prefetch(self, keys: Iterable[tuple[str, UUID]]) -> None:
        """Read which of ``keys`` (table id, command id) were refused, in one query."""
        wanted = list({(table_id, str(command_id)) for table_id, command_id in keys} - self._read)
        if wanted:
            self.reads += 1
            self._read.update(wanted)
            found = select_rows(self._recorder, REFUSED_COMMANDS, wanted)
            self._known.update((table_id, command_id) for table_id, command_id in found)

    def before(self, table_id: str, command_id: UUID) -> bool:
        """Whether the command was refused for ``table_id`` (in this unit or before)."""
        self.prefetch([(table_id, command_id)])
        return (table_id, str(command_id)) in self._known

    def add(self, table_id: str, command_id: UUID) -> bool:
        """Note the command refused now; False (nothing noted) when it was before."""
        if self.before(table_id, command_id):
            return False
        key = (table_id, str(command_id))
        self._known.add(key)
        self._new.append(key)
        return True

    def rows(self) -> SideRows:
        """The rows of the commands refused in this unit."""
        return SideRows(REFUSED_COMMANDS, list(self._new))


def index_old_refusals(app: ServiceApplication) -> int:
    """Give every refusal of an older dealing its row (once); the notifications read."""

    def record_page(page: Sequence[Notification]) -> None:
        events = [app.mapper.to_domain_event(notification) for notification in page]
        with app.unit_of_work(Tracking(PROGRESS, page[-1].id)) as uow:
            keys = {
                (e.table_id, str(e.command_id))  # type: ignore[attr-defined]
                for e in events
                if e.reason_code not in MISPLACED  # type: ignore[attr-defined]
            }
            uow.add_rows(SideRows(REFUSED_COMMANDS, sorted(keys)))

    topics = [get_topic(CommandRejections.CommandRejected)]
    return fill_from_history(app.process_recorder, DONE, PROGRESS, topics, PAGE, record_page)


register_stored_topics(CommandRejections)
