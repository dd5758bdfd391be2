"""Late bets and settled books on SQLite files and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.utils import get_topic

from contracts import BetRejected, Message
from services.settlement.application import SettlementApplication
from services.settlement.books import book_aggregate_id
from services.settlement.desk import BetDesk
from tests.unit.settlement.harness import bet, settlement_app
from tests.unit.settlement.test_settlement_finished_books import settled


def reads_of(app: SettlementApplication, monkeypatch: pytest.MonkeyPatch) -> list[UUID]:
    """The aggregate ids whose events the store is asked for from now on, once per read."""
    asked: list[UUID] = []
    select = app.recorder.select_events

    def counted(originator_id: UUID, *args: Any, **kwargs: Any) -> Any:
        asked.append(originator_id)
        return select(originator_id, *args, **kwargs)

    monkeypatch.setattr(app.recorder, "select_events", counted)
    return asked


def late_batches(count: int, size: int = 50) -> Iterator[list[Message]]:
    for batch in range(count):
        yield [bet(f"late-{batch}-{n}", bettor_id=f"q{n}") for n in range(size)]


def book_version(app: SettlementApplication) -> int:
    [last] = app.recorder.select_events(book_aggregate_id("t1", "c1"), desc=True, limit=1)
    return last.originator_version


def test_late_bets_read_and_write_nothing_of_their_settled_book(
    store_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    app = settlement_app(env=store_env)
    _, relay = settled(app)
    version = book_version(app)
    reads = reads_of(app, monkeypatch)
    for batch in late_batches(3):
        app.handle_batch(batch, None)
    assert book_aggregate_id("t1", "c1") not in reads  # not read, not replayed
    assert book_version(app) == version  # not one event longer
    answers = [m for m in relay.pump() if isinstance(m, BetRejected)]
    assert len(answers) == 150
    assert {(m.reason_code, m.message) for m in answers} == {
        (
            "BETTING_CLOSED",
            "betting on coup c1 is closed (the coup is resolved and settled); "
            "wait for the next BettingOpened",
        )
    }
    refusals = app.recorder.select_notifications(1, 1000, topics=[get_topic(BetDesk.BetsRefused)])
    assert len(refusals) == 3  # one event per batch on the table's desk
    app.close()


def test_after_a_restart_a_late_bet_reads_its_book_once_as_long_as_the_coup_made_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "s")}
    first = settlement_app(env=env)
    settled(first)
    version = book_version(first)
    for batch in late_batches(4):
        first.handle_batch(batch, None)
    first.close()
    again = settlement_app(env=env)
    reads = reads_of(again, monkeypatch)
    book = book_aggregate_id("t1", "c1")
    again.handle_batch([bet("after-1", bettor_id="r1")], None)
    again.handle_batch([bet("after-2", bettor_id="r2")], None)
    assert reads.count(book) == 1  # once, then what it needs is kept
    assert book_version(again) == version  # the late bets before made it no longer
    assert again.bet_answer("after-2") is not None
    assert again.bet_answer("after-2").reason_code == "BETTING_CLOSED"  # type: ignore[union-attr]
    again.close()
