"""The cap on a coup's bets through the running service: PB_MAX_BETS_PER_COUP from its settings,
bets over real Kafka, the BOOK_FULL answers published on bet-events; each operator's share."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from contracts import (
    BET_COMMANDS,
    BET_EVENTS,
    TABLE_EVENTS,
    BetAccepted,
    BetRejected,
    PlaceBet,
    bet_commands_topic,
    bet_events_topic,
)
from services.dev.bench.settle_in_process import open_book, table_opened
from services.settlement.service import build_service
from tests.integration.platform.kafka_tools import send_messages, settings_for
from tests.integration.settlement.test_settlement_kafka import TopicReader, open_for_bets

pytestmark = [pytest.mark.kafka]


def bets(table: str, coup: str, prefix: str, count: int) -> list[PlaceBet]:
    """``count`` bets of 100 on Player, ids ``<prefix>-<n>``, each of its own bettor."""
    return [
        PlaceBet(
            table_id=table,
            bet_id=f"{prefix}-{n}",
            coup_id=coup,
            bettor_id=f"bettor-{n}",
            bet_type="player",
            amount=100,
            currency="EUR",
        )
        for n in range(count)
    ]


async def test_the_service_accepts_up_to_its_cap_and_answers_book_full_beyond(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    settings = settings_for("settlement", kafka_bootstrap, data_dir=tmp_path, max_bets_per_coup=3)
    table, coup = "capped-1", "capped-1.coup-1"
    async with build_service(settings) as host:
        await host.wait_ready()
        async with TopicReader(settings, BET_EVENTS) as bet_events:
            await open_for_bets(settings, table, coup)
            await send_messages(settings, BET_COMMANDS, bets(table, coup, "bet", 5))
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


async def test_one_operators_flood_leaves_another_operators_share_over_kafka(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """acme's gateway floods a coup capped at 4: half of the places stay bravo's."""
    operators = ("acme", "bravo")
    settings = settings_for(
        "settlement",
        kafka_bootstrap,
        data_dir=tmp_path,
        max_bets_per_coup=4,
        operators=operators,
    )
    table, coup = "shared-1", "shared-1.coup-1"
    closes_at = datetime.now(UTC) + timedelta(minutes=5)
    async with build_service(settings) as host:
        await host.wait_ready()
        async with (
            TopicReader(settings, bet_events_topic("acme")) as acme,
            TopicReader(settings, bet_events_topic("bravo")) as bravo,
        ):
            await send_messages(settings, TABLE_EVENTS, [table_opened(table)])
            for operator in operators:
                book = open_book(table, coup, "s1", closes_at)
                await send_messages(settings, bet_commands_topic(operator), [book])
            for operator, count in (("acme", 6), ("bravo", 2)):
                placed = bets(table, coup, operator, count)
                await send_messages(settings, bet_commands_topic(operator), placed)
            await acme.wait_until(lambda: len(acme.messages) >= 6, timeout=60)
            await bravo.wait_until(lambda: len(bravo.messages) >= 2, timeout=60)
    assert [m.bet_id for m in acme.of_type(BetAccepted)] == ["acme-0", "acme-1"]
    assert {m.reason_code for m in acme.of_type(BetRejected)} == {"BOOK_FULL"}
    assert [m.bet_id for m in bravo.of_type(BetAccepted)] == ["bravo-0", "bravo-1"]
