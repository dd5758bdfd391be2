"""The latest stored event of many aggregates, in one query per chunk of ids.

eventsourcing's recorders read one originator at a time; an Application that looks up many
small aggregates at once (settlement's bet-id records, a batch of a thousand bets) reads the
latest row of each here instead: one ``IN`` / ``= ANY`` query per :data:`CHUNK` ids on SQLite
and PostgreSQL, one ``select_events`` per id on any other recorder (the in-memory one).
Reads only: nothing here writes, so the writer's fence (``pg_store``) is not involved.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import AggregateRecorder, StoredEvent
from eventsourcing.sqlite import SQLiteAggregateRecorder

CHUNK = 500
"""Ids per query (SQLite allows 32,766 parameters; PostgreSQL takes one array)."""


def latest_events(recorder: AggregateRecorder, ids: Sequence[UUID]) -> dict[UUID, StoredEvent]:
    """Each id's stored event of the highest version (ids without any are left out)."""
    found: dict[UUID, StoredEvent] = {}
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        for stored in _read(recorder, chunk):
            held = found.get(stored.originator_id)  # type: ignore[arg-type]
            if held is None or held.originator_version < stored.originator_version:
                found[stored.originator_id] = stored  # type: ignore[index]
    return found


def _read(recorder: AggregateRecorder, ids: Sequence[UUID]) -> list[StoredEvent]:
    if isinstance(recorder, SQLiteAggregateRecorder):
        return _sqlite(recorder, ids)
    postgres = sys.modules.get("eventsourcing.postgres")  # loaded if the recorder is one
    if postgres is not None and isinstance(recorder, postgres.PostgresAggregateRecorder):
        return _postgres(recorder, ids)
    rows: list[StoredEvent] = []
    for originator_id in ids:
        rows += recorder.select_events(originator_id, desc=True, limit=1)
    return rows


def _sqlite(recorder: SQLiteAggregateRecorder, ids: Sequence[UUID]) -> list[StoredEvent]:
    marks = ",".join("?" * len(ids))
    statement = (
        "SELECT originator_id, originator_version, topic, state "
        f"FROM {recorder.events_table_name} WHERE originator_id IN ({marks})"
    )
    with recorder.datastore.transaction(commit=False) as cursor:
        cursor.execute(statement, [originator_id.hex for originator_id in ids])
        return [
            StoredEvent(
                originator_id=UUID(row["originator_id"]),
                originator_version=row["originator_version"],
                topic=row["topic"],
                state=row["state"],
            )
            for row in cursor.fetchall()
        ]


def _postgres(recorder: Any, ids: Sequence[UUID]) -> list[StoredEvent]:
    from psycopg.sql import SQL, Identifier

    datastore = recorder.datastore
    statement = SQL(
        "SELECT DISTINCT ON (originator_id) originator_id, originator_version, topic, state "
        "FROM {schema}.{table} WHERE originator_id = ANY(%s) "
        "ORDER BY originator_id, originator_version DESC"
    ).format(schema=Identifier(datastore.schema), table=Identifier(recorder.events_table_name))
    params = list(ids) if datastore.originator_id_type == "uuid" else [str(i) for i in ids]
    with datastore.get_connection() as connection, connection.cursor() as cursor:
        cursor.execute(statement, (params,))
        return [
            StoredEvent(
                originator_id=row["originator_id"]
                if isinstance(row["originator_id"], UUID)
                else UUID(row["originator_id"]),
                originator_version=row["originator_version"],
                topic=row["topic"],
                state=bytes(row["state"]),
            )
            for row in cursor.fetchall()
        ]
