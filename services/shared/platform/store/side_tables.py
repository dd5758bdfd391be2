"""Tables beside a service's events (derived state: settlement's bet ids, dealing's refused
commands), written in the same transaction as the events (:class:`SideRows` handed to the
recorder with the save), INSERT only: a second writer of a key fails its whole transaction.
:func:`select_rows` reads them by key; :func:`fill_from_history` gives the events of an older
store their rows, once, page by page.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast
from uuid import uuid4

from eventsourcing.persistence import (
    InterfaceError,
    Notification,
    ProcessRecorder,
    Recorder,
    StoredEvent,
    Tracking,
)
from eventsourcing.popo import POPOFactory
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteCursor,
    SQLiteDatastore,
    SQLiteFactory,
    SQLiteProcessRecorder,
)
from eventsourcing.utils import get_topic

log = logging.getLogger(__name__)

SIDE_ROWS = "side_rows"
"""The recorders' keyword: the :class:`SideRows` of a unit of work."""
CHUNK = 500
"""Keys per query (SQLite allows 32,766 parameters; PostgreSQL takes arrays)."""

Row = tuple[Any, ...]


@dataclass(frozen=True)
class SideTable:
    """A table beside the events: its columns (name, type: one DDL for SQLite and PostgreSQL),
    its primary key, and the leading key columns :func:`select_rows` looks rows up by."""

    name: str
    columns: tuple[tuple[str, str], ...]
    primary_key: tuple[str, ...]
    lookup: tuple[str, ...]

    @property
    def column_names(self) -> list[str]:
        return [column for column, _ in self.columns]

    def ddl(self, schema: str | None) -> str:
        """CREATE TABLE IF NOT EXISTS in ``schema`` (PostgreSQL), or without one (SQLite)."""
        columns = ", ".join(f"{name} {kind}" for name, kind in self.columns)
        key = ", ".join(self.primary_key)
        rowid = "" if schema else " WITHOUT ROWID"
        return (
            f"CREATE TABLE IF NOT EXISTS {self.qualified(schema)} ({columns}, "
            f"PRIMARY KEY ({key})){rowid}"
        )

    def qualified(self, schema: str | None) -> str:
        """The table's name in ``schema`` (quoted), or alone (SQLite: None)."""
        if schema is None:
            return self.name
        return '"' + schema.replace('"', '""') + '".' + self.name

    def insert(self) -> str:
        """SQLite's INSERT of one row."""
        marks = ",".join("?" * len(self.columns))
        return f"INSERT INTO {self.name} ({', '.join(self.column_names)}) VALUES ({marks})"

    def insert_many(self, schema: str) -> str:
        """PostgreSQL's INSERT of many rows in one statement, given as one JSON document
        (:meth:`postgres_rows`: psycopg's text arrays would quote every value in Python)."""
        columns = ", ".join(self.column_names)
        record = ", ".join(f"{name} {kind.split()[0]}" for name, kind in self.columns)
        return (
            f"INSERT INTO {self.qualified(schema)} ({columns}) "
            f"SELECT {columns} FROM json_to_recordset(%s::json) AS x({record})"
        )

    def postgres_rows(self, rows: Sequence[Row]) -> str:
        """The JSON document of :meth:`insert_many`."""
        names = self.column_names
        return json.dumps([dict(zip(names, row, strict=True)) for row in rows])


@dataclass(frozen=True)
class SideRows:
    """New rows of one side table, to insert with a unit of work's events."""

    table: SideTable
    rows: Sequence[Row]


def side_rows(kwargs: dict[str, Any]) -> Sequence[SideRows]:
    found: Sequence[SideRows] = kwargs.get(SIDE_ROWS) or ()
    return found


