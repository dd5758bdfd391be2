"""Settlement's bet-id table on a real PostgreSQL, as the service opens its store: with the
writer lease's fence on every write (``pg_store``).

An older store (answers, no table) gets its rows at the first start, through the fence; a
later start reads no answer of history; a resend is answered from the table (one batched
read); an instance that lost its lease inserts no bet id.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.application import Application
from eventsourcing.persistence import ProgrammingError

from services.settlement.application import SettlementApplication
from services.settlement.bet_index import BetAnswer
from services.shared.platform.settings import Settings
from services.shared.platform.store import BET_IDS, open_application, prepare_store, select_rows
from services.shared.platform.store.lease import PostgresLease
from services.shared.platform.store.postgres import FencedRecorder
from tests.unit.compat.golden import golden_rows, stored
from tests.unit.settlement.harness import Clock, Dealing, bet

pytestmark = pytest.mark.postgres

GOLDEN_B0 = ("t1.coup-1.b0", "t1", "t1.coup-1", "bettor-0", "player", 4502)
"""The first bet of the golden store (tests/fixtures/golden): id, table, coup, bettor, type,
amount."""


class OlderSettlement(Application[UUID]):
    """Writes rows where settlement's store has them (its tables are named after it)."""

    name = SettlementApplication.name


@pytest.fixture
def settings(postgres_env: dict[str, str]) -> Settings:
    """Settlement's settings on a schema of this test's own."""
    prefix = f"betids_{uuid.uuid4().hex[:8]}_"
    return Settings.from_env(
        "settlement",
        {**postgres_env, "PB_PERSISTENCE": "postgres", "PB_POSTGRES_SCHEMA_PREFIX": prefix},
    )


async def _lease(settings: Settings) -> PostgresLease:
    lease = PostgresLease(settings)
    assert await asyncio.wait_for(lease.acquire(asyncio.Event(), poll=0.05), 30)
    return lease


def _open(settings: Settings, lease: PostgresLease) -> SettlementApplication:
    def settlement(env: dict[str, str]) -> SettlementApplication:
        return SettlementApplication(env=env, clock=Clock())

    app = open_application(settlement, settings, lease.fence_env())
    assert isinstance(app.recorder, FencedRecorder) and app.recorder.fence is not None
    return app


def _resend_b0(app: SettlementApplication, amount: int = GOLDEN_B0[5]) -> BetAnswer:
    bet_id, table_id, coup_id, bettor_id, bet_type, _ = GOLDEN_B0
    return app.place_bet(
        bet(bet_id, coup_id, bettor_id, bet_type, amount=amount, table_id=table_id)
    )


async def test_an_older_store_is_indexed_through_the_fence_and_later_starts_read_no_history(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepare_store(settings)
    older = OlderSettlement(env=settings.eventsourcing_env())  # no bet-id table, no fence
    older.recorder.insert_events([stored(row) for row in golden_rows("settlement")])
    older.close()

    lease = await _lease(settings)
    app = _open(settings, lease)  # the first start inserts the old answers' bet ids
    [row] = select_rows(app.recorder, BET_IDS, [("house", GOLDEN_B0[0]), ("house", "none")])
    assert row[:3] == ("house", GOLDEN_B0[0], 1) and row[4:] == (True, None, "", False)
    dealing = Dealing(app, table_id="t2")
    dealing.open_table()
    dealing.open_betting("c1")
    bets = [bet(f"n{n}", bettor_id=f"p{n}", table_id="t2") for n in range(300)]
    for start in range(0, len(bets), 100):
        app.handle_batch(bets[start : start + 100], None)
    app.close()

    reads: list[Any] = []
    select = FencedRecorder.select_notifications
    monkeypatch.setattr(
        FencedRecorder,
        "select_notifications",
        lambda self, *a, **k: reads.append(a) or select(self, *a, **k),
    )
    again = _open(settings, lease)
    assert reads == [] and again.bet_ids.reads == 0 and len(again.bet_index) == 0
    before = again.recorder.max_notification_id()
    assert _resend_b0(again) == BetAnswer(GOLDEN_B0[0], True, repeated=True)
    assert again.bet_ids.reads == 1 and again.recorder.max_notification_id() == before
    assert _resend_b0(again, amount=4503).reason_code == "DUPLICATE_BET_ID"
    resent = bets[7]
    assert again.place_bet(resent) == BetAnswer(resent.bet_id, True, repeated=True)
    again.close()
    await lease.release()


async def test_an_instance_that_lost_its_lease_records_no_bet_id(settings: Settings) -> None:
    lease = await _lease(settings)
    app = _open(settings, lease)
    dealing = Dealing(app)
    dealing.open_table()
    dealing.open_betting("c1")
    await lease.release()  # the lease moves to another instance
    successor = await _lease(settings)
    with pytest.raises(ProgrammingError, match="no longer holds the writer lease"):
        app.place_bet(bet("b1"))
    app.close()
    after = _open(settings, successor)
    assert after.bet_answer("b1") is None
    assert after.place_bet(bet("b1")) == BetAnswer("b1", True)
    after.close()
    await successor.release()
