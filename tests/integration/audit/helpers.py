"""Histories played through the real Applications on real stores (SQLite or PostgreSQL), a
partitioned deployment's among them; the CLI run on them, and stores taken away for a test."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import psycopg
from eventsourcing.domain import Aggregate, event
from psycopg import sql
from typer.testing import CliRunner

from services.dev.simulation import LocalSystem, PlayLog, play
from services.shared.platform.settings import Settings
from services.shared.platform.store import ServiceApplication
from services.tools.audit.auditor import AuditReport, audit
from services.tools.audit.stores import open_stores
from services.tools.cli.main import app
from tests.unit.audit.helpers import tables_of

PARTITIONS = 2
runner = CliRunner()


def play_on(settings: Settings, coups: int = 14) -> tuple[dict[str, PlayLog], list[object]]:
    """Two 1-deck tables (several shoes), voids, refused and late bets; sealed at the end."""
    with LocalSystem.from_settings(settings) as system:
        system.keep_published = True
        logs = {
            table: play(
                system,
                table,
                coups,
                bets_per_coup=5,
                decks=1,
                void_every=5,
                invalid_every=4,
                late_every=3,
                batch=3,
                seed=seed,
            )
            for seed, table in enumerate(("t1", "t2"), start=1)
        }
        system.pump()
        system.seal()
        return logs, list(system.published)


def play_partitions(settings: Settings) -> None:
    """Each partition's cells play their two tables (voids, refused and late bets); sealed."""
    for partition in range(PARTITIONS):
        with LocalSystem.from_settings(settings.for_partition(partition)) as system:
            for seed, table in enumerate(tables_of(partition, PARTITIONS), start=1):
                play(system, table, 6, bets_per_coup=4, decks=1, void_every=4,
                     invalid_every=3, late_every=3, batch=3, seed=seed)  # fmt: skip
            system.pump()
            system.seal()


def cli(env: dict[str, str], command: str, *more: str) -> tuple[int, str]:
    """``punto-banco <command>`` (``--postgres`` on PostgreSQL) in ``env`` alone (no
    PB_TOPIC_PARTITIONS); its exit code and output."""
    where = ["--postgres"] if env["PB_PERSISTENCE"] == "postgres" else []
    result = runner.invoke(app, [command, *where, *more], env={"PB_TOPIC_PARTITIONS": None, **env})
    return result.exit_code, result.output


@contextmanager
def stores_gone(
    stores: Sequence[Settings], env: dict[str, str], tmp_path: Path
) -> Iterator[dict[str, str]]:
    """The stores gone (SQLite: from a copy of the data folder; PostgreSQL: their schemas
    renamed, and back afterwards); the environment to audit without them."""
    first = stores[0]
    if first.persistence == "sqlite":
        folder = tmp_path / "stores"
        shutil.copytree(first.data_dir, folder)
        for store in stores:
            (folder / store.sqlite_path.name).unlink()
        yield {**env, "PB_DATA_DIR": str(folder)}
        return
    rename = sql.SQL("ALTER SCHEMA {} RENAME TO {}")
    names = [(sql.Identifier(s.postgres_schema), sql.Identifier(f"gone_{s.postgres_schema}"))
             for s in stores]  # fmt: skip
    with psycopg.connect(**first.postgres.connect_options(), autocommit=True) as conn:
        for away, back in names:
            conn.execute(rename.format(away, back))
        try:
            yield env
        finally:
            for away, back in names:
                conn.execute(rename.format(back, away))


def audit_settings(settings: Settings) -> AuditReport:
    stores = open_stores(settings)
    try:
        return audit(stores)
    finally:
        for store in stores.values():
            store.close()


class Tally(Aggregate):
    """A small aggregate for tests of the sealing and anchoring machinery."""

    @event("Counted")
    def count(self, by: int) -> None:
        self.total = getattr(self, "total", 0) + by


class TallyApp(ServiceApplication):
    """A service Application with nothing but tallies (its events are sealed like any)."""

    name = "tally"

    def add(self, times: int) -> None:
        tally = Tally()
        for n in range(times):
            tally.count(by=n)
        self.save(tally)
