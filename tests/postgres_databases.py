"""The PostgreSQL databases the tests make: a database of a module's own for tests that create
roles, and dropping them even while autovacuum is in one.

``DROP DATABASE ... WITH (FORCE)`` ends the other sessions in the database, but only those a
non-superuser may signal: an autovacuum worker belongs to no role, so while one is visiting
the database (it visits every database every ``autovacuum_naptime``) the drop fails with
``InsufficientPrivilege`` (PostgreSQL 15; reproduced on the project's server). The worker is
gone within moments, so the drop is tried again until a deadline.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import psycopg
import pytest
from psycopg import errors, sql

from services.shared.platform.settings import PostgresSettings

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


def database_for_roles(
    server_env: dict[str, str], label: str, role_prefix: str
) -> Iterator[PostgresSettings]:
    """A fixture's body: the server's user (it must have CREATEROLE, else the test is skipped)
    in a new database named after ``label``; afterwards the database is dropped, then every
    role named ``role_prefix...`` (roles belong to the whole server, and own what was in it)."""
    server = PostgresSettings(
        host=server_env["POSTGRES_HOST"],
        port=int(server_env.get("POSTGRES_PORT") or 5432),
        dbname=server_env["POSTGRES_DBNAME"],
        user=server_env["POSTGRES_USER"],
        password=server_env.get("POSTGRES_PASSWORD", ""),
    )
    with psycopg.connect(**server.connect_options(), autocommit=True) as connection:
        row = connection.execute(
            "SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        if not (row and row[0]):
            pytest.skip(
                f"PostgreSQL user {server.user} may not create roles: `punto-banco infra up` "
                "gives the local project role CREATEROLE"
            )
        name = f"{label}_{os.getpid()}_{secrets.token_hex(3)}"
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield replace(server, dbname=name)
    finally:
        with psycopg.connect(**server.connect_options(), autocommit=True) as connection:
            drop_database(connection, name)
            for (role,) in connection.execute(
                "SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s)", (role_prefix,)
            ).fetchall():
                connection.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
