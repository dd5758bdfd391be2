"""``punto-banco archive`` and ``audit --archives`` on a partitioned deployment's real stores
(SQLite files ``<service>-p<N>.sqlite``, PostgreSQL schemas ``<prefix><service>_p<N>``).

Every partition store's day is archived under its own name (``<service>-p<N>-<day>``); the
audit reads each store as its archives, then the store, and reports what the stores alone
did, also once a partition's archived rows are gone from its stores. A changed, missing or
renamed archive of partition 1 is an error naming partition 1: partition 0's archives never
stand in for it.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from services.shared.platform.settings import Settings
from services.tools.audit.stores import SERVICES
from tests.integration.audit.helpers import PARTITIONS, cli, play_partitions, stores_gone
from tests.signing_keys import key_env
from tests.unit.audit.helpers import redigest

NAMES = [f"{service}-p{n}" for n in range(PARTITIONS) for service in SERVICES]


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def archived(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """A played partitioned deployment (PB_PARTITIONED=yes), its audit alone, and the daily
    archives of every day it played on (and the next: a seal past midnight) in ``archives``.
    Each store is sealed once, at the end: it has one archive, of the day of that seal, even
    when the play spans midnight UTC."""
    folder = tmp_path_factory.mktemp("partitioned")
    env = {"PB_DATA_DIR": str(folder / "var"), "PB_PARTITIONED": "yes", **key_env()}
    if request.param == "postgres":
        env |= request.getfixturevalue("postgres_env")
        env |= {"PB_PERSISTENCE": "postgres", "PB_POSTGRES_SCHEMA_PREFIX": "cellsarc_"}
    else:
        env |= {"PB_PERSISTENCE": "sqlite"}
    play_partitions(Settings.from_env("shoe", env))
    code, output = cli(env, "audit", "--json")
    assert code == 0, output
    alone = json.loads(output)
    days = sorted(alone["totals"]["days"])
    days.append((date.fromisoformat(days[-1]) + timedelta(days=1)).isoformat())
    for day in days:
        code, output = cli(env, "archive", "--day", day, "--out", str(folder / "archives"))
        assert code == 0, output
        assert all(f"{name}: " in output for name in NAMES)
    return {"env": env, "alone": alone, "archives": folder / "archives", "days": days}


def _headers(archives: Path, name: str) -> list[dict[str, Any]]:
    return [
        json.loads(gzip.decompress(path.read_bytes()).split(b"\n", 1)[0])
        for path in sorted(archives.glob(f"{name}-2*.jsonl.gz"))
    ]


def test_every_partition_store_is_archived_under_its_own_name(archived: dict[str, Any]) -> None:
    for name in NAMES:
        headers = _headers(archived["archives"], name)
        assert len(headers) == 1 and headers[0]["store"] == name, name
        assert headers[0]["day"] in archived["days"] and headers[0]["to_id"] > 0


def test_the_archives_then_the_stores_audit_as_the_stores(
    archived: dict[str, Any], tmp_path: Path
) -> None:
    """As the stores alone; with --checkpoint too (one per partition), resumed after them."""
    env, archives = archived["env"], str(archived["archives"])
    code, output = cli(env, "audit", "--archives", archives, "--json")
    assert code == 0, output
    report = json.loads(output)
    assert report["passed"] and sorted(report["partitions"]) == ["0", "1"]
    assert report["totals"]["overall"] == archived["alone"]["totals"]["overall"]
    assert report["events"] == archived["alone"]["events"]
    checkpoint = tmp_path / "audit.json"
    overall = []
    for _run in range(2):
        code, output = cli(
            env, "audit", "--archives", archives, "--json", "--checkpoint", str(checkpoint)
        )
        assert code == 0, output
        overall.append(json.loads(output)["totals"]["overall"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit-p0.json", "audit-p1.json"]
    assert overall[0] == overall[1] and overall[0]["coups"] > 0


def test_a_partitions_archived_rows_gone_from_its_stores_audit_as_before(
    archived: dict[str, Any], tmp_path: Path
) -> None:
    """Partition 1's archived rows deleted from its three stores (the operator's step): with
    the archives the audit is the one of the whole stores; without, partition 1 lacks its
    history; with partition 1's settlement archive gone too, that is an error of partition 1."""
    env, archives = archived["env"], archived["archives"]
    with _moved_out(env, archives, partition=1, tmp_path=tmp_path) as moved:
        code, output = cli(moved, "audit", "--archives", str(archives), "--json")
        assert code == 0, output
        report = json.loads(output)
        assert report["totals"]["overall"] == archived["alone"]["totals"]["overall"]
        assert report["events"] == archived["alone"]["events"]
        code, output = cli(moved, "audit", "--json")
        assert code == 1, output
        assert {f["partition"] for f in json.loads(output)["findings"]} == {1}
        fewer = tmp_path / "fewer"
        shutil.copytree(archives, fewer)
        for path in fewer.glob("settlement-p1-*"):
            path.unlink()
        code, output = cli(moved, "audit", "--archives", str(fewer), "--json")
    assert code == 1, output
    errors = [f for f in json.loads(output)["findings"] if f["severity"] == "error"]
    assert errors and {(f["partition"], f.get("store")) for f in errors} == {(1, "settlement")}
    assert cli(env, "audit")[0] == 0  # the stores as they were (PostgreSQL: rows put back)


