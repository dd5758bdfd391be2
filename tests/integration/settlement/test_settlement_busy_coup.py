"""A busy coup over real Kafka: 10,000 bets, then CoupResolved -> every BetSettled published.

Benchmark-style: it asserts correctness and prints the time (``-s`` to see it);
the timing itself is not asserted, a loaded CI machine must not fail it.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from contracts import (
    BET_COMMANDS,
    BET_EVENTS,
    SHOE_EVENTS,
    TABLE_EVENTS,
    BetSettled,
    CoupSettled,
    PlaceBet,
)
from services.dev.bench.settle_in_process import (
    close_book,
    player_natural,
    shoe_cards,
)
from services.settlement.domain import BookStatus
from services.settlement.service import build_service
from tests.integration.platform.kafka_tools import send_messages, settings_for
from tests.integration.settlement.test_settlement_kafka import (
    BET_TYPES,
    TopicReader,
    open_for_bets,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

BETS = 10_000


async def test_ten_thousand_bets_are_settled_after_coup_resolved(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    settings = settings_for("settlement", kafka_bootstrap, data_dir=tmp_path)
    table, coup = "busy-1", "busy-1.coup-1"
    async with build_service(settings) as host:
        await host.wait_ready()
        async with TopicReader(settings, BET_EVENTS, decoded=False) as bet_events:
            await open_for_bets(settings, table, coup)
            bets = [
                PlaceBet(
                    table_id=table,
                    bet_id=f"bet-{n}",
                    coup_id=coup,
                    bettor_id=f"bettor-{n}",
                    bet_type=BET_TYPES[n % len(BET_TYPES)],
                    amount=100 + n % 900,
                    currency="EUR",
                )
                for n in range(BETS)
            ]
            started = time.perf_counter()
            await send_messages(settings, BET_COMMANDS, bets)
            await bet_events.wait_until(
                lambda: bet_events.count_raw("BetAccepted") == BETS, timeout=120
            )
            accepting = time.perf_counter() - started
            await send_messages(settings, BET_COMMANDS, [close_book(table, coup)])
            await send_messages(settings, SHOE_EVENTS, shoe_cards(table, coup, "s1"))
            resolved = player_natural(table, coup, shoe_id="s1")
            relay = host.relay
            assert relay is not None
            published_before = relay.published
            sent_at = time.perf_counter()
            await send_messages(settings, TABLE_EVENTS, [resolved])
            recorded_at = published_at = None
            while published_at is None and time.perf_counter() - sent_at < 60:
                book = await host.worker.call(host.app.get_book, table, coup)
                if recorded_at is None and book is not None and book.status is BookStatus.SETTLED:
                    recorded_at = time.perf_counter() - sent_at
                if relay.published - published_before >= BETS + 1:
                    published_at = time.perf_counter() - sent_at
                await asyncio.sleep(0.005)
            await bet_events.wait_until(lambda: bet_events.count_raw("CoupSettled") == 1, 60)
            received_at = time.perf_counter() - sent_at
    settled = [BetSettled.model_validate_json(v) for v in bet_events.raw if b'"BetSettled"' in v]
    assert len({m.bet_id for m in settled}) == BETS
    (total,) = [CoupSettled.model_validate_json(v) for v in bet_events.raw if b'"CoupSettled"' in v]
    assert total.bets == BETS
    assert total.staked == sum(100 + n % 900 for n in range(BETS))
    assert recorded_at is not None and published_at is not None
    print(
        f"\n{BETS} bets accepted in {accepting:.2f} s; after CoupResolved was sent: "
        f"all settled in the store {recorded_at * 1000:.0f} ms, all {BETS + 1} messages "
        f"published (acked) {published_at * 1000:.0f} ms, CoupSettled read back "
        f"{received_at * 1000:.0f} ms"
    )
