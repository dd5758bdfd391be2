"""eventsourcing's PostgreSQL and SQLite modules save and read an aggregate."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event


class Ledger(Aggregate):
    @event("Opened")
    def __init__(self, name: str) -> None:
        self.name = name
        self.entries: list[int] = []

    @event("Credited")
    def credit(self, amount: int) -> None:
        self.entries.append(amount)


class Ledgers(Application[UUID]):
    def open(self, name: str, *amounts: int) -> UUID:
        ledger = Ledger(name)
        for amount in amounts:
            ledger.credit(amount)
        self.save(ledger)
        return ledger.id

    def entries(self, ledger_id: UUID) -> tuple[str, list[int], int]:
        ledger: Ledger = self.repository.get(ledger_id)
        return ledger.name, ledger.entries, ledger.version


def _save_then_read_in_a_new_application(env: dict[str, Any]) -> None:
    writer = Ledgers(env=env)
    try:
        ledger_id = writer.open("house", 100, 250)
    finally:
        writer.close()
    reader = Ledgers(env=env)  # a new application: reads back from the store
    try:
        assert reader.entries(ledger_id) == ("house", [100, 250], 3)
        assert len(list(reader.notification_log.select(start=1, limit=10))) == 3
    finally:
        reader.close()


@pytest.mark.postgres
def test_postgres_module_saves_and_reads_an_aggregate(
    postgres_env: dict[str, str], postgres_dsn: str
) -> None:
    env = {"PERSISTENCE_MODULE": "eventsourcing.postgres", **postgres_env}
    _save_then_read_in_a_new_application(env)
    with psycopg.connect(postgres_dsn) as connection:
        row = connection.execute("SELECT count(*) FROM ledgers_events").fetchone()
    assert row == (3,)


@pytest.mark.postgres
def test_postgres_dsn_names_the_session_database(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn) as connection:
        row = connection.execute("SELECT current_database()").fetchone()
    assert row is not None and str(row[0]).startswith("pb_test_")


def test_sqlite_module_saves_and_reads_an_aggregate(sqlite_path: Path) -> None:
    env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(sqlite_path)}
    _save_then_read_in_a_new_application(env)
    assert sqlite_path.stat().st_size > 0
