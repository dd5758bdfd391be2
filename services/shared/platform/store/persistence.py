"""Make a service's store ready and open its Application on it.

The Application itself only sees the eventsourcing environment produced by
:meth:`Settings.eventsourcing_env`; this module does the little preparation a
backend needs first (the data folder for SQLite, the schema for PostgreSQL).

A PostgreSQL schema is created only when it is missing, and only when the service makes its
own tables (``PB_POSTGRES_CREATE_TABLES``, default yes: a login that may not create them is
told to set it to no, never given more rights). A store provisioned by
``punto-banco db setup`` (``pg_roles.py``) is only checked: the service's role may use the
schema and the owner's write-lock procedure is there; otherwise :class:`StoreNotReady` says
what to run.

SQLite stores are private to their owner: a data folder made here is created 0700 (an
existing one keeps its mode: it may hold the local servers' folders too) and the database
file 0600 before SQLite opens it (SQLite gives its -wal and -shm files the database file's
mode), whatever the umask.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from services.shared.platform.settings import Settings
from services.shared.platform.store.application import ServiceApplication

TApp = TypeVar("TApp", bound=ServiceApplication)

LOCK_PROCEDURE = "pb_lock_events"  # pg_store.LOCK_PROCEDURE (not imported: no driver here)


class StoreNotReady(RuntimeError):
    """The service's PostgreSQL store is missing or not usable by its role (says what to do)."""


def prepare_store(settings: Settings) -> None:
    """Create the SQLite data folder or the service's PostgreSQL schema if missing; check a
    provisioned store (``PB_POSTGRES_CREATE_TABLES=no``)."""
    if settings.persistence == "postgres":
        _prepare_schema(settings)
    else:
        private_sqlite_file(settings.sqlite_path)


def _prepare_schema(settings: Settings) -> None:
    import psycopg
    from psycopg import sql

    schema = settings.postgres_schema
    with psycopg.connect(**settings.postgres.connect_options(), autocommit=True) as conn:
        found = conn.execute(
            "SELECT has_schema_privilege(n.oid, 'USAGE'), EXISTS (SELECT 1 FROM pg_proc p "
            "WHERE p.pronamespace = n.oid AND p.proname = %s), "
            "has_schema_privilege(n.oid, 'CREATE') "
            "FROM pg_namespace n WHERE n.nspname = %s",
            (LOCK_PROCEDURE, schema),
        ).fetchone()
        setup = "`punto-banco db setup` (as an administrator)"
        if settings.postgres_create_tables:
            if found is None:  # CREATE SCHEMA checks the right to create even if it exists
                conn.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
                )
            elif not found[2]:  # CREATE TABLE IF NOT EXISTS would be refused the same way
                raise StoreNotReady(
                    f"role {settings.postgres.user} may not create tables in schema {schema}, "
                    f"provisioned by {setup}: set PB_POSTGRES_CREATE_TABLES=no"
                )
            return
        if found is None:
            raise StoreNotReady(
                f"no schema {schema} in {settings.describe_store()}: provision it with {setup}, "
                "or set PB_POSTGRES_CREATE_TABLES=yes to let the service create it"
            )
        if not found[0]:
            raise StoreNotReady(
                f"role {settings.postgres.user} may not use schema {schema}: give the service "
                f"its own role's POSTGRES_USER / POSTGRES_PASSWORD, or run {setup} again"
            )
        if not found[1]:
            raise StoreNotReady(
                f"schema {schema} was not provisioned by {setup} (no {LOCK_PROCEDURE} there): "
                "run it, or set PB_POSTGRES_CREATE_TABLES=yes"
            )


def private_sqlite_file(path: Path) -> None:
    """Create ``path``'s folder (0700) and the empty database file (0600) if missing; make an
    existing database (and its -wal and -shm files) owner-only."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if file.exists() and file.stat().st_mode & 0o077:
            file.chmod(0o600)


def open_application(
    factory: Callable[[dict[str, str]], TApp],
    settings: Settings,
    extra_env: Mapping[str, str] | None = None,
) -> TApp:
    """Prepare the store and construct the Application with the settings' environment
    (plus ``extra_env``: the writer lease's fence, ``writer_lease.py``)."""
    prepare_store(settings)
    return factory({**settings.eventsourcing_env(), **(extra_env or {})})
