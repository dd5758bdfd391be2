"""Dealing's answered commands kept in a durable store (SQLite, PostgreSQL) across restarts."""

from __future__ import annotations

import json
import pickle
from itertools import count
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.persistence import Tracking
from eventsourcing.utils import get_topic

from contracts import (
    CloseBetting,
    Message,
)
from services.dealing import rejections as refusals
from services.dealing.application import DealingApplication
from services.dealing.domain import (
    CommandRejections,
    rejections_aggregate_id,
)
from tests.integration.settlement.test_settlement_bet_ids import older_store, sqlite_env
from tests.unit.compat.golden import golden_rows


def events_read(app: DealingApplication, monkeypatch: pytest.MonkeyPatch) -> dict[UUID, int]:
    """Per aggregate id, the stored events read from now on (snapshots apart)."""
    read: dict[UUID, int] = {}
    select = app.recorder.select_events

    def counted(originator_id: UUID, *args: Any, **kwargs: Any) -> Any:
        found = select(originator_id, *args, **kwargs)
        read[originator_id] = read.get(originator_id, 0) + len(found)
        return found

    monkeypatch.setattr(app.recorder, "select_events", counted)
    return read


REJECTED = get_topic(CommandRejections.CommandRejected)


class Commands:
    """Table commands for a table id never opened (each refused NO_SUCH_TABLE), in batches,
    as the consumer hands them over."""

    def __init__(self, app: DealingApplication) -> None:
        self.app = app
        self.positions = count(1)

    def refuse(self, n: int, table_id: str = "x") -> list[Message]:
        batch: list[Message] = [CloseBetting(table_id=table_id, coup_id=f"c{i}") for i in range(n)]
        self.send(batch)
        return batch

    def send(self, batch: list[Message]) -> None:
        self.app.handle_batch(batch, Tracking("ops:table-commands:0", next(self.positions)))

    def answers(self) -> int:
        return len(self.app.recorder.select_notifications(1, 100_000, topics=[REJECTED]))


def test_a_refusal_costs_the_same_however_many_were_refused_before(
    store_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ids refused are rows read by id (a batch's in one query), not state: the table
    id's log of refusals copied by a unit is as small after 1,501 refusals as after one, and
    read cold it replays one snapshot interval of events at most."""
    commands = Commands(DealingApplication(env=store_env))
    commands.refuse(1)
    log = rejections_aggregate_id("x")
    small = len(pickle.dumps(commands.app.repository.get(log)))
    for _ in range(3):
        commands.refuse(500)
    assert len(pickle.dumps(commands.app.repository.get(log))) < small + 16  # its version's digits
    queries = commands.app.refused.reads
    commands.refuse(500)
    assert commands.app.refused.reads == queries + 1
    assert commands.answers() == 2001
    commands.app.close()
    commands.app = DealingApplication(env=store_env)  # cold: the log is read again
    read = events_read(commands.app, monkeypatch)
    commands.refuse(10)
    assert 0 < read[log] <= 500
    assert commands.answers() == 2011
    commands.app.close()


def test_a_refused_command_stays_answered_once_after_a_restart(
    store_env: dict[str, str],
) -> None:
    commands = Commands(DealingApplication(env=store_env))
    refused = commands.refuse(3)
    commands.app.close()
    commands.app = DealingApplication(env=store_env)
    commands.send([refused[1], refused[2], refused[1]])
    assert commands.answers() == 3
    commands.app.close()


def test_an_older_stores_refused_commands_stay_refused_once(tmp_path: Path) -> None:
    """An older dealing kept the ids refused in its log only: the first start gives them
    their rows, once; a resend is not answered again."""
    store_env = sqlite_env(tmp_path / "dealing.sqlite")
    rows = list(golden_rows("dealing"))
    older_store(store_env, rows)
    refused = [json.loads(r["state"]) for r in rows if r["topic"] == REJECTED]
    commands = Commands(DealingApplication(env=store_env))
    assert commands.answers() == len(refused) == 3
    [state] = [s for s in refused if s["command_type"] == "CloseBetting"]
    resent = CloseBetting(
        table_id=state["table_id"],
        coup_id="t1.coup-999",
        event_id=UUID(state["command_id"]["_data_"]),
    )
    commands.send([resent])
    assert commands.answers() == 3
    assert refusals.index_old_refusals(commands.app) == 0  # done once: never again
    commands.app.close()
