"""Event store environments for the dealing and settlement application tests."""

from __future__ import annotations

import secrets
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

DURABLE_STORES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def durable_env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """A fresh SQLite file, or a fresh schema in the session's PostgreSQL database."""
    if request.param == "sqlite":
        return {
            "PERSISTENCE_MODULE": "eventsourcing.sqlite",
            "SQLITE_DBNAME": str(tmp_path / "events.sqlite"),
        }
    postgres: dict[str, str] = request.getfixturevalue("postgres_env")
    schema = f"unit_{secrets.token_hex(4)}"
    with psycopg.connect(
        host=postgres["POSTGRES_HOST"],
        port=int(postgres["POSTGRES_PORT"]),
        dbname=postgres["POSTGRES_DBNAME"],
        user=postgres["POSTGRES_USER"],
        password=postgres["POSTGRES_PASSWORD"],
        autocommit=True,
    ) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    return {**postgres, "PERSISTENCE_MODULE": "eventsourcing.postgres", "POSTGRES_SCHEMA": schema}