class SideSQLiteRecorder(SQLiteProcessRecorder):
    """eventsourcing's SQLite process recorder; writes a unit's side rows with its events."""

    def _insert_events(
        self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        for rows in side_rows(kwargs):
            c.executemany(rows.table.insert(), rows.rows)
        return super()._insert_events(c, stored_events, **kwargs)


STATEMENTS_CACHED = 128
"""Prepared statements an SQLite connection keeps (sqlite3's default)."""


class CachingSQLitePool(SQLiteConnectionPool):
    """eventsourcing's pool of SQLite connections, each keeping :data:`STATEMENTS_CACHED`
    prepared statements. eventsourcing's own connects with ``cached_statements=True``, which
    sqlite3 reads as a cache of one statement: each statement of a transaction was parsed again
    every time it ran (BENCHMARKS.md, "Counted instructions, and what they found")."""

    def _create_connection(self) -> SQLiteConnection:
        try:
            connection = sqlite3.connect(
                self.db_name,
                uri=True,
                check_same_thread=False,  # the pool's connections go from thread to thread
                isolation_level=None,  # eventsourcing's transactions say BEGIN themselves
                cached_statements=STATEMENTS_CACHED,
                timeout=self.lock_timeout or SQLITE3_DEFAULT_LOCK_TIMEOUT,
            )
        except (sqlite3.Error, TypeError) as error:
            raise InterfaceError(error) from error
        try:
            if not self.is_sqlite_memory_mode and not self.is_journal_mode_wal:
                connection.execute("PRAGMA journal_mode=WAL")  # as eventsourcing's
                self.is_journal_mode_wal = True
        except sqlite3.Error as error:
            connection.close()
            raise InterfaceError(error) from error
        connection.row_factory = sqlite3.Row
        return SQLiteConnection(sqlite_conn=connection, max_age=self.max_age)


def caching(datastore: SQLiteDatastore) -> SQLiteDatastore:
    """``datastore`` with a :class:`CachingSQLitePool` of the same settings, put in before its
    first connection (a recorder is being made)."""
    pool = datastore.pool
    if isinstance(pool, CachingSQLitePool):
        return datastore
    if pool.num_in_use or pool.num_in_pool:
        raise RuntimeError("an SQLite pool is replaced before its first connection only")
    datastore.pool = CachingSQLitePool(
        db_name=pool.db_name,
        lock_timeout=pool.lock_timeout,
        pool_size=pool.pool_size,
        max_overflow=pool.max_overflow,
        pool_timeout=pool.pool_timeout,
        max_age=pool.max_age,
        pre_ping=pool.pre_ping,
    )
    pool.close()
    return datastore


def process_recorder(factory: Any) -> ProcessRecorder:
    """``factory``'s process recorder (eventsourcing's SQLite, PostgreSQL or in-memory
    factory), as a subclass of the one it would construct that writes side rows, on SQLite with
    :func:`caching` connections. The in-memory factory's is SQLite's on a database of its own in
    memory (side tables need SQL)."""
    if isinstance(factory, POPOFactory):
        memory = SideSQLiteRecorder(
            caching(SQLiteDatastore(f"file:{uuid4()}?mode=memory&cache=shared"))
        )
        memory.create_table()
        return memory
    if isinstance(factory, SQLiteFactory):
        caching(factory.datastore)
    if not factory.env.get(factory.PROCESS_RECORDER_TOPIC):  # (one chosen writes side rows)
        current = get_topic(type(factory).process_recorder_class)
        if current in SIDE_RECORDERS:
            factory.env[factory.PROCESS_RECORDER_TOPIC] = SIDE_RECORDERS[current]
    recorder: ProcessRecorder = factory.process_recorder()
    return recorder


SIDE_RECORDERS = {
    "eventsourcing.sqlite:SQLiteProcessRecorder": f"{__name__}:SideSQLiteRecorder",
    "eventsourcing.postgres:PostgresProcessRecorder": f"{__package__}.postgres:FencedRecorder",
}
"""The topics of eventsourcing's process recorders -> those of their subclasses that write
side rows (what a factory of eventsourcing's builds, given ``PROCESS_RECORDER_TOPIC``)."""


def create_side_tables(factory: Any, recorder: Recorder, tables: Sequence[SideTable]) -> None:
    """Create ``tables`` in ``recorder``'s database (SQLite or PostgreSQL) if missing, when
    ``factory`` creates its tables (``CREATE_TABLE``; a provisioned store has them:
    ``db setup``)."""
    create = getattr(factory, "env_create_table", None)
    if create is not None and not create():
        return
    datastore = cast(Any, recorder).datastore  # SQLite's or PostgreSQL's
    schema = getattr(datastore, "schema", None)  # PostgreSQL's; SQLite has none
    with datastore.transaction(commit=True) as cursor:
        for table in tables:
            cursor.execute(table.ddl(schema))


def select_rows(recorder: Recorder, table: SideTable, keys: Sequence[Row]) -> list[Row]:
    """The rows of ``table`` whose :attr:`SideTable.lookup` columns equal one of ``keys``."""
    found: list[Row] = []
    for start in range(0, len(keys), CHUNK):
        found += _select(recorder, table, keys[start : start + CHUNK])
    return found


def fill_from_history(
    recorder: ProcessRecorder,
    done: str,
    progress: str,
    topics: Sequence[str],
    page: int,
    record: Callable[[Sequence[Notification]], None],
) -> int:
    """Give the events of ``topics`` recorded before a side table existed their rows, once;
    the notifications read (0 when done before)."""
    if recorder.max_tracking_id(done):
        return 0
    start = (recorder.max_tracking_id(progress) or 0) + 1
    read = 0
    while notifications := recorder.select_notifications(start, page, topics=list(topics)):
        record(notifications)
        read += len(notifications)
        start = notifications[-1].id + 1
        log.info("%s: rows of older events recorded up to notification %d", progress, start - 1)
    recorder.insert_tracking(Tracking(done, 1))
    return read


def _select(recorder: Recorder, table: SideTable, keys: Sequence[Row]) -> list[Row]:
    # The keys are joined to the table (a search of its primary key per key): written as
    # ``(a, b) IN (VALUES ...)``, SQLite would scan the whole table instead.
    columns = ", ".join(f"t.{column}" for column in table.column_names)
    match = " AND ".join(f"t.{column} = k.c{i}" for i, column in enumerate(table.lookup))
    names = [f"c{i}" for i in range(len(table.lookup))]
    if isinstance(recorder, SQLiteProcessRecorder):
        # As many keys as the next power of two, the rest NULL (equal to nothing): a few
        # statements, each parsed once (the connection's cache), whatever the batches' sizes.
        size = 1 << (len(keys) - 1).bit_length()
        values = ",".join(["(" + ",".join("?" * len(table.lookup)) + ")"] * size)
        statement = (
            f"WITH k({', '.join(names)}) AS (VALUES {values}) "
            f"SELECT {columns} FROM k JOIN {table.name} AS t ON {match}"
        )
        padding = [None] * (size - len(keys)) * len(table.lookup)
        with recorder.datastore.transaction(commit=False) as c:
            c.execute(statement, [value for key in keys for value in key] + padding)
            return [tuple(row) for row in c.fetchall()]
    datastore = cast(Any, recorder).datastore  # PostgreSQL's
    record = ", ".join(f"{name} text" for name in names)
    statement = (
        f"SELECT {columns} FROM json_to_recordset(%s::json) AS k({record}) "
        f"JOIN {table.qualified(datastore.schema)} AS t ON {match}"
    )
    document = json.dumps([dict(zip(names, key, strict=True)) for key in keys])
    with datastore.get_connection() as connection, connection.cursor() as cursor:
        cursor.execute(statement, (document,))
        return [tuple(row[name] for name in table.column_names) for row in cursor.fetchall()]


BET_IDS = SideTable(
    "bet_ids",
    (
        ("operator", "text NOT NULL"),
        ("bet_id", "text NOT NULL"),
        ("version", "integer NOT NULL"),
        ("bet", "text"),  # the content as a JSON list; NULL: the id is free again
        ("accepted", "boolean NOT NULL"),
        ("reason_code", "text"),
        ("message", "text NOT NULL"),
        ("held", "boolean NOT NULL"),
    ),
    ("operator", "bet_id", "version"),
    ("operator", "bet_id"),
)
"""Settlement's bet ids (``settlement.bet_index_store``): derived state, rebuildable from its
BetsAnswered / BetRejected / BetsHeld events; a row per answer given to an (operator, bet
id), the highest version saying what holds."""

REFUSED_COMMANDS = SideTable(
    "refused_commands",
    (("table_id", "text NOT NULL"), ("command_id", "text NOT NULL")),
    ("table_id", "command_id"),
    ("table_id", "command_id"),
)
"""Dealing's refused table commands (``dealing.rejections``): a row per command id refused for
a table id, derived state rebuildable from its CommandRejected events."""
