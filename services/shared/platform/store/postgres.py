"""eventsourcing's PostgreSQL recorder and factory, adapted to least-privilege roles.

A store provisioned by ``punto-banco db setup`` (``pg_roles.py``) belongs to a NOLOGIN owner
role; the service logs in as a role that may SELECT and INSERT its stored events but never
UPDATE, DELETE or TRUNCATE them. eventsourcing serializes the writers of an events table with
``LOCK TABLE ... IN EXCLUSIVE MODE`` (so that inserts commit in notification-id order and a
reader never passes a gap filled later), and PostgreSQL grants that lock mode only to a role
holding UPDATE, DELETE or TRUNCATE on the table (or MAINTAIN, from version 17).
:class:`ProvisionedRecorder` takes the same lock through the owner's procedure
``<schema>.pb_lock_events(table)`` instead: SECURITY DEFINER, it runs as the owner and locks
only the events tables of its own schema, so the service needs no privilege that could change
a stored event. The service selects it with ``PB_POSTGRES_CREATE_TABLES=no``
(``Settings.eventsourcing_env``).

:class:`OwnerRoleFactory`: eventsourcing's PostgreSQL factory whose connections act as the role
named by ``PB_POSTGRES_SET_ROLE`` (the libpq option ``-c role=...``, which PostgreSQL allows
only to a member of that role): the provisioning creates each store's tables, types and
functions through it, so they belong to the owner role from the start.

:class:`FencedFactory` (what the services use): eventsourcing's PostgreSQL factory whose
process recorder opens every write transaction with the writer lease's fence
(``writer_fence.py``) when the environment names the lease's connection
(``PB_WRITER_FENCE``): an instance that lost its lease commits nothing.

:class:`FencedRecorder` also writes WITHOUT psycopg's pipeline mode. eventsourcing sends a write
transaction's statements (tracking, lock, NOTIFY, one INSERT of every event) as one pipeline;
psycopg's pipeline loop stops flushing once its command queue is empty and its fetch then only
waits to read, so an INSERT larger than the socket's send buffer (a unit of work settling
several 10,000-bet coups) could stay half sent: the server waiting for the rest of it
(``ClientRead``), the client for results, for ever (seen once under load: BENCHMARKS.md). Sent
one statement at a time, each is flushed whole before its result is awaited; it costs a few
round trips per transaction, not per event.
"""

from __future__ import annotations

import re
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
from eventsourcing.utils import Environment, EnvType, retry
from psycopg import Cursor
from psycopg.rows import DictRow
from psycopg.sql import SQL, Composed, Identifier, Literal

from services.shared.platform.store.lease import FENCE_ENV, fence_statement
from services.shared.platform.store.side_tables import side_rows

LOCK_PROCEDURE = "pb_lock_events"
"""The owner's procedure taking an events table's write lock (created by ``pg_schemas.py``)."""
SET_ROLE = "PB_POSTGRES_SET_ROLE"
"""eventsourcing environment key: the role :class:`OwnerRoleFactory`'s connections act as."""
OWNER_ROLE_FACTORY = f"{__name__}:OwnerRoleFactory"
FENCED_FACTORY = f"{__name__}:FencedFactory"

ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class FencedRecorder(PostgresProcessRecorder):
    """eventsourcing's process recorder; with a :attr:`fence`, every write transaction
    (events with or without tracking, tracking alone) starts with it. It writes a unit of
    work's side rows (``side_tables.py``) in its events' transaction."""

    fence: Composed | None = None

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """eventsourcing's write transaction, statement by statement (module docstring)."""
        if self.datastore.enable_db_functions:  # one call of a database function: no pipeline
            ids: Sequence[int] | None = super().insert_events(stored_events, **kwargs)
            return ids
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

    def __init__(
        self,
        datastore: PostgresDatastore,
        *,
        events_table_name: str = "stored_events",
        tracking_table_name: str = "notification_tracking",
    ) -> None:
        super().__init__(
            datastore,
            events_table_name=events_table_name,
            tracking_table_name=tracking_table_name,
        )
        self.lock_table_statements = [
            SQL("SET LOCAL lock_timeout = '{0}s'").format(self.datastore.lock_timeout),
            SQL("CALL {0}.{1}({2})").format(
                Identifier(self.datastore.schema),
                Identifier(LOCK_PROCEDURE),
                Literal(self.events_table_name),
            ),
        ]


class OwnerRoleFactory(PostgresFactory):
    """eventsourcing's PostgreSQL factory; every connection acts as ``PB_POSTGRES_SET_ROLE``."""

    def __init__(self, env: Environment | EnvType | None) -> None:
        super().__init__(env)
        role = self.env.get(SET_ROLE) or ""
        if not ROLE_NAME.match(role):
            raise ValueError(f"{SET_ROLE} must name a role (lower case, digits, _), not {role!r}")
        kwargs = self.datastore.pool.kwargs
        assert isinstance(kwargs, dict)  # eventsourcing gives the pool a dict
        kwargs["options"] = f"-c role={role}"


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
