"""One writer per store: the writer lease, and the fence of every PostgreSQL write transaction.

SQLite: an exclusive ``flock`` on ``<store>.writer`` (the kernel lets it go however the
holder ends). PostgreSQL: the schema's lease table locked in a transaction a connection of its
own keeps open (a table lock, which only the service's own role may take, unlike an advisory
lock), and every write transaction of the store opened by the fence (:func:`fence_statement`),
which fails unless the lock connection still holds it: an instance that lost its lease commits
nothing. A second instance waits as a standby; a partitioned process takes the unpartitioned
store's lease shared, so that one mode runs at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import socket
import zlib
from pathlib import Path
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.sql import SQL, Composed, Identifier, Literal

from services.shared.platform.settings import Settings

LEASE_TABLE = "pb_writer_lease"
"""The table whose lock is the writer lease (never written: a lock target)."""
FENCE_TABLE = "pb_writer_fence"
"""The table every write transaction locks ROW SHARE (the next holder's barrier: EXCLUSIVE)."""
LEASE_TABLES = (LEASE_TABLE, FENCE_TABLE)

FENCE_ENV = "PB_WRITER_FENCE"
"""eventsourcing environment key: the backend pid of the connection holding the lease."""

LOCK_CLASS = 0x5042
"""The first key (``pg_locks.classid``) of the advisory lock that is the lease of an instance of
version 1 of the lease: one still writing is waited for, never taken as a lease."""


def legacy_lease_key(schema: str) -> int:
    """The second key (``pg_locks.objid``) of the schema's lease in version 1."""
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


def _lease_oid(schema: str) -> Composed:
    return SQL(
        "(SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = {} AND c.relname = {})"
    ).format(Literal(schema), Literal(LEASE_TABLE))


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


log = logging.getLogger(__name__)

SETUP = (
    "provision the store with `punto-banco db setup` (as an administrator; again after an "
    "upgrade), and give the service its own role"
)

POLL_SECONDS = 1.0
"""How often a standby tries the lease, and the holder checks it still has it."""
LEASE_KEEPALIVES = {
    "tcp_keepalives_idle": 10,
    "tcp_keepalives_interval": 5,
    "tcp_keepalives_count": 3,
}
"""The lease connection's server-side TCP keepalives (seconds, probes): a lost holder's lock
is released about 25 s after its machine went silent."""
LEASE_TIMEOUTS_OFF = ("idle_in_transaction_session_timeout", "transaction_timeout")
"""Timeouts that would end the lease's open transaction, off for its session (a server or role
default of a few seconds would take the lease from a holder whose host stalls; one that fires
anyway ends the session: the lease is lost and noticed like a lost connection).
``transaction_timeout`` exists from PostgreSQL 17."""
PROBE_TIMEOUT_SECONDS = 15.0
"""How long the holder's check of its lock connection may take before the lease counts as
lost. Longer than an event-loop stall on a starved host (a slow answer is not a lost lock),
shorter than the ~25 s after which the server lets a silent holder's lock go; the fence
refuses a zombie's writes whatever this says."""


class LeaseLost(RuntimeError):
    """The holder's lease is gone: it must stop writing (the fence already refuses)."""


class StoppedAsStandby(RuntimeError):
    """The service was told to stop while it waited for the lease: it never wrote."""


class WriterLease:
    """The writer lease of one service's store (see the module docstring)."""

    def __init__(self, store: str, shared: bool = False) -> None:
        self.store = store  # what the operator reads: the store described
        self.shared = shared  # partitioned processes: the store's lease, shared (module doc)
        self.held = False
        self.holder: str | None = None  # who holds it, as far as a standby knows

    async def acquire(self, stopping: asyncio.Event, poll: float = POLL_SECONDS) -> bool:
        """Wait until this instance holds the lease (True) or ``stopping`` is set (False)."""
        announced = False
        while not stopping.is_set():
            if await self._try():
                self.held = True
                if self.shared:
                    log.info("lease of %s shared: no unpartitioned instance can write", self.store)
                else:
                    log.info("writer lease of %s taken: this instance writes it", self.store)
                return True
            if not announced:
                log.warning(
                    "standby: %s writes %s (%s); waiting for its lease",
                    "an unpartitioned instance" if self.shared else "another instance",
                    self.store,
                    self.holder or "holder unknown",
                )
                announced = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), poll)
        return False

    def fence_env(self) -> dict[str, str]:
        """What the store's recorder needs to fence its writes (nothing for SQLite)."""
        return {}

    def standby_reason(self) -> str | None:
        """None while held; else why this instance does not write (for ``/ready``)."""
        if self.held:
            return None
        return f"standby: {self.store} is written by another instance ({self.holder or '?'})"

    async def watch(self, stopping: asyncio.Event, poll: float = POLL_SECONDS) -> None:
        """Until ``stopping``: raise :class:`LeaseLost` if the lease is gone."""
        await stopping.wait()

    async def release(self) -> None:
        self.held = False

    async def _try(self) -> bool:
        raise NotImplementedError


