"""Read a service's notification log straight from its store (never from Kafka).

The rows are read as stored - notification id, originator id, version, topic
and the state bytes - with plain ``sqlite3`` or ``psycopg``: the auditor needs
neither the services' code nor eventsourcing to read them. Where the stores are
comes from the same settings the services use (``services.shared.platform.settings``):
``<data dir>/<service>.sqlite``, or the PostgreSQL table ``<schema>.<service>_events``
with schema ``<PB_POSTGRES_SCHEMA_PREFIX><service>`` (a partition's store, ``partitions.py``:
``<service>-p<N>.sqlite``, schema ``..._p<N>``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from services.shared.platform.settings import Settings

SERVICES = ("shoe", "dealing", "settlement")
BATCH = 5000
MMAP_BYTES = 0
"""SQLite memory-maps this much of a store (its mapped pages count in the process's resident
memory: a store of any length is read through the page cache instead)."""


class Row(NamedTuple):
    """One stored event: ``originator_id`` as its 16 UUID bytes, ``state`` as stored."""

    notification_id: int
    originator_id: bytes
    originator_version: int
    topic: str
    state: bytes


class StoreMissing(FileNotFoundError):
    """A service's store does not exist (the message says where it was looked for)."""


class StoreReader(Protocol):
    service: str
    description: str

    def count(self) -> int: ...

    def rows(self, after: int = 0) -> Iterator[list[Row]]: ...

    def rows_of(self, originator_id: bytes, before: int) -> Iterator[Row]:
        """One aggregate's rows with a notification id below ``before``, in order (the
        streaming audit reads a checked coup again when a late event concerns it)."""
        ...

    def row_at(self, originator_id: bytes, version: int | None) -> Row | None:
        """One aggregate's row of ``version`` (None: its last), if stored (an audit reads
        the seal it stops at, and a resumed one the seal it starts from)."""
        ...

    def close(self) -> None: ...


class SqliteStore:
    """``<data dir>/<service>.sqlite``, opened read-only."""

    def __init__(self, service: str, path: Path) -> None:
        if not path.is_file():
            raise StoreMissing(
                f"no {service} store at {path}: give the --data-dir the services used "
                "(PB_DATA_DIR, default ./var), or --postgres"
            )
        self.service = service
        self.path = path
        self.description = f"sqlite {path}"
        self._connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self._connection.execute(f"PRAGMA mmap_size={MMAP_BYTES}")

    def count(self) -> int:
        if not self._has_table():
            return 0
        found = self._connection.execute("SELECT COUNT(*) FROM stored_events").fetchone()
        return int(found[0])

    def _has_table(self) -> bool:
        found = self._connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='stored_events'"
        ).fetchone()
        return found is not None

    def rows(self, after: int = 0) -> Iterator[list[Row]]:
        """All rows in notification order (those after notification id ``after``)."""
        if not self._has_table():
            return
        cursor = self._connection.execute(
            "SELECT rowid, originator_id, originator_version, topic, state "
            "FROM stored_events WHERE rowid > ? ORDER BY rowid",
            (after,),
        )
        fromhex = bytes.fromhex
        while True:
            batch = cursor.fetchmany(BATCH)
            if not batch:
                return
            # Plain tuples in Row's field order (a NamedTuple per row costs more than it gives).
            yield [
                (nid, fromhex(oid), v, topic, state)  # type: ignore[misc]
                if type(oid) is str and type(state) is bytes
                else Row(nid, _oid_bytes(oid), v, topic, _as_bytes(state))
                for nid, oid, v, topic, state in batch
            ]

    def rows_of(self, originator_id: bytes, before: int) -> Iterator[Row]:
        if not self._has_table():
            return
        cursor = self._connection.execute(
            "SELECT rowid, originator_id, originator_version, topic, state FROM stored_events "
            "WHERE originator_id = ? AND rowid < ? ORDER BY rowid",
            (originator_id.hex(), before),
        )
        for nid, oid, v, topic, state in cursor:
            yield Row(nid, _oid_bytes(oid), v, topic, _as_bytes(state))

    def row_at(self, originator_id: bytes, version: int | None) -> Row | None:
        if not self._has_table():
            return None
        found = self._connection.execute(
            "SELECT rowid, originator_id, originator_version, topic, state FROM stored_events "
            "WHERE originator_id = ? AND (? OR originator_version = ?) "
            "ORDER BY originator_version DESC LIMIT 1",
            (originator_id.hex(), version is None, version or 0),
        ).fetchone()
        if found is None:
            return None
        nid, oid, v, topic, state = found
        return Row(nid, _oid_bytes(oid), v, topic, _as_bytes(state))

    def close(self) -> None:
        self._connection.close()


