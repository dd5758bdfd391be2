"""eventsourcing's PostgreSQL recorder and factory for least-privilege roles and one writer.

:class:`FencedFactory` (what the services use) gives every write transaction the writer
lease's fence (``lease.py``) and the unit's side rows, and sends its statements one at a time
(psycopg's pipeline could leave a large INSERT half sent, both ends waiting for ever).
:class:`ProvisionedRecorder` takes the events table's write lock through the owner's
``pb_lock_events`` procedure: the service's role holds no privilege that could change an event.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import (
    InterfaceError,
    OperationalError,
    ProcessRecorder,
    StoredEvent,
    Tracking,
)
from eventsourcing.postgres import PostgresDatastore, PostgresFactory, PostgresProcessRecorder
from eventsourcing.utils import retry
from psycopg import Cursor
from psycopg.rows import DictRow
from psycopg.sql import SQL, Composed, Identifier, Literal

from services.shared.platform.store.application import LOCK_PROCEDURE
from services.shared.platform.store.lease import FENCE_ENV, fence_statement
from services.shared.platform.store.side_tables import side_rows

FENCED_FACTORY = f"{__name__}:FencedFactory"


class FencedRecorder(PostgresProcessRecorder):
    """eventsourcing's process recorder; with a :attr:`fence`, every write transaction
    (events with or without tracking, tracking alone) starts with it. It writes a unit of
    work's side rows (``side_tables.py``) in its events' transaction."""

    fence: Composed | None = None

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """eventsourcing's write transaction, statement by statement (module docstring); never
        its database function (``POSTGRES_ENABLE_DB_FUNCTIONS``: no fence, tracking, side rows)."""
        with self.datastore.transaction(commit=True) as curs:
            self._insert_events(curs, stored_events, **kwargs)  # the fence, the tracking
            if not stored_events:
                return None
            self._insert_stored_events(curs, stored_events, **kwargs)  # lock, NOTIFY, INSERT
            return self._fetch_ids_after_insert_events(curs, stored_events, **kwargs)

    def _insert_events(
        self, curs: Cursor[DictRow], stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> None:
        if self.fence is not None:
            curs.execute(self.fence)
        super()._insert_events(curs, stored_events, **kwargs)
        for rows in side_rows(kwargs):  # (side_tables.py) after the fence, in the transaction
            document = rows.table.postgres_rows(rows.rows)
            curs.execute(rows.table.insert_many(self.datastore.schema), (document,))

    def insert_tracking(self, tracking: Tracking) -> None:
        with self.datastore.transaction(commit=True) as curs:
            if self.fence is not None:
                curs.execute(self.fence)
            self._insert_tracking(curs, tracking)


class ProvisionedRecorder(FencedRecorder):
    """The process recorder of a provisioned store: the events table's write lock is taken
    through the owner's :data:`LOCK_PROCEDURE`, not with ``LOCK TABLE``."""

    def __init__(self, datastore: PostgresDatastore, **table_names: Any) -> None:
        super().__init__(datastore, **table_names)
        self.lock_table_statements = [
            SQL("SET LOCAL lock_timeout = '{0}s'").format(self.datastore.lock_timeout),
            SQL("CALL {0}.{1}({2})").format(
                Identifier(self.datastore.schema),
                Identifier(LOCK_PROCEDURE),
                Literal(self.events_table_name),
            ),
        ]


class FencedFactory(PostgresFactory):
    """eventsourcing's PostgreSQL factory with the writer lease's fence (module docstring)."""

    process_recorder_class = FencedRecorder

    def process_recorder(self) -> ProcessRecorder:
        recorder = super().process_recorder()
        pid = self.env.get(FENCE_ENV)
        if pid:
            if not isinstance(recorder, FencedRecorder):
                raise TypeError(f"{type(recorder).__name__} cannot fence its writes")
            recorder.fence = fence_statement(self.datastore.schema, int(pid))
        return recorder