class FileLease(WriterLease):
    """The lease of a SQLite store: an exclusive ``flock`` on ``<store>.writer``."""

    def __init__(self, database: Path, shared: bool = False) -> None:
        super().__init__(f"sqlite {database}", shared)
        self.path = database.with_name(database.name + ".writer")
        self._fd: int | None = None

    async def _try(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            self.holder = None
            with contextlib.suppress(OSError):
                self.holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or None
            os.close(fd)
            return False
        # The file names who holds the lock, for a blocked instance to say whom it waits for:
        # the writer, or (shared) the partitioned process that took it last.
        me = f"pid {os.getpid()} on {socket.gethostname()}"
        if self.shared:
            me = f"partitioned processes, the last to join {me}"
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{me}\n".encode(), 0)
        self._fd = fd
        return True

    async def release(self) -> None:
        await super().release()
        fd, self._fd = self._fd, None
        if fd is not None:
            if not self.shared:  # (other partitioned processes may still hold a shared lock)
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
            os.close(fd)  # closing the file lets the lock go


class PostgresLease(WriterLease):
    """The lease of a PostgreSQL schema: its lease table locked in a transaction that a
    connection of its own keeps open (see the module docstring)."""

    def __init__(self, settings: Settings, shared: bool = False) -> None:
        super().__init__(settings.describe_store(), shared)
        self.settings = settings
        self.schema = settings.postgres_schema
        self._connection: psycopg.AsyncConnection[Any] | None = None
        self.pid: int | None = None  # the lock connection's backend pid, once held

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        if self._connection is None or self._connection.closed:
            connection = await psycopg.AsyncConnection.connect(
                **self.settings.postgres.connect_options(),
                autocommit=True,
                application_name=f"pb-{self.settings.service}-lease",
            )
            # A holder whose machine is lost (no FIN, no RST) keeps the lock until the server
            # drops its session: probe it from the server side within about half a minute,
            # not the OS's two hours (statements, so a pooler in session mode passes them).
            for name, value in LEASE_KEEPALIVES.items():
                await connection.execute(f"SET {name} = {value}")
            for name in LEASE_TIMEOUTS_OFF[: 1 if connection.info.server_version < 170000 else 2]:
                await connection.execute(f"SET {name} = 0")
            self._connection = connection
        return self._connection

    async def _try(self) -> bool:
        try:
            connection = await self._connect()
            if self.settings.postgres_create_tables:  # the service makes its own tables
                await self._create_tables(connection)
            await connection.execute("BEGIN ISOLATION LEVEL READ COMMITTED")  # no snapshot kept
            try:
                mode = "SHARE" if self.shared else "EXCLUSIVE"  # NOWAIT: fail at once
                await connection.execute(
                    SQL("LOCK TABLE {} IN {} MODE NOWAIT").format(
                        Identifier(self.schema, LEASE_TABLE), SQL(mode)
                    )
                )
                waiting_for = await self._legacy_holder(connection)
            except psycopg.errors.LockNotAvailable:
                waiting_for = ""  # (named below, once the failed transaction is over)
            except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
                waiting_for = f"no lease table in schema {self.schema}: {SETUP}"
            except psycopg.errors.InsufficientPrivilege:
                waiting_for = f"role {self.settings.postgres.user} may not take it: {SETUP}"
            if waiting_for is not None:
                await connection.execute("ROLLBACK")
                self.holder = waiting_for or await self._holder(connection)
                return False
            if not self.shared:
                # A writer waits for the old holder's last writes: it locks the fence table
                # exclusive, then lets it go (the savepoint's rollback; the lease's lock stays).
                await connection.execute("SAVEPOINT pb_barrier")
                await connection.execute(
                    SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(
                        Identifier(self.schema, FENCE_TABLE)
                    )
                )
                await connection.execute("ROLLBACK TO SAVEPOINT pb_barrier")
                await connection.execute("RELEASE SAVEPOINT pb_barrier")
            self.pid = connection.info.backend_pid
            return True
        except psycopg.Error as error:
            self.holder = f"PostgreSQL not answering: {error}"
            await self._close()
            return False

    async def _create_tables(self, connection: psycopg.AsyncConnection[Any]) -> None:
        """The schema and the lease's tables, if missing (another instance may be making them
        at the same moment: what it made is what this one wanted)."""
        cursor = await connection.execute(
            "SELECT n.nspname IS NOT NULL, count(c.oid) FROM (SELECT) one "
            "LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = %s "
            "LEFT JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = ANY(%s) "
            "GROUP BY n.nspname",
            (self.schema, list(LEASE_TABLES)),
        )
        row = await cursor.fetchone()
        schema_found, tables_found = row if row else (False, 0)
        statements: list[Composed] = (
            []
            if schema_found
            else [SQL("CREATE SCHEMA IF NOT EXISTS {}").format(Identifier(self.schema))]
        )
        if tables_found < len(LEASE_TABLES):
            statements += lease_tables_statements(self.schema)
        for statement in statements:
            with contextlib.suppress(psycopg.errors.UniqueViolation):
                await connection.execute(statement)

    async def _holder(self, connection: psycopg.AsyncConnection[Any]) -> str | None:
        cursor = await connection.execute(
            SQL(
                "SELECT a.client_addr::text, l.pid, a.application_name FROM pg_catalog.pg_locks l "
                "LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'relation' AND l.granted AND l.relation = {} "
                "AND l.mode IN ('ExclusiveLock', 'ShareLock') AND l.database = (SELECT oid FROM "
                "pg_catalog.pg_database WHERE datname = pg_catalog.current_database()) "
                "ORDER BY l.pid"
            ).format(_lease_oid(self.schema))
        )
        row = await cursor.fetchone()
        if row is None:
            return None
        address, pid, name = row
        return f"backend pid {pid} ({name or 'unnamed'}) from {address or 'local socket'}"

    async def _legacy_holder(self, connection: psycopg.AsyncConnection[Any]) -> str | None:
        """An instance of the version before (its lease an advisory lock) logged in as this
        role, that this lease excludes: it still writes, so this one waits. Nobody else's
        advisory lock counts (anyone may take any advisory key)."""
        cursor = await connection.execute(
            "SELECT l.pid FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a "
            "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s "
            "AND l.objid = %s AND l.objsubid = 2 AND a.usename = current_user "
            "AND (%s OR l.mode = 'ExclusiveLock') LIMIT 1",
            (LOCK_CLASS, legacy_lease_key(self.schema), not self.shared),
        )
        row = await cursor.fetchone()
        return None if row is None else f"backend pid {row[0]}, of the version before"

    def fence_env(self) -> dict[str, str]:
        if self.pid is None:
            raise LeaseLost(f"the writer lease of {self.store} is not held")
        return {FENCE_ENV: str(self.pid)}

    async def watch(self, stopping: asyncio.Event, poll: float = POLL_SECONDS) -> None:
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), poll)
            if stopping.is_set():
                return
            try:
                connection = self._connection
                if connection is None or connection.closed:
                    raise LeaseLost("its lock connection is closed")
                await asyncio.wait_for(connection.execute("SELECT 1"), PROBE_TIMEOUT_SECONDS)
                # Holding the lease, the lock connection idles in its open transaction.
                if connection.info.transaction_status != TransactionStatus.INTRANS:
                    raise LeaseLost("its transaction ended")
            except (psycopg.Error, TimeoutError, LeaseLost) as error:
                self.held = False
                raise LeaseLost(
                    f"the writer lease of {self.store} was lost ({error!r}): this instance "
                    "writes nothing more (the fence refuses) and stops"
                ) from None

    async def release(self) -> None:
        await super().release()
        connection = self._connection
        if connection is not None and not connection.closed:
            # End the transaction before closing: a closed socket ends the session on the server
            # a moment later, and the next holder (a successor in a graceful hand-over) would
            # see the lock still held and wait a poll. Ended, it is free once this returns.
            with contextlib.suppress(psycopg.Error, TimeoutError):
                await asyncio.wait_for(connection.execute("ROLLBACK"), 5)
        await self._close()  # the session ends: PostgreSQL lets any lock left go

    async def _close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()


def writer_lease(settings: Settings, shared: bool = False) -> WriterLease:
    """The writer lease of the service's store; ``shared``: a partitioned process's share of
    its unpartitioned store's lease (see the module docstring)."""
    if settings.persistence == "postgres":
        return PostgresLease(settings, shared)
    return FileLease(Path(settings.sqlite_path), shared)
