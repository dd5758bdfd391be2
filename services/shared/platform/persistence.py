"""Make a service's store ready and open its Application on it.

The Application itself only sees the eventsourcing environment produced by
:meth:`Settings.eventsourcing_env`; this module does the little preparation a
backend needs first (the data folder for SQLite, the schema for PostgreSQL).

SQLite stores are private to their owner: a data folder made here is created 0700 (an
existing one keeps its mode: it may hold the local servers' folders too) and the database
file 0600 before SQLite opens it (SQLite gives its -wal and -shm files the database file's
mode), whatever the umask.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from services.shared.platform.application import ServiceApplication
from services.shared.platform.settings import Settings

TApp = TypeVar("TApp", bound=ServiceApplication)


def prepare_store(settings: Settings) -> None:
    """Create the SQLite data folder or the service's PostgreSQL schema if missing."""
    if settings.persistence == "postgres":
        import psycopg
        from psycopg import sql

        pg = settings.postgres
        with psycopg.connect(
            host=pg.host,
            port=pg.port,
            dbname=pg.dbname,
            user=pg.user,
            password=pg.password,
            autocommit=True,
            connect_timeout=10,
        ) as conn:
            conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                    sql.Identifier(settings.postgres_schema)
                )
            )
    else:
        private_sqlite_file(settings.sqlite_path)


def private_sqlite_file(path: Path) -> None:
    """Create ``path``'s folder (0700) and the empty database file (0600) if missing; make an
    existing database (and its -wal and -shm files) owner-only."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if file.exists() and file.stat().st_mode & 0o077:
            file.chmod(0o600)


def open_application(factory: Callable[[dict[str, str]], TApp], settings: Settings) -> TApp:
    """Prepare the store and construct the Application with the settings' environment."""
    prepare_store(settings)
    return factory(settings.eventsourcing_env())
