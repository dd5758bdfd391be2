"""Operators (B2B) over real Kafka: two operators' gateways bet at one table, each on its
own bet-commands topic, and each reads only its own answers and settlements on its own
bet-events topic; every accepted bet is settled exactly once."""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from contracts import (
    BOOK_EVENTS,
    TABLE_COMMANDS,
    TABLE_EVENTS,
    BetAccepted,
    BetRejected,
    BetsClosed,
    BetSettled,
    BettingOpened,
    CoupResolved,
    CoupSettled,
    PlaceBet,
    bet_commands_topic,
    bet_events_topic,
)
from services.dealing.service import build_service as build_dealing
from services.settlement.service import build_service as build_settlement
from services.shared.platform.host import KafkaService
from services.shared.platform.kafka import ensure_topics
from services.shared.platform.settings import Settings
from services.shoe.service import build_service as build_shoe
from tests.integration.platform.kafka_tools import send_messages, settings_for
from tests.integration.settlement.test_settlement_kafka import TopicReader, table_command
from tests.unit.settlement.harness import expected_returned

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

OPERATORS = ("acme", "bravo")
BET_TYPES = ["player", "banker", "tie", "player_pair", "banker_pair"]


@contextlib.asynccontextmanager
async def two_operators_table(tmp_path: Path, kafka_bootstrap: str) -> AsyncIterator[Settings]:
    """Shoe, dealing and settlement serving OPERATORS (PB_OPERATORS) under one prefix."""
    base = settings_for("dealing", kafka_bootstrap, data_dir=tmp_path, operators=OPERATORS)
    prefix = base.topic_prefix.rstrip(".")

    def settings(name: str) -> Settings:
        return settings_for(
            name, kafka_bootstrap, data_dir=tmp_path, prefix=prefix, operators=OPERATORS
        )

    hosts: list[KafkaService[Any]] = [
        build_shoe(settings("shoe")),
        build_dealing(settings("dealing")),
        build_settlement(settings("settlement")),
    ]
    await ensure_topics(base)
    try:
        for host in hosts:
            await host.start()
        for host in hosts:
            await host.wait_ready()
        yield base
    finally:
        for host in reversed(hosts):
            await host.stop()


async def test_two_operators_bet_at_one_table_and_each_reads_only_its_own_answers(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    async with (
        two_operators_table(tmp_path, kafka_bootstrap) as settings,
        TopicReader(settings, TABLE_EVENTS) as table_events,
        TopicReader(settings, BOOK_EVENTS) as book_events,
        TopicReader(settings, bet_events_topic("acme")) as acme_events,
        TopicReader(settings, bet_events_topic("bravo")) as bravo_events,
    ):
        readers = {"acme": acme_events, "bravo": bravo_events}
        await send_messages(
            settings, TABLE_COMMANDS, [table_command(betting_window_ms=1500, cut_card_from_end=14)]
        )
        rng = random.Random(7)
        coups: list[str] = []
        sent: dict[str, list[PlaceBet]] = {op: [] for op in OPERATORS}
        while len(coups) < 3:
            await table_events.wait_until(
                lambda: len(table_events.of_type(BettingOpened)) > len(coups)
            )
            coup = table_events.of_type(BettingOpened)[len(coups)]
            coups.append(coup.coup_id)
            for operator in OPERATORS:  # the same bet ids at both operators
                bets = [
                    PlaceBet(
                        table_id="vip-1",
                        bet_id=f"{coup.coup_id}/{n}",
                        coup_id=coup.coup_id,
                        bettor_id=f"bettor-{rng.randrange(6)}",
                        bet_type=rng.choice(BET_TYPES),
                        amount=rng.choice([100, 2500, 10_000]),
                        currency="EUR",
                    )
                    for n in range(20)
                ]
                squat = bets[0].model_copy(update={"amount": 4321})  # its own id, reused
                sent[operator] += bets
                await send_messages(settings, bet_commands_topic(operator), [*bets, squat])
        for reader in readers.values():
            await reader.wait_until(
                lambda reader=reader: (
                    {m.coup_id for m in reader.of_type(CoupSettled)} >= set(coups)
                ),
                timeout=90,
            )

        resolved = {m.coup_id: m for m in table_events.of_type(CoupResolved)}
        for coup_id in coups:  # dealing dealt each coup once, after its book closed
            assert [m.coup_id for m in book_events.of_type(BetsClosed)].count(coup_id) == 1
        for operator, reader in readers.items():
            assert {m.operator for m in reader.messages} == {operator}  # only its own
            answers = [m for m in reader.messages if isinstance(m, BetAccepted | BetRejected)]
            duplicates = [
                m for m in reader.of_type(BetRejected) if m.reason_code == "DUPLICATE_BET_ID"
            ]
            assert len(duplicates) == len(coups)  # each squat refused, within the operator
            first = Counter(m.bet_id for m in answers if m not in duplicates)
            assert first == Counter(b.bet_id for b in sent[operator])  # each answered once
            accepted = {m.bet_id: m for m in reader.of_type(BetAccepted)}
            assert len(accepted) > 10
            settled = [m for m in reader.of_type(BetSettled) if m.coup_id in coups]
            assert Counter(m.bet_id for m in settled) == Counter(list(accepted))  # exactly once
            for message in settled:
                placed = accepted[message.bet_id]
                assert message.returned == expected_returned(
                    placed.bet_type, placed.amount, resolved[message.coup_id]
                )
            totals = [m for m in reader.of_type(CoupSettled) if m.coup_id in coups]
            assert sorted(m.coup_id for m in totals) == sorted(coups)  # one per coup
            assert sum(m.bets for m in totals) == len(settled)
