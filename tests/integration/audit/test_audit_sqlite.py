"""Audit, recall and replay of SQLite stores written by the real Applications; tampering
applied to the files with sqlite3 is found and located."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contracts import CardDealt
from services.dev.simulation import PlayLog
from services.shared.platform.settings import Settings
from services.tools.audit.auditor import AuditReport, audit
from services.tools.audit.findings import Code
from services.tools.audit.stores import open_stores
from services.tools.cli.main import app
from tests.integration.audit.helpers import audit_settings, play_on
from tests.unit.audit.helpers import streamed, whole_history

runner = CliRunner()


@pytest.fixture(scope="module")
def played(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, dict[str, PlayLog], list[object]]:
    folder = tmp_path_factory.mktemp("audit-sqlite")
    logs, published = play_on(Settings.from_env("shoe", {}, data_dir=folder, persistence="sqlite"))
    return folder, logs, published


def _copy(played: tuple[Path, object, object], tmp_path: Path) -> Path:
    target = tmp_path / "stores"
    shutil.copytree(played[0], target)
    return target


def _tamper(folder: Path, store: str, change: Callable[[sqlite3.Connection], None]) -> None:
    connection = sqlite3.connect(folder / f"{store}.sqlite")
    change(connection)
    connection.commit()
    connection.close()


def _settings(folder: Path) -> Settings:
    return Settings.from_env("shoe", {}, data_dir=folder, persistence="sqlite")


def _rowid(connection: sqlite3.Connection, topic_end: str, nth: int = 0) -> int:
    rows = connection.execute(
        "SELECT rowid FROM stored_events WHERE topic LIKE ? ORDER BY rowid", (f"%{topic_end}",)
    ).fetchall()
    return int(rows[nth][0])


def test_the_cli_audit_passes_and_writes_html(
    played: tuple[Path, object, object], tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    result = runner.invoke(
        app, ["audit", "--data-dir", str(played[0]), "--json", "--html", str(page)]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["passed"] and report["checked"]["coups"] == 2 * 14 + 2
    assert report["checked"]["shoes"] >= 4
    assert "PASSED" in page.read_text()
    text = runner.invoke(app, ["audit", "--data-dir", str(played[0]), "--table", "t1"])
    assert text.exit_code == 0 and "table t1" in text.output and "table t2" not in text.output


def test_the_cli_audit_verifies_the_voids_signed_decisions(
    played: tuple[Path, object, object], tmp_path: Path
) -> None:
    """With the data folder's supervisors keyring (the default), another one (--supervisors:
    every void fails), and none (a warning: not verified)."""
    folder = _copy(played, tmp_path)
    text = runner.invoke(app, ["audit", "--data-dir", str(folder)])
    assert text.exit_code == 0, text.output
    assert "voids: their supervisors' signed decisions checked" in text.output
    other = tmp_path / "other.json"
    runner.invoke(app, ["supervisor", "keygen", "--id", "supervisor-7", "--out", str(tmp_path),
                        "--keyring", str(other)])  # fmt: skip
    refused = runner.invoke(
        app, ["audit", "--data-dir", str(folder), "--json", "--supervisors", str(other)]
    )
    assert refused.exit_code == 1, refused.output
    report = json.loads(refused.output)
    assert {f["code"] for f in report["findings"]} == {"void_not_authorized"}
    assert report["checked"]["decisions"] == len(report["findings"]) > 0
    (folder / "keys" / "supervisors.json").unlink()
    unverified = runner.invoke(app, ["audit", "--data-dir", str(folder), "--json"])
    assert unverified.exit_code == 3, unverified.output
    assert [f["code"] for f in json.loads(unverified.output)["findings"]] == [
        "decisions_not_verified"
    ]
    missing = runner.invoke(
        app, ["audit", "--data-dir", str(folder), "--supervisors", str(tmp_path / "nope.json")]
    )
    assert missing.exit_code == 2 and "cannot read the supervisors keyring" in missing.output


def test_a_missing_store_is_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["audit", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "no shoe store" in result.output


@pytest.mark.parametrize("kind", ["edit", "delete", "insert", "swap"])
def test_tampering_with_the_files_is_found_and_located(
    kind: str, played: tuple[Path, object, object], tmp_path: Path
) -> None:
    folder = _copy(played, tmp_path)
    target: dict[str, int] = {}

    def change(c: sqlite3.Connection) -> None:
        n = _rowid(c, "Coup.CardDealt", 7)
        target["n"] = n
        if kind == "edit":
            c.execute(
                "UPDATE stored_events SET state = CAST(replace(CAST(state AS TEXT), "
                "'\"position\":', '\"position\":1') AS BLOB) WHERE rowid = ?",
                (n,),
            )
        elif kind == "delete":
            c.execute("DELETE FROM stored_events WHERE rowid = ?", (n,))
        elif kind == "insert":
            oid, _version, topic, state = c.execute(
                "SELECT originator_id, originator_version, topic, state FROM stored_events "
                "WHERE rowid = ?",
                (n,),
            ).fetchone()
            last = c.execute(
                "SELECT MAX(originator_version) FROM stored_events WHERE originator_id = ?",
                (oid,),
            ).fetchone()[0]
            c.execute("UPDATE stored_events SET rowid = -rowid WHERE rowid > ?", (n,))
            c.execute("UPDATE stored_events SET rowid = 1 - rowid WHERE rowid < 0")
            c.execute(
                "INSERT INTO stored_events (rowid, originator_id, originator_version, topic, "
                "state) VALUES (?, ?, ?, ?, ?)",
                (n + 1, oid, last + 1, topic, state),
            )
            target["n"] = n + 1
        else:
            other = _rowid(c, "Coup.CardDealt", 8)
            target["other"] = other
            c.execute("UPDATE stored_events SET rowid = -1 WHERE rowid = ?", (n,))
            c.execute("UPDATE stored_events SET rowid = ? WHERE rowid = ?", (n, other))
            c.execute("UPDATE stored_events SET rowid = ? WHERE rowid = -1", (other,))

    _tamper(folder, "dealing", change)
    report = audit_settings(_settings(folder))
    code = {
        "edit": Code.ROW_ALTERED,
        "delete": Code.ROW_DELETED,
        "insert": Code.ROW_INSERTED,
        "swap": Code.ROWS_SWAPPED,
    }[kind]
    located = [f for f in report.findings if f.code is code]
    assert [f.notification_id for f in located] == [target["n"]], report.findings
    assert located[0].store == "dealing"
    if kind == "swap":
        assert f"{target['n']} and {target['other']}" in located[0].message
    if kind != "delete":
        assert located[0].coup_id is not None  # the row's coup is named
    result = runner.invoke(app, ["audit", "--data-dir", str(folder)])
    assert result.exit_code == 1
    assert code.value in result.output


def _winning_settlement(c: sqlite3.Connection) -> tuple[int, dict[str, object]]:
    for rowid, state in c.execute(
        "SELECT rowid, state FROM stored_events WHERE topic LIKE '%CoupSettled' ORDER BY rowid"
    ):
        data = json.loads(state)
        if any(line[3] == "WIN" for line in data["lines"]):
            return int(rowid), data
    raise AssertionError("no coup with a winning bet")


def test_a_consistently_changed_payout_and_a_dropped_settlement_are_caught(
    played: tuple[Path, object, object], tmp_path: Path
) -> None:
    folder = _copy(played, tmp_path)
    facts: dict[str, str] = {}

    def change(c: sqlite3.Connection) -> None:
        rowid, state = _winning_settlement(c)
        lines = state["lines"]
        assert isinstance(lines, list)
        winner = next(line for line in lines if line[3] == "WIN")
        winner[5] += 500
        winner[6] += 500
        dropped = next(line for line in lines if line is not winner)
        lines.remove(dropped)
        state["paid"] = sum(line[6] for line in lines)
        state["staked"] = sum(line[4] for line in lines)
        facts.update(winner=winner[0], dropped=dropped[0])
        c.execute(
            "UPDATE stored_events SET state = ? WHERE rowid = ?",
            (json.dumps(state, separators=(",", ":")).encode(), rowid),
        )

    _tamper(folder, "settlement", change)
    report = audit_settings(_settings(folder))
    by_code = {f.code: f for f in report.findings}
    assert by_code[Code.WRONG_SETTLEMENT].bet_id == facts["winner"]
    assert by_code[Code.NEVER_SETTLED].bet_id == facts["dropped"]
    assert Code.ROW_ALTERED in by_code
    assert Code.WRONG_TOTALS not in by_code  # consistent: only recomputation tells


def test_recall_matches_what_was_dealt(
    played: tuple[Path, dict[str, PlayLog], list[object]],
) -> None:
    folder, logs, published = played
    result = runner.invoke(app, ["recall", "--table", "t2", "--data-dir", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    coups = json.loads(result.output)["coups"]
    assert len(coups) == 10
    dealt: dict[str, list[list[object]]] = {}
    for message in published:
        if isinstance(message, CardDealt) and message.table_id == "t2":
            dealt.setdefault(message.coup_id, []).append(
                [message.side, message.card, message.position]
            )
    for coup in coups:
        assert [[c["side"], c["card"], c["position"]] for c in coup["cards"]] == dealt.get(
            coup["coup_id"], []
        )
        if coup["coup_id"] in logs["t2"].voided:
            assert coup["voids"][0]["supervisor_id"] == "supervisor-7"
    text = runner.invoke(app, ["recall", "--table", "t2", "--data-dir", str(folder), "--last", "2"])
    assert text.exit_code == 0 and text.output.count("\nCoup ") == 2


def test_replay_rebuilds_identical_read_models(
    played: tuple[Path, object, object], tmp_path: Path
) -> None:
    outputs = []
    for name in ("first", "second"):
        result = runner.invoke(
            app, ["replay", "--data-dir", str(played[0]), "--out", str(tmp_path / name)]
        )
        assert result.exit_code == 0, result.output
        outputs.append({p.name: p.read_bytes() for p in sorted((tmp_path / name).iterdir())})
    assert outputs[0] == outputs[1]
    assert set(outputs[0]) == {"bettor-history.json", "table-history.json"}


def test_the_streamed_audit_of_a_tampered_store_is_the_whole_history_audit(
    played: tuple[Path, object, object], tmp_path: Path
) -> None:
    folder = _copy(played, tmp_path)

    def change(c: sqlite3.Connection) -> None:
        for rowid, state in c.execute(
            "SELECT rowid, state FROM stored_events WHERE topic LIKE '%CoupSettled'"
        ).fetchall():
            data = json.loads(state)
            for line in data["lines"]:
                line[6] += 1  # every bet paid one cent too much
            c.execute(
                "UPDATE stored_events SET state = ? WHERE rowid = ?",
                (json.dumps(data).encode(), rowid),
            )

    _tamper(folder, "settlement", change)
    stores = open_stores(_settings(folder))
    try:
        serial = audit(stores)
        assert streamed(serial) == whole_history(stores)  # streamed: as the whole history
    finally:
        for store in stores.values():
            store.close()
    assert len(only_codes(serial, Code.WRONG_SETTLEMENT)) > 10


def only_codes(report: AuditReport, code: Code) -> list[object]:
    return [f for f in report.findings if f.code is code]


def test_a_day_archived_then_removed_from_the_store_audits_as_before(
    played: tuple[Path, object, object], tmp_path: Path
) -> None:
    """``archive`` writes each day's sealed rows of each SQLite store; with them removed from
    the store (the operator's step), ``audit --archives`` reports what the store alone did;
    a checkpoint written over the archives resumes the next audit after them."""
    folder = _copy(played, tmp_path)
    before = audit_settings(_settings(folder)).to_json()
    # The days the history was played on (two across midnight UTC), and the next: a seal
    # recorded past midnight.
    days = sorted(before["totals"]["days"])
    days.append((date.fromisoformat(days[-1]) + timedelta(days=1)).isoformat())
    archives = tmp_path / "archives"
    for day in days:
        result = runner.invoke(
            app, ["archive", "--day", day, "--out", str(archives), "--data-dir", str(folder)]
        )
        assert result.exit_code == 0, result.output
    for store in ("shoe", "dealing", "settlement"):
        archived = sorted(archives.glob(f"{store}-2*.jsonl.gz"))
        assert archived, f"no archive of {store}"
        header = json.loads(gzip.decompress(archived[-1].read_bytes()).split(b"\n", 1)[0])
        with sqlite3.connect(folder / f"{store}.sqlite") as c:
            c.execute("DELETE FROM stored_events WHERE rowid <= ?", (header["to_id"],))
    checkpoint = tmp_path / "audit.checkpoint"
    for args in ([], ["--checkpoint", str(checkpoint)], ["--checkpoint", str(checkpoint)]):
        result = runner.invoke(
            app,
            ["audit", "--data-dir", str(folder), "--archives", str(archives), "--json", *args],
        )
        assert result.exit_code == 0, result.output
    after = json.loads(result.output)
    assert after["passed"] and before["passed"]
    assert audit_settings(_settings(folder)).errors  # the store alone now lacks its history