def test_a_changed_archive_of_partition_1_is_an_error_naming_it(
    archived: dict[str, Any], tmp_path: Path
) -> None:
    archives = tmp_path / "archives"
    shutil.copytree(archived["archives"], archives)
    (path,) = archives.glob("settlement-p1-2*.jsonl.gz")
    lines = gzip.decompress(path.read_bytes()).splitlines()
    row = json.loads(lines[5])
    row["state"] = row["state"].replace('{"', '{ "', 1)
    lines[5] = json.dumps(row).encode()
    path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    code, output = cli(archived["env"], "audit", "--archives", str(archives))
    assert code == 1 and "partition 1: " in output and "does not match its digest" in output
    redigest(path)  # re-digested: only partition 1's seals can tell
    code, output = cli(archived["env"], "audit", "--archives", str(archives), "--json")
    assert code == 1, output
    errors = [f for f in json.loads(output)["findings"] if f["severity"] == "error"]
    assert {(f["partition"], f.get("store")) for f in errors} == {(1, "settlement")}
    assert "row_altered" in {f["code"] for f in errors}


def test_partition_0s_archive_never_stands_in_for_partition_1s(
    archived: dict[str, Any], tmp_path: Path
) -> None:
    """Partition 0's settlement archive put in place of partition 1's: renamed (and
    re-digested) it is refused by its header; with the header forged too, partition 1's
    seal chain does not run through it."""
    archives = tmp_path / "archives"
    shutil.copytree(archived["archives"], archives)
    (ours,) = archives.glob("settlement-p1-2*.jsonl.gz")
    (theirs,) = archives.glob("settlement-p0-2*.jsonl.gz")
    day = ours.name.removeprefix("settlement-p1-")
    for path in archives.glob("settlement-p1-*"):
        path.unlink()
    stand_in = archives / f"settlement-p1-{day}"
    stand_in.write_bytes(theirs.read_bytes())
    redigest(stand_in)
    code, output = cli(archived["env"], "audit", "--archives", str(archives))
    assert code == 1 and "partition 1: " in output and "renamed" in output, output
    header, rest = gzip.decompress(theirs.read_bytes()).split(b"\n", 1)
    forged = {**json.loads(header), "store": "settlement-p1", "day": day.split(".")[0]}
    stand_in.write_bytes(gzip.compress(json.dumps(forged).encode() + b"\n" + rest))
    redigest(stand_in)
    code, output = cli(archived["env"], "audit", "--archives", str(archives), "--json")
    assert code == 1, output
    errors = [f for f in json.loads(output)["findings"] if f["severity"] == "error"]
    assert errors and {f["partition"] for f in errors} == {1}  # and the stores' agreement
    assert "settlement" in {f.get("store") for f in errors}  # its seals do not vouch for it


def test_a_partition_with_archives_but_no_stores_is_an_error(
    archived: dict[str, Any], tmp_path: Path
) -> None:
    """Partition 1's three stores gone (the highest partition: nothing else says it was
    there): its archives do, so each missing store is an error of partition 1."""
    settings = Settings.from_env("shoe", archived["env"]).for_partition(1)
    own = [settings.for_service(service) for service in SERVICES]
    with stores_gone(own, archived["env"], tmp_path) as env:
        assert cli(env, "audit")[0] == 0  # partition 0 alone looks whole
        code, output = cli(env, "audit", "--archives", str(archived["archives"]), "--json")
    assert code == 1, output
    errors = [f for f in json.loads(output)["findings"] if f["severity"] == "error"]
    assert sorted((f["code"], f["partition"], f["store"]) for f in errors) == sorted(
        ("partition_missing", 1, service) for service in SERVICES
    )
    assert "daily archives of its settlement store but no such store" in output


@contextmanager
def _moved_out(
    env: dict[str, str], archives: Path, partition: int, tmp_path: Path
) -> Iterator[dict[str, str]]:
    """The partition's stores without their archived rows (SQLite: in a copy of the data
    folder; PostgreSQL: deleted, and put back afterwards); the environment to audit them."""
    settings = Settings.from_env("shoe", env).for_partition(partition)
    last = {s: _headers(archives, f"{s}-p{partition}")[-1]["to_id"] for s in SERVICES}
    if settings.persistence == "sqlite":
        folder = tmp_path / "stores"
        shutil.copytree(settings.data_dir, folder)
        for service, to_id in last.items():
            path = folder / settings.for_service(service).sqlite_path.name
            with closing(sqlite3.connect(path)) as connection:
                connection.execute("DELETE FROM stored_events WHERE rowid <= ?", (to_id,))
                connection.commit()
        yield {**env, "PB_DATA_DIR": str(folder)}
        return
    with psycopg.connect(**settings.postgres.connect_options(), autocommit=True) as conn:
        kept = []
        for service, to_id in last.items():
            own = settings.for_service(service)
            events = sql.Identifier(own.postgres_schema, f"{service}_events")
            cursor = conn.execute(
                sql.SQL("SELECT * FROM {} WHERE notification_id <= %s").format(events), (to_id,)
            )
            columns = [sql.Identifier(c.name) for c in cursor.description or ()]
            kept.append((events, columns, cursor.fetchall()))
            conn.execute(
                sql.SQL("DELETE FROM {} WHERE notification_id <= %s").format(events), (to_id,)
            )
        try:
            yield env
        finally:
            for events, columns, rows in kept:
                insert = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                    events,
                    sql.SQL(", ").join(columns),
                    sql.SQL(", ").join([sql.Placeholder()] * len(columns)),
                )
                with conn.cursor() as cursor:
                    cursor.executemany(insert, rows)
