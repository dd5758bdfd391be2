"""The PostgreSQL side of "one writer per store": the lease's tables and the write fence.

A service instance writes its schema only while it holds the schema's writer lease
(``writer_lease.py``): the table :data:`LEASE_TABLE` of the schema locked ``EXCLUSIVE`` (a
partitioned process: ``SHARE``, shared with the other partitioned processes) in a transaction
its lock connection keeps open. A table lock and not an advisory lock: any login may take any
advisory key (the read-only auditor too, and every key here was predictable), while PostgreSQL
grants these lock modes only to a role holding UPDATE, DELETE, TRUNCATE (or, from 17,
MAINTAIN) on the table, which ``punto-banco db setup`` gives the service's own role alone
(``pg_roles.py``); the auditor's SELECT allows ACCESS SHARE, which conflicts with neither. The
lock takes no transaction id and, in READ COMMITTED, holds no snapshot, so the open transaction
holds back no vacuum; both tables are partitioned tables without partitions, without storage,
so there is nothing of theirs to vacuum or freeze either.

Holding the lease when a transaction starts is not enough: the lock connection can die (a
network cut, a terminated backend, a timeout) while the instance still has pooled connections
and carries on. So every write transaction of the store (the recorder, ``pg_store.py``) first
runs :func:`fence_statement`:

1. it locks the schema's :data:`FENCE_TABLE` in ROW SHARE mode for the transaction;
2. it checks, in ``pg_locks``, that the lease table is still locked EXCLUSIVE by THIS
   instance's lock connection (its backend pid); if not, the transaction fails and writes
   nothing.

The next holder, right after it gets the lease and before it reads the store, locks the fence
table EXCLUSIVE once (:func:`barrier_statements`, in a savepoint rolled back at once): that waits
for every write transaction of the old holder that passed the check to end. Either the old
holder's transaction committed before the barrier (the new holder reads its effects) or it
checked after the lease moved (and failed): an instance that lost its lease commits nothing.
"""

from __future__ import annotations

import zlib

from psycopg.sql import SQL, Composed, Identifier, Literal

LEASE_TABLE = "pb_writer_lease"
"""The table whose lock is the writer lease (never written: a lock target)."""
FENCE_TABLE = "pb_writer_fence"
"""The table every write transaction locks ROW SHARE (the next holder's barrier: EXCLUSIVE)."""
LEASE_TABLES = (LEASE_TABLE, FENCE_TABLE)

FENCE_ENV = "PB_WRITER_FENCE"
"""eventsourcing environment key: the backend pid of the connection holding the lease."""

LOCK_CLASS = 0x5042
"""The first key of the advisory lock that was the lease before version 2 of the lease (the
two-key form, ``pg_locks.classid``): an instance of the earlier version still writing is
waited for (``writer_lease.py``), never taken as a lease."""


def legacy_lease_key(schema: str) -> int:
    """The second key of the schema's lease before version 2 (``pg_locks.objid``)."""
    return zlib.crc32(f"punto-banco:lease:{schema}".encode()) & 0x7FFFFFFF


def lease_tables_statements(schema: str) -> list[Composed]:
    """Create the lease's two tables in ``schema`` if missing (as its owner: ``db setup``, or
    a service that creates its own tables)."""
    return [
        SQL("CREATE TABLE IF NOT EXISTS {} (held boolean) PARTITION BY LIST (held)").format(
            Identifier(schema, table)
        )
        for table in LEASE_TABLES
    ]


def lease_statement(schema: str, shared: bool) -> Composed:
    """Take the lease (in the lock connection's open transaction), or fail at once."""
    return SQL("LOCK TABLE {} IN {} MODE NOWAIT").format(
        Identifier(schema, LEASE_TABLE), SQL("SHARE" if shared else "EXCLUSIVE")
    )


def _lease_oid(schema: str) -> Composed:
    return SQL(
        "(SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = {} AND c.relname = {})"
    ).format(Literal(schema), Literal(LEASE_TABLE))


def lease_holders(schema: str) -> Composed:
    """Who holds the schema's lease: (client address, backend pid, application name)."""
    return SQL(
        "SELECT a.client_addr::text, l.pid, a.application_name FROM pg_catalog.pg_locks l "
        "LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'relation' AND l.granted AND l.relation = {} "
        "AND l.mode IN ('ExclusiveLock', 'ShareLock') AND l.database = (SELECT oid FROM "
        "pg_catalog.pg_database WHERE datname = pg_catalog.current_database()) ORDER BY l.pid"
    ).format(_lease_oid(schema))


def fence_statement(schema: str, pid: int) -> Composed:
    """The statement that opens every write transaction of the lease holder ``pid``."""
    return SQL(
        "DO $fence$ BEGIN "
        "LOCK TABLE {fence} IN ROW SHARE MODE; "
        "IF NOT EXISTS (SELECT FROM pg_catalog.pg_locks WHERE locktype = 'relation' "
        "AND granted AND mode = 'ExclusiveLock' AND relation = {lease} AND pid = {pid} "
        "AND database = (SELECT oid FROM pg_catalog.pg_database "
        "WHERE datname = pg_catalog.current_database())) THEN "
        "RAISE EXCEPTION 'punto-banco: this instance no longer holds the writer lease of "
        "schema %: nothing is written', {schema}; "
        "END IF; END $fence$"
    ).format(
        fence=Identifier(schema, FENCE_TABLE),
        lease=_lease_oid(schema),
        pid=Literal(int(pid)),
        schema=Literal(schema),
    )


def barrier_statements(schema: str) -> tuple[SQL | Composed, ...]:
    """Lock the fence table exclusive (waits for the old holder's writes), then let it go:
    the savepoint's rollback releases the lock, the lease's lock stays."""
    return (
        SQL("SAVEPOINT pb_barrier"),
        SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(Identifier(schema, FENCE_TABLE)),
        SQL("ROLLBACK TO SAVEPOINT pb_barrier"),
        SQL("RELEASE SAVEPOINT pb_barrier"),
    )
