"""Bet ids held in the store: a row of the bet-id table per (operator, bet id) written with
its answer, read when a bet names it, nothing of history loaded at start; older stores get
their rows once."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.application import Application
from eventsourcing.persistence import IntegrityError

from contracts import PlaceBet
from services.settlement import application, bet_index_store
from services.settlement.application import SettlementApplication
from services.settlement.bet_index import BetAnswer
from services.settlement.desk import held_line
from services.shared.platform.store import BET_IDS, Row, select_rows
from tests.unit.compat.golden import golden_rows, stored
from tests.unit.settlement.harness import PLACED_AT, Dealing, bet, settlement_app
from tests.unit.settlement.test_settlement_bets import hold_as_before


def sqlite_env(path: Path) -> dict[str, str]:
    return {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)}


def open_table(app: SettlementApplication, *coups: str) -> Dealing:
    dealing = Dealing(app)
    dealing.open_table()
    for number, coup_id in enumerate(coups, 1):
        dealing.open_betting(coup_id, number=number)
    return dealing


def rows(app: SettlementApplication, *bet_ids: str) -> dict[str, list[Row]]:
    """The bet-id table's rows of the house's ``bet_ids``, by bet id (those with any)."""
    found: dict[str, list[Row]] = {}
    for row in select_rows(app.recorder, BET_IDS, [("house", bet_id) for bet_id in bet_ids]):
        found.setdefault(row[1], []).append(tuple(row))
    return found


def last_id(app: SettlementApplication) -> int:
    return app.recorder.max_notification_id() or 0


def test_a_binding_answer_is_recorded_by_bet_id_and_a_free_one_is_not(
    store_env: dict[str, str],
) -> None:
    app = settlement_app(env=store_env)
    open_table(app, "c1")
    app.handle_batch([bet("b1"), bet("r1", amount=5), bet("n1", coup_id="c9")], None)
    assert app.place_bet(bet("b1", amount=2000)).reason_code == "DUPLICATE_BET_ID"
    found = rows(app, "b1", "r1", "n1")
    assert set(found) == {"b1", "r1"}  # n1 (NO_SUCH_COUP) is free: no row
    [accepted] = found["b1"]  # the duplicate changed nothing
    content = '["t1", "c1", "alice", "player", "1000", "EUR"]'
    assert accepted == ("house", "b1", 1, content, True, None, "", False)
    [refused] = found["r1"]
    assert refused[2:] == (1, refused[3], False, "BELOW_MINIMUM", refused[6], False)
    app.close()


def test_a_restarted_settlement_answers_a_resend_from_the_record_and_records_nothing(
    store_env: dict[str, str],
) -> None:
    first = settlement_app(env=store_env)
    open_table(first, "c1")
    assert first.place_bet(bet("b1")).accepted
    first.close()
    again = settlement_app(env=store_env)
    before = last_id(again)
    resend = again.place_bet(bet("b1", amount="1000.00"))
    assert resend == BetAnswer("b1", True, repeated=True)
    assert last_id(again) == before  # nothing recorded
    assert again.place_bet(bet("b1", bettor_id="bob")).reason_code == "DUPLICATE_BET_ID"
    again.close()


def test_a_second_writer_of_the_same_bet_id_fails_its_whole_transaction(
    store_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two instances on one store: the one that read the bet id as free before the other
    recorded it cannot insert it again (its row at version 1 exists): its transaction
    fails whole, and handled again it answers DUPLICATE_BET_ID."""
    one = settlement_app(env=store_env)
    open_table(one, "c1", "c2")
    other = settlement_app(env=store_env)
    read, stale = other.bet_ids.read, [True]

    def read_once_before_the_write(keys: Any) -> Any:  # then from the store as it is
        return {} if stale and stale.pop() else read(keys)

    monkeypatch.setattr(other.bet_ids, "read", read_once_before_the_write)
    one.handle_batch([bet("b1", coup_id="c1")], None)
    before = last_id(one)
    with pytest.raises(IntegrityError):
        other.handle_batch([bet("b1", coup_id="c2", bettor_id="bob")], None)
    assert last_id(one) == before  # not even the book's answer
    other.handle_batch([bet("b1", coup_id="c2", bettor_id="bob")], None)
    assert other.bet_answer("b1") == BetAnswer("b1", True)  # the first writer's answer
    book = other.get_book("t1", "c2")
    assert book is not None and book.bet_count == 0
    assert [line.reason_code for line in _answer_lines(other, "c2")] == ["DUPLICATE_BET_ID"]
    one.close()
    other.close()


def _answer_lines(app: SettlementApplication, coup_id: str) -> Iterator[Any]:
    for notification in app.recorder.select_notifications(1, 100_000):
        event = app.mapper.to_domain_event(notification)
        if type(event).__name__ == "BetsAnswered" and event.coup_id == coup_id:
            yield from event.lines


