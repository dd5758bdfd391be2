"""Settlement over real Kafka judges a bet by the broker's append time, not the client's."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from contracts import (
    BET_COMMANDS,
    BET_EVENTS,
    TABLE_EVENTS,
    BetAccepted,
    BetLimitSpec,
    BetRejected,
    OpenBook,
    PlaceBet,
    TableOpened,
)
from services.settlement.service import build_service
from services.shared.platform.kafka import ensure_topics
from tests.integration.platform.kafka_tools import (
    as_admin,
    read_topic,
    send_messages,
    settings_for,
)

pytestmark = [pytest.mark.kafka]

BET_TYPES = ["player", "banker", "tie", "player_pair", "banker_pair"]
WINDOW_MS = 8000


def place(bet_id: str, bettor: str, occurred_at: datetime) -> PlaceBet:
    return PlaceBet(
        occurred_at=occurred_at,
        table_id="t1",
        bet_id=bet_id,
        coup_id="c1",
        bettor_id=bettor,
        bet_type="player",
        amount=1000,
        currency="EUR",
    )


async def test_a_backdated_bet_appended_after_the_close_is_refused(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = settings_for("settlement", kafka_bootstrap, data_dir=tmp_path)
    async with build_service(settings) as host:
        await host.wait_ready()
        await send_messages(
            settings,
            TABLE_EVENTS,
            [
                TableOpened(
                    table_id="t1",
                    decks=8,
                    paytable="standard",
                    limits={t: BetLimitSpec(minimum=100, maximum=50_000) for t in BET_TYPES},
                    currency="EUR",
                    betting_window_ms=WINDOW_MS,
                    cut_card_from_end=16,
                ),
            ],
        )
        await ensure_topics(as_admin(settings), [BET_COMMANDS])
        # The window leaves the in-time bet's one send (an admin client and a producer
        # logging in, on a loaded machine) ample time; the late one waits it out below.
        closes_at = datetime.now(UTC) + timedelta(milliseconds=WINDOW_MS)
        await send_messages(
            settings,
            BET_COMMANDS,
            [
                # Dealing's mark opening the coup's book, in the bets' partition.
                OpenBook(
                    table_id="t1",
                    coup_id="c1",
                    coup_number=1,
                    shoe_id="s1",
                    closes_at=closes_at,
                    paytable="standard",
                    limits={t: BetLimitSpec(minimum=100, maximum=50_000) for t in BET_TYPES},
                    currency="EUR",
                ),
                # In time, though the client's clock says it is after the close.
                place("in-time", "alice", closes_at + timedelta(hours=1)),
            ],
        )
        await asyncio.sleep(max(0.0, (closes_at - datetime.now(UTC)).total_seconds()) + 0.2)
        # No CloseBook mark yet: the append time alone decides.
        await send_messages(
            settings, BET_COMMANDS, [place("late", "bob", closes_at - timedelta(minutes=1))]
        )
        records = await read_topic(settings, BET_EVENTS, lambda r: len(r) >= 2)
    answers: dict[str, BetAccepted | BetRejected] = {}
    for record in records:
        message = record.message(BET_EVENTS)
        assert isinstance(message, BetAccepted | BetRejected)
        answers[message.bet_id] = message
    in_time, late = answers["in-time"], answers["late"]
    assert isinstance(in_time, BetAccepted)
    assert in_time.placed_at is not None and in_time.placed_at < closes_at
    assert isinstance(late, BetRejected) and late.reason_code == "BETTING_CLOSED"
    assert late.placed_at is not None and late.placed_at >= closes_at
