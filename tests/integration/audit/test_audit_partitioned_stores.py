"""``punto-banco audit`` (and recall, replay) on a partitioned deployment's real stores: SQLite
files ``<service>-p<N>.sqlite`` and PostgreSQL schemas ``<prefix><service>_p<N>``.

Each partition's cells are the real Applications on ``Settings.for_partition(n)`` (as a
``PB_PARTITIONED`` process runs them), playing tables whose id hashes into that partition.
The audit passes on them; a changed row is found and named with its partition; a partition
store that is missing is an error.
"""

from __future__ import annotations

import json
import secrets
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from services.shared.platform.settings import Settings
from services.tools.audit.partitions import discover
from services.tools.cli.main import app
from tests.integration.audit.helpers import PARTITIONS, cli, play_partitions, stores_gone
from tests.signing_keys import key_env
from tests.unit.audit.helpers import tables_of

runner = CliRunner()


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """The environment the audit reads the partitioned stores with (PB_PARTITIONED=yes)."""
    folder = tmp_path_factory.mktemp("partitioned")
    env = {"PB_DATA_DIR": str(folder), "PB_PARTITIONED": "yes", **key_env()}
    if request.param == "postgres":
        env |= request.getfixturevalue("postgres_env")
        prefix = f"cells{secrets.token_hex(3)}_"
        env |= {"PB_PERSISTENCE": "postgres", "PB_POSTGRES_SCHEMA_PREFIX": prefix}
    else:
        env |= {"PB_PERSISTENCE": "sqlite"}
    play_partitions(Settings.from_env("shoe", env))
    return env


def test_the_partition_stores_are_found(deployment: dict[str, str]) -> None:
    found = discover(Settings.from_env("shoe", deployment))
    assert found == {0: {"shoe", "dealing", "settlement"}, 1: {"shoe", "dealing", "settlement"}}


def test_the_audit_passes_on_every_partition(deployment: dict[str, str]) -> None:
    code, output = cli(deployment, "audit", "--json", "--partitions", str(PARTITIONS))
    assert code == 0, output
    report = json.loads(output)
    assert report["passed"] and sorted(report["partitions"]) == ["0", "1"]
    assert set(report["stores"]) == {f"{s}-p{n}" for s in ("shoe", "dealing", "settlement")
                                     for n in range(PARTITIONS)}  # fmt: skip
    per = [report["partitions"][str(n)]["checked"]["coups"] for n in range(PARTITIONS)]
    assert report["checked"]["coups"] == sum(per) and all(c >= 12 for c in per)
    assert set(report["totals"]["tables"]) == set(
        tables_of(0, PARTITIONS) + tables_of(1, PARTITIONS)
    )
    code, text = cli(deployment, "audit")
    assert code == 0 and "Audit PASSED" in text and "partition 1: stores shoe" in text


def test_recall_reads_the_partition_of_the_table(deployment: dict[str, str]) -> None:
    table = tables_of(1, PARTITIONS)[0]
    where = ["--postgres"] if deployment["PB_PERSISTENCE"] == "postgres" else []
    result = runner.invoke(
        app, ["recall", "--table", table, "--last", "2", "--json", *where], env=deployment
    )
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["coups"]) == 2


def test_replay_writes_each_partitions_read_models(
    deployment: dict[str, str], tmp_path: Path
) -> None:
    where = ["--postgres"] if deployment["PB_PERSISTENCE"] == "postgres" else []
    result = runner.invoke(app, ["replay", "--out", str(tmp_path), *where], env=deployment)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p0", "p1"]
    assert all(any(folder.iterdir()) for folder in tmp_path.iterdir())


def test_a_changed_row_is_found_and_named_with_its_partition(
    deployment: dict[str, str], tmp_path: Path
) -> None:
    settings = Settings.from_env("settlement", deployment).for_partition(1)
    with _changed(settings, deployment, tmp_path) as env:
        code, output = cli(env, "audit", "--json")
    assert code == 1, output
    errors = [f for f in json.loads(output)["findings"] if f["severity"] == "error"]
    assert {(f["partition"], f.get("store")) for f in errors} == {(1, "settlement")}
    assert "row_altered" in {f["code"] for f in errors}


def test_a_missing_partition_store_is_an_error(deployment: dict[str, str], tmp_path: Path) -> None:
    settings = Settings.from_env("dealing", deployment).for_partition(0)
    with stores_gone([settings], deployment, tmp_path) as env:
        code, output = cli(env, "audit")
    assert code == 1, output
    assert (
        "ERROR partition_missing: partition 0, dealing store: partition 0 has the shoe and "
        "settlement stores but no dealing store"
    ) in output
    assert "partition 1: stores shoe, dealing, settlement" in output


def _spaced(state: bytes) -> bytes:
    """The same JSON, one byte more: a change the reader accepts and the seal does not."""
    return state.replace(b'{"', b'{ "', 1)


@contextmanager
def _changed(settings: Settings, env: dict[str, str], tmp_path: Path) -> Iterator[dict[str, str]]:
    """The store's first settled coup's stored bytes changed (SQLite: in a copy of the data
    folder; PostgreSQL: put back afterwards); the environment to audit it with."""
    if settings.persistence == "sqlite":
        folder = tmp_path / "stores"
        shutil.copytree(settings.data_dir, folder)
        with closing(sqlite3.connect(folder / settings.sqlite_path.name)) as connection:
            nid, state = connection.execute(
                "SELECT rowid, state FROM stored_events WHERE topic LIKE '%CoupSettled' "
                "ORDER BY rowid LIMIT 1"
            ).fetchone()
            connection.execute(
                "UPDATE stored_events SET state = ? WHERE rowid = ?", (_spaced(state), nid)
            )
            connection.commit()
        yield {**env, "PB_DATA_DIR": str(folder)}
        return
    events = sql.Identifier(settings.postgres_schema, f"{settings.service}_events")
    update = sql.SQL("UPDATE {} SET state = %s WHERE notification_id = %s").format(events)
    with psycopg.connect(**settings.postgres.connect_options(), autocommit=True) as conn:
        found = conn.execute(
            sql.SQL(
                "SELECT notification_id, state FROM {} WHERE topic LIKE '%%CoupSettled' "
                "ORDER BY notification_id LIMIT 1"
            ).format(events)
        ).fetchone()
        assert found is not None
        nid, state = found[0], bytes(found[1])
        conn.execute(update, (_spaced(state), nid))
        try:
            yield env
        finally:
            conn.execute(update, (state, nid))


def test_a_checkpoint_is_kept_per_partition(deployment: dict[str, str], tmp_path: Path) -> None:
    """Each partition resumes from its own checkpoint beside the one given; with nothing new
    since, the totals are the same; a damaged partition checkpoint is refused, named."""
    checkpoint = tmp_path / "audit.json"
    code, first = cli(deployment, "audit", "--checkpoint", str(checkpoint), "--json")
    assert code == 0, first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit-p0.json", "audit-p1.json"]
    code, again = cli(deployment, "audit", "--checkpoint", str(checkpoint), "--json")
    assert code == 0, again
    assert json.loads(again)["totals"]["overall"] == json.loads(first)["totals"]["overall"]
    (tmp_path / "audit-p1.json").write_text("not a checkpoint")
    code, output = cli(deployment, "audit", "--checkpoint", str(checkpoint))
    assert code == 2 and "partition 1:" in output