def test_a_failed_unit_of_work_leaves_no_bet_id_behind(store_env: dict[str, str]) -> None:
    app = settlement_app(env=store_env)
    open_table(app, "c1")
    before = last_id(app)
    naive = datetime(2026, 11, 30, 3, 1)  # refused in the middle of the batch
    with pytest.raises(ValueError, match="timezone-aware"):
        app.handle_batch([bet("b1"), bet("b2")], None, placed_at=[PLACED_AT, naive])
    assert last_id(app) == before and app.bet_answer("b1") is None
    assert app.place_bet(bet("b1")) == BetAnswer("b1", True)  # judged afresh, not a resend
    app.close()


def test_a_batch_reads_the_records_of_its_bet_ids_in_one_query(tmp_path: Path) -> None:
    app = settlement_app(env=sqlite_env(tmp_path / "s.sqlite"))
    open_table(app, "c1")
    app.handle_batch([bet(f"a{n}", bettor_id=f"p{n}") for n in range(50)], None)
    reads = app.bet_ids.reads
    resent = [bet(f"a{n}", bettor_id=f"p{n}") for n in range(0, 50, 2)]
    app.handle_batch(resent + [bet(f"z{n}", bettor_id=f"q{n}") for n in range(40)], None)
    assert app.bet_ids.reads == reads + 1  # the 40 new ids (the resent ones are cached)
    app.close()


@pytest.mark.parametrize("answered", [20, 400])
def test_start_up_reads_nothing_of_the_answered_bets(
    answered: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Start-up runs the same statements whether 20 or 400 bets were answered, and keeps no
    bet id in memory: its time and memory do not grow with history."""
    env = sqlite_env(tmp_path / "s.sqlite")
    first = settlement_app(env=env)
    open_table(first, "c1")
    bets = [bet(f"b{n}", bettor_id=f"p{n}") for n in range(answered)]
    for start in range(0, answered, 20):
        first.handle_batch(bets[start : start + 20], None)
    first.close()
    statements = trace_sqlite(monkeypatch)
    again = settlement_app(env=env)
    assert len(again.bet_index) == 0 and again.bet_ids.reads == 0
    assert [s for s in statements if not s.startswith(HOUSEKEEPING)] == START_UP_READS
    assert again.place_bet(bet("b7", bettor_id="p7")).repeated  # read when named
    again.close()


HOUSEKEEPING = ("PRAGMA journal_mode", "BEGIN", "COMMIT", "ROLLBACK", "CREATE TABLE IF NOT")
START_UP_READS = [
    "SELECT MAX(notification_id) FROM tracking WHERE application_name='__migration__'",
    "SELECT MAX(notification_id) FROM tracking "
    "WHERE application_name='settlement:bet-id-table-filled'",
]
"""All a start reads: eventsourcing's schema version, and the mark that the answers of an
older settlement have their rows (``bet_index_store``)."""


def trace_sqlite(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement run on SQLite connections opened from now on."""
    statements: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = connect(*args, **kwargs)
        connection.set_trace_callback(statements.append)
        return connection

    monkeypatch.setattr(sqlite3, "connect", traced)
    return statements


def older_store(env: dict[str, str], rows: list[dict[str, Any]]) -> None:
    """A store as an older settlement left it: its answers, no bet-id table."""
    older = Application[UUID](env=env)
    older.recorder.insert_events([stored(row) for row in rows])
    older.close()


def test_an_older_store_gets_its_bet_ids_recorded_once_at_first_start(tmp_path: Path) -> None:
    env = sqlite_env(tmp_path / "s.sqlite")
    older_store(env, list(golden_rows("settlement")))
    app = settlement_app(env=env)
    assert app.bet_answer("t1.coup-1.b0") == BetAnswer("t1.coup-1.b0", True)
    before = last_id(app)
    resend = PlaceBet(**{**bet("t1.coup-1.b0").model_dump(), **GOLDEN_B0})
    assert app.place_bet(resend) == BetAnswer("t1.coup-1.b0", True, repeated=True)
    assert last_id(app) == before
    other = PlaceBet(**{**resend.model_dump(), "amount": 4503})
    assert app.place_bet(other).reason_code == "DUPLICATE_BET_ID"
    app.close()
    again = settlement_app(env=env)
    assert bet_index_store.index_old_answers(again) == 0  # marked done: never again
    again.close()


ANSWER_TOPICS = ("BetBook.BetsAnswered", "BetDesk.BetRejected", "BetDesk.BetsHeld")

GOLDEN_B0 = {
    "table_id": "t1",
    "coup_id": "t1.coup-1",
    "bettor_id": "bettor-0",
    "bet_type": "player",
    "amount": 4502,
}
"""The first bet of the golden store (tests/fixtures/golden)."""


def test_indexing_an_older_store_resumes_where_a_stopped_start_left_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = sqlite_env(tmp_path / "s.sqlite")
    older_store(env, list(golden_rows("settlement")))
    monkeypatch.setattr(bet_index_store, "PAGE", 10)  # a unit per page of 10 notifications
    commits = 0
    record = SettlementApplication._record

    def stops_after_two_chunks(app: SettlementApplication, processing: Any) -> Any:
        nonlocal commits
        commits += 1
        if commits == 3:
            raise KeyboardInterrupt  # the process stopped midway
        return record(app, processing)

    monkeypatch.setattr(SettlementApplication, "_record", stops_after_two_chunks)
    with pytest.raises(KeyboardInterrupt):
        settlement_app(env=env)
    monkeypatch.setattr(SettlementApplication, "_record", record)
    reads: list[int] = []
    index = bet_index_store.index_old_answers
    monkeypatch.setattr(application, "index_old_answers", lambda a: reads.append(index(a)))
    app = settlement_app(env=env)
    assert app.bet_answer("t1.coup-1.b0") == BetAnswer("t1.coup-1.b0", True)
    answers = [r for r in golden_rows("settlement") if r["topic"].endswith(ANSWER_TOPICS)]
    assert reads == [len(answers) - 20]  # the first two chunks are not read again
    app.close()


def test_a_held_bets_id_changes_by_new_rows_never_by_changing_one(
    store_env: dict[str, str],
) -> None:
    """Held (version 1), refused NO_SUCH_COUP and free (2: no content), then used again (3):
    each state a row inserted, the highest version holding."""
    app = settlement_app(env=store_env)
    dealing = open_table(app, "c1")
    line = held_line("c2", "h1", "alice", "banker", "500", "EUR", PLACED_AT)
    hold_as_before(app, [line])
    [held] = rows(app, "h1")["h1"]
    assert held[2:] == (1, held[3], False, None, "", True)
    dealing.close_betting("c1")
    dealing.open_betting("c2", number=2)  # the held bet is refused: its id free again
    assert app.bet_answer("h1") is None
    assert app.place_bet(bet("h1", coup_id="c2", bettor_id="bob")).accepted
    found = sorted(rows(app, "h1")["h1"], key=lambda row: row[2])
    assert [row[2] for row in found] == [1, 2, 3]
    assert found[1][3:] == (None, False, None, "", False)  # freed
    assert found[0] == held and found[2][3].startswith('["t1", "c2", "bob"')
    app.close()


def test_a_batchs_lookup_searches_the_tables_key_and_never_scans_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lookup's cost does not grow with the bets answered before (a scan of the table
    per batch would)."""
    path = tmp_path / "s.sqlite"
    app = settlement_app(env=sqlite_env(path))
    open_table(app, "c1")
    statements = trace_sqlite(monkeypatch)
    looked_up = settlement_app(env=sqlite_env(path))
    looked_up.handle_batch([bet("b1"), bet("b2", bettor_id="bob"), bet("b3", bettor_id="al")], None)
    [lookup] = [s for s in statements if "bet_ids" in s and s.startswith("WITH")]
    plan = [row[3] for row in sqlite3.connect(path).execute("EXPLAIN QUERY PLAN " + lookup)]
    assert "SEARCH t USING PRIMARY KEY (operator=? AND bet_id=?)" in plan
    assert not [step for step in plan if step.startswith("SCAN t")]
    app.close()
    looked_up.close()


def prepared(app: SettlementApplication) -> list[str]:
    """The statements the store's SQLite connection holds prepared (``sqlite_stmt``)."""
    with app.recorder.datastore.transaction(commit=False) as cursor:  # type: ignore[attr-defined]
        cursor.execute("SELECT sql FROM sqlite_stmt")
        return [row[0] for row in cursor.fetchall()]