def scan_rows_of(store: StoreReader, originator_id: bytes, before: int) -> Iterator[Row]:
    """``rows_of`` by reading the whole log (stores without an index to ask: lists, archives)."""
    for batch in store.rows():
        for row in batch:
            if row[0] >= before:  # rows may be plain tuples in Row's order
                return
            if row[1] == originator_id:
                yield row


def scan_row_at(store: StoreReader, originator_id: bytes, version: int | None) -> Row | None:
    """``row_at`` by reading the whole log: the aggregate's row at ``version`` (None: its last)."""
    found = [
        row
        for batch in store.rows()
        for row in batch
        if row[1] == originator_id and version in (None, row[2])
    ]
    return max(found, key=lambda row: row[2]) if found else None


def _as_bytes(value: object) -> bytes:
    """A state that is not a BLOB (someone wrote TEXT into the column): its bytes."""
    if isinstance(value, bytes):
        return value
    return value.encode() if isinstance(value, str) else str(value).encode()


def _oid_bytes(value: object) -> bytes:
    if isinstance(value, str):
        try:
            return bytes.fromhex(value)
        except ValueError:
            return value.encode()
    return bytes(value) if isinstance(value, bytes | bytearray) else str(value).encode()


class PostgresStore:
    """The service's events table in its own schema."""

    def __init__(self, settings: Settings) -> None:
        import psycopg
        from psycopg import sql

        self.service = settings.service
        self.settings = settings
        self.schema = settings.postgres_schema
        self.table = f"{settings.service}_events"
        self.description = settings.describe_store()
        self._connection = psycopg.connect(**settings.postgres.connect_options())
        self._connection.read_only = True
        self._name = sql.Identifier(self.schema, self.table)
        self._sql = sql
        exists = self._connection.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema=%s AND table_name=%s",
            (self.schema, self.table),
        ).fetchone()
        if exists is None:
            self._connection.close()
            raise StoreMissing(
                f"no {self.service} store in PostgreSQL: table {self.schema}.{self.table} "
                f"not found ({self.description}); check POSTGRES_* / PB_POSTGRES_SCHEMA_PREFIX"
            )

    def count(self) -> int:
        query = self._sql.SQL("SELECT COUNT(*) FROM {}").format(self._name)
        found = self._connection.execute(query).fetchone()
        return int(found[0]) if found else 0

    def rows(self, after: int = 0) -> Iterator[list[Row]]:
        """As :meth:`SqliteStore.rows` (in one transaction: :meth:`rows_of` reads in it)."""
        query = self._sql.SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state "
            "FROM {} WHERE notification_id > %s ORDER BY notification_id"
        ).format(self._name)
        with (
            self._connection.transaction(),
            self._connection.cursor(name=f"pb_audit_{self.service}", binary=True) as cursor,
        ):
            cursor.itersize = BATCH
            cursor.execute(query, (after,))
            while True:
                batch: list[Any] = cursor.fetchmany(BATCH)
                if not batch:
                    return
                yield [
                    Row(nid, oid.bytes, v, topic, bytes(state))
                    for nid, oid, v, topic, state in batch
                ]

    def rows_of(self, originator_id: bytes, before: int) -> Iterator[Row]:
        """As :meth:`SqliteStore.rows_of` (in the transaction :meth:`rows` reads in)."""
        from uuid import UUID

        query = self._sql.SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state FROM {} "
            "WHERE originator_id = %s AND notification_id < %s ORDER BY notification_id"
        ).format(self._name)
        found = self._connection.execute(query, (UUID(bytes=originator_id), before)).fetchall()
        for nid, oid, v, topic, state in found:
            yield Row(nid, oid.bytes, v, topic, bytes(state))

    def row_at(self, originator_id: bytes, version: int | None) -> Row | None:
        from uuid import UUID

        query = self._sql.SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state FROM {} "
            "WHERE originator_id = %s AND (%s OR originator_version = %s) "
            "ORDER BY originator_version DESC LIMIT 1"
        ).format(self._name)
        found = self._connection.execute(
            query, (UUID(bytes=originator_id), version is None, version or 0)
        ).fetchone()
        if found is None:
            return None
        nid, oid, v, topic, state = found
        return Row(nid, oid.bytes, v, topic, bytes(state))

    def close(self) -> None:
        self._connection.close()


def open_stores(settings: Settings, services: Iterable[str] = SERVICES) -> dict[str, StoreReader]:
    """The three services' stores (or ``services``') as ``settings`` place them (SQLite or
    PostgreSQL; a partition's with ``settings.for_partition(n)``)."""
    stores: dict[str, StoreReader] = {}
    try:
        for service in services:
            own = settings.for_service(service)
            if own.persistence == "postgres":
                stores[service] = PostgresStore(own)
            else:
                stores[service] = SqliteStore(service, own.sqlite_path)
    except BaseException:
        for store in stores.values():
            store.close()
        raise
    return stores
