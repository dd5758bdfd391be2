"""The PostgreSQL side of "one writer per store": the lease's lock keys and the write fence.

A service instance writes its schema only while it holds the schema's writer lease
(``writer_lease.py``): a session advisory lock, ``(LOCK_CLASS, lease key)``, held by a
connection of its own. Holding it when a transaction starts is not enough: the lock
connection can die (a network cut, a terminated backend, a process paused past a timeout)
while the instance still has pooled connections and carries on. So every write transaction
of the store (the recorder, ``pg_store.py``) first runs :func:`fence_statement`:

1. it takes the schema's write key ``(LOCK_CLASS, write key)`` SHARED for the transaction;
2. it checks, in ``pg_locks``, that the lease is still granted to THIS instance's lock
   connection (its backend pid); if not, the transaction fails and writes nothing.

The next holder, right after it gets the lease and before it reads the store, takes the
write key EXCLUSIVE once (:func:`barrier_statements`): that waits for every write
transaction of the old holder that passed the check to end. Either the old holder's
transaction committed before the barrier (the new holder reads its effects) or it checked
after the lease moved (and failed): an instance that lost its lease commits nothing.
"""

from __future__ import annotations

import zlib

from psycopg.sql import SQL, Composed, Literal

LOCK_CLASS = 0x5042
"""First key of the project's advisory locks (two-key form: ``pg_locks.classid``)."""

FENCE_ENV = "PB_WRITER_FENCE"
"""eventsourcing environment key: the backend pid of the connection holding the lease."""


def _key(kind: str, schema: str) -> int:
    """A stable 31-bit key of ``schema`` (the second key, ``pg_locks.objid``)."""
    return zlib.crc32(f"punto-banco:{kind}:{schema}".encode()) & 0x7FFFFFFF


def lease_key(schema: str) -> int:
    """The second key of the schema's writer lease (held by the writer's lock connection)."""
    return _key("lease", schema)


def write_key(schema: str) -> int:
    """The second key every write transaction takes shared (the barrier takes it exclusive)."""
    return _key("write", schema)


def fence_statement(schema: str, pid: int) -> Composed:
    """The statement that opens every write transaction of the lease holder ``pid``."""
    return SQL(
        "DO $fence$ BEGIN "
        "PERFORM pg_catalog.pg_advisory_xact_lock_shared({cls}, {write}); "
        "IF NOT EXISTS (SELECT FROM pg_catalog.pg_locks WHERE locktype = 'advisory' "
        "AND granted AND mode = 'ExclusiveLock' AND classid = {cls} AND objid = {lease} "
        "AND objsubid = 2 AND pid = {pid} AND database = (SELECT oid FROM "
        "pg_catalog.pg_database WHERE datname = pg_catalog.current_database())) THEN "
        "RAISE EXCEPTION 'punto-banco: this instance no longer holds the writer lease of "
        "schema %: nothing is written', {schema}; "
        "END IF; END $fence$"
    ).format(
        cls=Literal(LOCK_CLASS),
        write=Literal(write_key(schema)),
        lease=Literal(lease_key(schema)),
        pid=Literal(int(pid)),
        schema=Literal(schema),
    )


def barrier_statements(schema: str) -> tuple[Composed, Composed]:
    """Take the write key exclusive (waits for the old holder's writes), then let it go."""
    args = {"cls": Literal(LOCK_CLASS), "write": Literal(write_key(schema))}
    return (
        SQL("SELECT pg_catalog.pg_advisory_lock({cls}, {write})").format(**args),
        SQL("SELECT pg_catalog.pg_advisory_unlock({cls}, {write})").format(**args),
    )
