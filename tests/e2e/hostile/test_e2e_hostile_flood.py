"""One operator flooding another's coups, on the real broker with its quota (issue 20, item 5).

A coup's book closes only once settlement has read every operator's CloseBook, and settlement
reads every operator's bets in one consumer: an operator whose gateway floods its bet-commands
topic puts its own CloseBook behind a backlog, and every other operator's coup at that table
waits as long. The broker's quota on each gateway principal (``kafka_acls.GATEWAY_QUOTA``, sized
by docs/scaling.md's rule: the gateways' rates together below what settlement settles) keeps
that backlog from growing. Measured here: how late a coup's book closes (``BettingClosed`` ->
``BetsClosed``, the services' own stamps) while operator ``flood``'s gateway sends valid bets
at the coup as fast as the broker lets it, against the same table before the flood.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner

from contracts import (
    BOOK_EVENTS,
    HOUSE,
    TABLE_EVENTS,
    BetsClosed,
    BettingClosed,
    BettingOpened,
    PlaceBet,
    bet_commands_topic,
    encode,
)
from services.dev.demo.bus import EventFeed, operator_of
from services.dev.demo.processes import ServiceSettings
from services.dev.demo.system import LocalSystem
from services.dev.infra.kafka_clients import AUDITOR
from services.dev.infra.kafka_principals import GATEWAY_BYTE_RATE
from tests import kafka_logins
from tests.e2e.conftest import FAST_SETTINGS
from tests.e2e.helpers import bet, open_table, wait
from tests.kafka_cleanup import created_under

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

FLOOD = "flood"
"""The flooding operator (its gateway ``gateway-flood``: this test's alone)."""
QUOTA = 256 * 1024
"""Its gateway's producer byte rate here: about 700 PlaceBet/s, a quarter of what one
settlement process settled on this 2-core machine (BENCHMARKS.md)."""
WINDOW_MS = 2000
QUIET_COUPS, FLOODED_COUPS = 3, 6
BOUND_S = 5.0
"""How late the flood may make a coup's book, at most (measured: BENCHMARKS.md, "One
operator's flood")."""


HOUSE_BETTORS = [
    name
    for name in (f"house-{i}" for i in range(40))
    if operator_of(name, (HOUSE, FLOOD)) == HOUSE  # the demo's sender routes by bettor
][:10]


@pytest.fixture
async def system(
    kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[LocalSystem]:
    if not kafka_logins.authenticated():
        pytest.skip("the session's broker does not authenticate: no gateway has a quota")
    monkeypatch.setenv(GATEWAY_BYTE_RATE, str(QUOTA))  # the run's gateways get it (secure_run)
    settings = ServiceSettings(
        bootstrap=kafka_bootstrap,
        data_dir=tmp_path / "data",
        logins=kafka_logins.logins(),
        topic_prefix=created_under(f"e2e-{uuid.uuid4().hex[:12]}."),
        extra={**FAST_SETTINGS, "PB_OPERATORS": f"house,{FLOOD}"},
    )
    running = LocalSystem(settings, tmp_path / "logs")
    # Follow the tables and books only: not the flood's answers (the test's own CPU).
    running.feed = EventFeed(
        kafka_bootstrap,
        settings.topic_prefix,
        (TABLE_EVENTS, BOOK_EVENTS),
        auth=settings.logins.auth(AUDITOR),
    )
    try:
        await running.start(ready_timeout=90)
        yield running
    finally:
        await running.stop(timeout=15)


@dataclasses.dataclass
class Flood:
    """``gateway-flood`` sending valid bets at the table's open coup as fast as it is let."""

    system: LocalSystem
    table_id: str
    coup_id: str = ""
    sent: int = 0
    bytes: int = 0
    started: float = 0.0
    stopped: float = 0.0

    def seconds(self) -> float:
        return (self.stopped or time.monotonic()) - self.started

    async def run(self) -> None:
        settings = self.system.settings
        producer = AIOKafkaProducer(
            bootstrap_servers=settings.bootstrap,
            **settings.logins.options(f"gateway-{FLOOD}"),
            linger_ms=5,
            max_batch_size=256 * 1024,
            request_timeout_ms=120_000,
        )
        topic = settings.topic_prefix + bet_commands_topic(FLOOD)
        key = self.table_id.encode()
        await producer.start()
        self.started = time.monotonic()
        try:
            partitions = sorted(await producer.partitions_for(topic))
            partition = DefaultPartitioner()(key, partitions, partitions)  # the table's
            while True:
                batch = producer.create_batch()
                while True:
                    value = encode(
                        PlaceBet(
                            table_id=self.table_id,
                            bet_id=f"f{self.sent}",
                            coup_id=self.coup_id,
                            bettor_id=f"flood-{self.sent % 997}",
                            bet_type="player",
                            amount=100,
                            currency="EUR",
                        )
                    )
                    if batch.append(key=key, value=value, timestamp=None) is None:
                        break
                    self.sent += 1
                    self.bytes += len(key) + len(value)
                await (await producer.send_batch(batch, topic, partition=partition))
        finally:
            self.stopped = time.monotonic()
            await producer.stop()


async def test_a_flooding_operator_delays_another_operators_coups_within_the_bound(
    system: LocalSystem,
) -> None:
    table_id = await open_table(system, betting_window_ms=WINDOW_MS)
    flood = Flood(system, table_id)
    lateness: dict[str, float] = {}
    flooded: list[str] = []

    def opened() -> list[BettingOpened]:
        return sorted(
            {m.coup_id: m for m in system.seen(BettingOpened) if m.table_id == table_id}.values(),
            key=lambda m: m.coup_number,
        )

    def measure() -> None:
        closed = {m.coup_id: m for m in system.seen(BettingClosed) if m.table_id == table_id}
        for books in system.seen(BetsClosed):
            if books.coup_id in closed and books.coup_id not in lateness:
                delay = books.occurred_at - closed[books.coup_id].occurred_at
                lateness[books.coup_id] = delay.total_seconds()

    task: asyncio.Task[None] | None = None
    try:
        for n in range(QUIET_COUPS + FLOODED_COUPS):
            coup = opened()[n]
            flood.coup_id = coup.coup_id
            if n == QUIET_COUPS:
                task = asyncio.create_task(flood.run())
            if task is not None:
                flooded.append(coup.coup_id)
            # The house's bettors (the other operator) bet on every coup.
            await system.sender.send_many(
                [bet(table_id, coup.coup_id, bettor, "banker", 500) for bettor in HOUSE_BETTORS]
            )
            await system.sender.flush()

            def closed_and_next(coup_id: str = coup.coup_id, count: int = n + 2) -> bool:
                measure()
                return coup_id in lateness and len(opened()) >= count

            await wait(
                system,
                closed_and_next,
                120,
                f"the book of coup {coup.coup_number} to close and the next coup to open",
            )
            if task is not None and task.done():
                task.result()  # the flood failed: say why
    finally:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    quiet = [lateness[c] for c in lateness if c not in flooded]
    under_flood = [lateness[c] for c in flooded]
    seconds = flood.seconds()
    print(
        f"\nbook closed after betting closed: quiet median {statistics.median(quiet):.3f} s "
        f"max {max(quiet):.3f} s; flooded median {statistics.median(under_flood):.3f} s max "
        f"{max(under_flood):.3f} s; flood {flood.sent} bets, {flood.bytes / 1024:.0f} KiB "
        f"in {seconds:.1f} s ({flood.sent / seconds:.0f} bets/s)"
    )
    assert flood.sent > 1000  # it did flood
    assert max(under_flood) <= BOUND_S, (quiet, under_flood)
