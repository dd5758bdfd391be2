"""Make a service's store ready and open its Application on it.

The Application itself only sees the eventsourcing environment produced by
:meth:`Settings.eventsourcing_env`; this module does the little preparation a
backend needs first (the data folder for SQLite, the schema for PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Callable
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
        settings.data_dir.mkdir(parents=True, exist_ok=True)


def open_application(factory: Callable[[dict[str, str]], TApp], settings: Settings) -> TApp:
    """Prepare the store and construct the Application with the settings' environment."""
    prepare_store(settings)
    return factory(settings.eventsourcing_env())
