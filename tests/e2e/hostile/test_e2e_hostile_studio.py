"""Hostile input at a studio table, end to end (the simulated shoe, the device bridge, real
Kafka, the services as subprocesses): a bridge's key forges no read of another table, and the
bridge's reads replayed (byte for byte, or under new relay headers) have no second effect."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime
from pathlib import Path

from contracts import (
    STUDIO_READS,
    BettingClosed,
    CardDrawn,
    CardsBurned,
    CoupResolved,
    DeadLetter,
    Message,
    OpenTable,
    StudioRead,
)
from services.dev.demo.processes import SERVICES, ServiceSettings
from services.shared.platform.settings import Settings
from services.studio.simulator import Device, LoopbackServer
from services.tools.admin.keys import init_keys
from tests.e2e.helpers import LIMITS, assert_books_clean, new_table_id, wait
from tests.e2e.hostile.attacker import HostileSystem

BRIDGE = "studio-bridge"


def studio_table(table_id: str) -> OpenTable:
    return OpenTable(
        table_id=table_id,
        decks=1,
        limits=LIMITS,
        currency="EUR",
        betting_window_ms=200,
        cut_card_from_end=20,
        card_source="studio",
    )


async def test_a_bridge_key_forges_no_read_of_another_table_and_replays_change_nothing(
    system_settings: ServiceSettings, tmp_path: Path
) -> None:
    dealt, other = new_table_id(), new_table_id()
    device = Device(decks=1, cut_card_from_end=20, source=random.Random(11))
    async with LoopbackServer(device, pace=0.005, heartbeat=0.5) as server:
        settings = dataclasses.replace(
            system_settings,
            extra={
                **system_settings.extra,
                "PB_STUDIO_TABLE": dealt,
                "PB_STUDIO_DEVICE_PORT": str(server.port),
            },
        )
        data_dir = settings.data_dir.resolve()
        init_keys(Settings(service=BRIDGE, data_dir=data_dir), [BRIDGE], [dealt])  # its table's
        hostile = HostileSystem(settings, tmp_path / "logs", (*SERVICES, BRIDGE))

        async def dealer(message: Message) -> None:
            if isinstance(message, BettingClosed) and message.table_id == dealt:
                server.release()

        hostile.reactors.append(dealer)
        try:
            await hostile.start(ready_timeout=90)
            for table_id in (dealt, other):
                await hostile.sender.send_now(studio_table(table_id))

            def resolved() -> list[CoupResolved]:
                return [m for m in hostile.seen(CoupResolved) if m.table_id == dealt]

            await wait(hostile, lambda: len(resolved()) >= 2, 90, "two coups dealt")
            # The bridge's key, stolen, signs a read of the other studio table: refused.
            forged = StudioRead(
                table_id=other, device="shoe-1", seq=1, what="shoe-in", read_at=datetime.now(UTC)
            )
            await hostile.attacker.forge(forged, stolen_key=True)

            def refused() -> list[DeadLetter]:
                return [
                    m
                    for m in hostile.seen(DeadLetter)
                    if m.original_topic.endswith(STUDIO_READS) and m.table_id == other
                ]

            await wait(hostile, refused, 60, "the forged read refused")
            assert f"signs for tables ['{dealt}'] only" in refused()[0].error
            # The bridge's reads again, byte for byte and under new relay headers.
            await hostile.attacker.catch_up()
            reads = hostile.attacker.seen(STUDIO_READS, key=dealt.encode())
            assert len(reads) > 20
            cards = {m.event_id for m in hostile.seen(CardDrawn) if m.table_id == dealt}
            for raw in reads:
                await hostile.attacker.send(
                    STUDIO_READS, raw.value, key=raw.key, headers=raw.headers
                )
                headers = await hostile.attacker.relay_headers(STUDIO_READS, "StudioRead")
                await hostile.attacker.send(STUDIO_READS, raw.value, key=raw.key, headers=headers)

            def resigned() -> list[DeadLetter]:
                return [m for m in hostile.seen(DeadLetter) if m.table_id == dealt]

            await wait(hostile, lambda: len(resigned()) == len(reads), 60, "replays refused")
            done = len(resolved())
            await wait(hostile, lambda: len(resolved()) > done, 60, "the table dealing on")
        finally:
            await hostile.stop(timeout=15)
    again = {m.event_id for m in hostile.seen(CardDrawn) if m.table_id == dealt}
    assert cards <= again  # the cards dealt before the replays, each once: nothing dealt twice
    positions = [m.position for m in hostile.seen(CardDrawn) if m.table_id == dealt]
    assert len(set(positions)) == len(
        {m.event_id for m in hostile.seen(CardDrawn) if m.table_id == dealt}
    )
    assert not [m for m in hostile.seen(CardsBurned) if m.table_id == other]
    assert_books_clean(hostile.ledger)