def test_the_stores_statements_are_parsed_once_and_lookups_of_like_sizes_share_one(
    tmp_path: Path,
) -> None:
    """The connection keeps its prepared statements (eventsourcing's kept one: each was parsed
    again every time), and a lookup of 3 bet ids is the statement of 4 (padded with NULLs)."""
    app = settlement_app(env={**sqlite_env(tmp_path / "s.sqlite"), "SQLITE_LOCK_TIMEOUT": "10"})
    open_table(app, "c1")
    app.handle_batch([bet(f"a{n}", bettor_id=f"p{n}") for n in range(3)], None)
    app.handle_batch([bet(f"b{n}", bettor_id=f"q{n}") for n in range(4)], None)
    held = prepared(app)
    lookups = [s for s in held if s.startswith("WITH") and "bet_ids" in s]
    assert len(lookups) == 1 and lookups[0].count("(?,?)") == 4
    assert [s for s in held if s.startswith("INSERT INTO stored_events")]
    assert [s for s in held if s.startswith("INSERT INTO bet_ids")]
    assert len(rows(app, "a0", "a1", "a2", "b3", "zz")) == 4  # 5 keys, 3 NULL: what they say
    with app.recorder.datastore.transaction(commit=False) as cursor:  # type: ignore[attr-defined]
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0] == "wal"  # the connection is set up as eventsourcing's
        cursor.execute("PRAGMA busy_timeout")
        assert cursor.fetchone()[0] == 10_000  # SQLITE_LOCK_TIMEOUT's 10 s
    app.close()
