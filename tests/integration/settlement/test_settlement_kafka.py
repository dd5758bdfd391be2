"""Shoe, dealing and settlement over real Kafka with real stores: bets settled exactly once."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from contracts import (
    BET_COMMANDS,
    BET_EVENTS,
    COMMAND_EVENTS,
    TABLE_COMMANDS,
    TABLE_EVENTS,
    BetAccepted,
    BetLimitSpec,
    BetRejected,
    BetSettled,
    BettingOpened,
    CommandRejected,
    CoupResolved,
    CoupSettled,
    Message,
    OpenTable,
    PlaceBet,
    VoidCoup,
    decode,
)
from services.dealing.service import build_service as build_dealing
from services.dev.bench.settle_in_process import open_book, table_opened
from services.settlement.service import build_service as build_settlement
from services.shared.platform.host import KafkaService
from services.shared.platform.kafka import client_options, ensure_topics
from services.shared.platform.settings import Settings
from services.shoe.service import build_service as build_shoe
from tests.integration.platform.kafka_tools import as_admin, send_messages, settings_for
from tests.payout_oracle import OFFERED
from tests.unit.settlement.harness import expected_returned

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

BET_TYPES = ["player", "banker", "tie", "player_pair", "banker_pair"]


async def open_for_bets(settings: Settings, table: str, coup: str) -> None:
    """Dealing's part before bets: the table opened, the coup's book open for five minutes."""
    await send_messages(settings, TABLE_EVENTS, [table_opened(table)])
    closes_at = datetime.now(UTC) + timedelta(minutes=5)
    book = open_book(table, coup, "s1", closes_at, maximum=10**6)
    await send_messages(settings, BET_COMMANDS, [book])


class TopicReader:
    """Reads a topic from the beginning in the background, decoding every message."""

    def __init__(self, settings: Settings, logical_topic: str, *, decoded: bool = True) -> None:
        self.settings = settings
        self.logical = logical_topic
        self.decoded = decoded
        self.messages: list[Message] = []
        self.raw: list[bytes] = []
        self.new = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> TopicReader:
        consumer = AIOKafkaConsumer(
            **client_options(as_admin(self.settings)),
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            group_id=None,
        )
        await consumer.start()
        topic = self.settings.topic(self.logical)
        partitions = consumer.partitions_for_topic(topic)
        while not partitions:
            await consumer._client.force_metadata_update()
            partitions = consumer.partitions_for_topic(topic)
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        self._consumer = consumer
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        while True:
            batch = await self._consumer.getmany(timeout_ms=100)
            for records in batch.values():
                for record in records:
                    if self.decoded:
                        self.messages.append(decode(self.logical, record.value))
                    else:
                        self.raw.append(record.value)
            if batch:
                self.new.set()

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._consumer.stop()

    def of_type(self, kind: type[Any]) -> list[Any]:
        return [m for m in self.messages if isinstance(m, kind)]

    def count_raw(self, type_name: str) -> int:
        """Messages of this type seen (for a reader made with ``decoded=False``)."""
        marker = f'"type":"{type_name}"'.encode()
        return sum(1 for value in self.raw if marker in value)

    async def wait_until(self, check: Any, timeout: float = 60.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not check():
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise AssertionError(f"{self.logical}: condition not met in {timeout:.0f} s")
            self.new.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.new.wait(), min(remaining, 0.5))


@contextlib.asynccontextmanager
async def running_table(
    tmp_path: Path, kafka_bootstrap: str, postgres_env: dict[str, str] | None
) -> AsyncIterator[Settings]:
    """Shoe, dealing and settlement hosts sharing one topic prefix; yields dealing's settings."""
    base = settings_for("dealing", kafka_bootstrap, data_dir=tmp_path, postgres_env=postgres_env)
    prefix = base.topic_prefix.rstrip(".")

    def settings(name: str) -> Settings:
        return settings_for(
            name, kafka_bootstrap, data_dir=tmp_path, postgres_env=postgres_env, prefix=prefix
        )

    shoe, dealing, settlement = settings("shoe"), settings("dealing"), settings("settlement")
    hosts: list[KafkaService[Any]] = [
        build_shoe(shoe),
        build_dealing(dealing),
        build_settlement(settlement),
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


def table_command(bet_types: list[str] = BET_TYPES, **fields: Any) -> OpenTable:
    return OpenTable(
        table_id="vip-1",
        decks=1,
        limits={t: BetLimitSpec(minimum=100, maximum=50_000) for t in bet_types},
        currency="EUR",
        **fields,
    )


@pytest.mark.parametrize(
    ("store", "paytable"),
    [
        ("sqlite", "no-commission"),
        pytest.param("postgres", "ez-baccarat", marks=pytest.mark.postgres),
    ],
)
async def test_bettors_play_coups_and_every_accepted_bet_is_settled_once(
    tmp_path: Path, kafka_bootstrap: str, request: pytest.FixtureRequest, store: str, paytable: str
) -> None:
    """A table of each commission-free paytable, with every bet type it offers (its side
    bets): each accepted bet settled once, for the amount the cards give (the tests' oracle)."""
    offered = OFFERED[paytable]
    postgres = request.getfixturevalue("postgres_env") if store == "postgres" else None
    async with (
        running_table(tmp_path, kafka_bootstrap, postgres) as settings,
        TopicReader(settings, TABLE_EVENTS) as table_events,
        TopicReader(settings, COMMAND_EVENTS) as command_events,
        TopicReader(settings, BET_EVENTS) as bet_events,
    ):
        await send_messages(
            settings,
            TABLE_COMMANDS,
            [
                table_command(
                    offered, paytable=paytable, betting_window_ms=1500, cut_card_from_end=14
                )
            ],
        )
        rng = random.Random(4)
        coups_bet_on: list[str] = []
        sent = 0
        while len(coups_bet_on) < 4:
            await table_events.wait_until(
                lambda: len(table_events.of_type(BettingOpened)) > len(coups_bet_on)
            )
            coup = table_events.of_type(BettingOpened)[len(coups_bet_on)]
            coups_bet_on.append(coup.coup_id)
            bets = []
            for n in range(60):
                bettor = f"bettor-{rng.randrange(15)}"
                bets.append(
                    PlaceBet(
                        table_id="vip-1",
                        bet_id=f"{coup.coup_id}/{n}",
                        coup_id=coup.coup_id,
                        bettor_id=bettor,
                        bet_type=rng.choice([*offered, "dragon"]),
                        amount=rng.choice([50, 100, 2500, 10_000, 60_000]),
                        currency="EUR",
                    )
                )
            bets.append(bets[0])  # a resend: answered once
            sent += len(bets) - 1
            await send_messages(settings, BET_COMMANDS, bets)
        await send_messages(
            settings, TABLE_COMMANDS, [VoidCoup(table_id="vip-1", coup_id=coups_bet_on[0])]
        )
        await bet_events.wait_until(
            lambda: {m.coup_id for m in bet_events.of_type(CoupSettled)} >= set(coups_bet_on)
        )
        await command_events.wait_until(lambda: command_events.of_type(CommandRejected) != [])

        answers = Counter(
            m.bet_id for m in bet_events.messages if isinstance(m, BetAccepted | BetRejected)
        )
        assert len(answers) == sent and set(answers.values()) == {1}
        resolved = {m.coup_id: m for m in table_events.of_type(CoupResolved)}
        accepted = {m.bet_id: m for m in bet_events.of_type(BetAccepted)}
        settled = [m for m in bet_events.of_type(BetSettled) if m.coup_id in coups_bet_on]
        assert Counter(m.bet_id for m in settled) == Counter(list(accepted))  # each exactly once
        assert len(accepted) > 50
        for message in settled:
            placed = accepted[message.bet_id]
            assert message.returned == expected_returned(
                placed.bet_type, placed.amount, resolved[message.coup_id], paytable
            )
        assert len({m.bet_type for m in settled} - set(BET_TYPES)) >= 5  # side bets settled
        rejected = command_events.of_type(CommandRejected)
        assert table_events.of_type(CommandRejected) == []  # not for the gateways' eyes
        assert [r.reason_code for r in rejected] == ["SUPERVISOR_REQUIRED"]
