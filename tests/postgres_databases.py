"""Dropping the PostgreSQL databases the tests made, even while autovacuum is in one.

``DROP DATABASE ... WITH (FORCE)`` ends the other sessions in the database, but only those a
non-superuser may signal: an autovacuum worker belongs to no role, so while one is visiting
the database (it visits every database every ``autovacuum_naptime``) the drop fails with
``InsufficientPrivilege`` (PostgreSQL 15; reproduced on the project's server). The worker is
gone within moments, so the drop is tried again until a deadline.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
from psycopg import errors, sql

DROP_DEADLINE = 60.0
"""Seconds to keep trying before the error is raised."""


def drop_database(connection: psycopg.Connection[Any], name: str) -> None:
    """``DROP DATABASE IF EXISTS name WITH (FORCE)`` on an autocommit ``connection``, tried
    again while an autovacuum worker (which FORCE may not end) is in the database."""
    statement = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    deadline = time.monotonic() + DROP_DEADLINE
    while True:
        try:
            connection.execute(statement)
            return
        except errors.InsufficientPrivilege:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
