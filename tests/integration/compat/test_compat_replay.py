"""Golden and legacy stores replayed from SQLite files after a restart."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID

import pytest
from eventsourcing.application import Application

from services.dealing.domain import Coup, coup_aggregate_id
from services.settlement.application import SettlementApplication
from services.settlement.domain import BetDesk
from tests.unit.compat.golden import (
    APPLICATIONS,
    GOLDEN_SETS,
    SERVICES,
    app_env,
    golden_rows,
    in_memory,
    legacy_rows,
    stored,
)


def _sqlite(tmp_path: Path, service: str) -> dict[str, str]:
    return app_env(
        service,
        PERSISTENCE_MODULE="eventsourcing.sqlite",
        SQLITE_DBNAME=str(tmp_path / f"{service}.sqlite"),
    )


@pytest.mark.parametrize("prefix", GOLDEN_SETS)
@pytest.mark.parametrize("service", SERVICES)
def test_every_golden_and_legacy_aggregate_replays_after_a_restart(
    service: str, prefix: str, tmp_path: Path
) -> None:
    legacy = () if prefix else legacy_rows(service, replays=True)
    rows = golden_rows(service, prefix) + legacy
    env = _sqlite(tmp_path, service)
    first = APPLICATIONS[service](env=env)
    first.recorder.insert_events([stored(row) for row in rows])
    first.close()
    app = APPLICATIONS[service](env=env)  # starts on the store (settlement: its bet index)
    versions: dict[UUID, int] = {}
    for row in rows:
        versions[UUID(hex=row["originator_id"])] = row["version"]
    for aggregate_id, version in versions.items():
        assert app.repository.get(aggregate_id).version == version
    app.close()


def test_legacy_shapes_replay_with_what_their_upcasters_supply(tmp_path: Path) -> None:
    """A coup before OpenBook, books of the first settlement, a bet held on its own."""
    dealing = in_memory("dealing")
    coup_rows = [row for row in legacy_rows("dealing") if row["topic"].endswith(".BettingOpened")]
    dealing.recorder.insert_events([stored(row) for row in legacy_rows("dealing")])
    coup = dealing.repository.get(UUID(hex=coup_rows[0]["originator_id"]))
    assert isinstance(coup, Coup)
    assert coup.first_position is None and coup.is_finished
    assert coup.id != coup_aggregate_id(coup.table_id, coup.coup_id)  # a copy, apart

    env = _sqlite(tmp_path, "settlement")
    older = Application[UUID](env=env)  # a store an older settlement wrote: no bet-id records
    older.recorder.insert_events(
        [stored(row) for row in golden_rows("settlement") + legacy_rows("settlement", replays=True)]
    )
    older.close()
    settlement = SettlementApplication(env=env)  # its first start records the bet ids
    desk_row = next(r for r in legacy_rows("settlement") if r["topic"].endswith(".BetHeld"))
    desk = settlement.repository.get(UUID(hex=desk_row["originator_id"]))
    assert isinstance(desk, BetDesk) and desk.held == {}
    assert settlement.bet_answer("legacy-held-1") is None  # held, refused NO_SUCH_COUP: free
    books = {
        ("v2" if "closed_at" in json.loads(r["state"]) else "v1"): UUID(hex=r["originator_id"])
        for r in legacy_rows("settlement", replays=True)
        if r["topic"].endswith(".BettingClosed")
    }
    for closed, book_id in books.items():
        book = settlement.repository.get(book_id)
        assert book.coup_number is None and book.shoe_id is None  # BetBook.Opened v1
        assert (book.closed_at is None) is (closed == "v1")  # BettingClosed v1 knows no time
    settlement.close()
