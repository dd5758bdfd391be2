"""The cap on a coup's bets through the running service: PB_MAX_BETS_PER_COUP from its settings,
bets over real Kafka, the BOOK_FULL answers published on bet-events."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts import (
    BET_COMMANDS,
    BET_EVENTS,
    BetAccepted,
    BetRejected,
    PlaceBet,
)
from services.settlement.service import build_service
from services.shared.platform import ServiceHost
from tests.integration.platform.kafka_tools import send_messages, settings_for
from tests.integration.settlement.test_settlement_kafka import TopicReader, open_for_bets

pytestmark = [pytest.mark.kafka]


async def test_the_service_accepts_up_to_its_cap_and_answers_book_full_beyond(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    settings = settings_for("settlement", kafka_bootstrap, data_dir=tmp_path, max_bets_per_coup=3)
    table, coup = "capped-1", "capped-1.coup-1"
    async with ServiceHost(build_service(settings), settings) as host:
        await host.wait_ready()
        async with TopicReader(settings, BET_EVENTS) as bet_events:
            await open_for_bets(settings, table, coup)
            bets = [
                PlaceBet(
                    table_id=table,
                    bet_id=f"bet-{n}",
                    coup_id=coup,
                    bettor_id=f"bettor-{n}",
                    bet_type="player",
                    amount=100,
                    currency="EUR",
                )
                for n in range(5)
            ]
            await send_messages(settings, BET_COMMANDS, bets)
            await bet_events.wait_until(lambda: len(bet_events.messages) >= 5, timeout=60)
            book = await host.worker.call(host.app.get_book, table, coup)
    accepted = [m.bet_id for m in bet_events.of_type(BetAccepted)]
    refused = {m.bet_id: m for m in bet_events.of_type(BetRejected)}
    assert accepted == ["bet-0", "bet-1", "bet-2"]
    assert sorted(refused) == ["bet-3", "bet-4"]
    for rejected in refused.values():
        assert rejected.reason_code == "BOOK_FULL"
        assert rejected.message.startswith(f"coup {coup} already holds 3 bets")
    assert book is not None and book.bet_count == 3
