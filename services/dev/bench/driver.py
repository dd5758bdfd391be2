"""The load driver: opens tables, floods each coup with bets, closes betting, times the coups.

Per table and coup: wait for ``BettingOpened``, produce B ``PlaceBet`` in bulk (aiokafka
batches straight to the table's partition), wait until settlement has answered every bet
(``BetAccepted``/``BetRejected``), send ``CloseBetting``; dealing then deals and resolves the
coup, settlement settles it and the relay publishes one ``BetSettled`` per bet. The table's
next coup opens in the same dealing transaction as ``CoupResolved``; with several tables, bets
for the next coup flow while the previous one is still being settled (with one table the
driver waits for each coup to be settled first, see :meth:`Driver.run_cell`).

Timing (all clocks of this one machine): the start of a latency is the ``occurred_at`` of
dealing's ``BettingClosed`` / ``CoupResolved`` (the moment dealing recorded it); its end is the
Kafka record timestamp of the coup's last ``BetSettled`` (CreateTime: stamped by the relay's
producer when it appended the record, i.e. published). The driver's own receive time of that
record is kept too (``received`` latencies) and includes the consumer's lag.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner

from contracts import (
    BET_COMMANDS,
    BET_EVENTS,
    TABLE_COMMANDS,
    TABLE_EVENTS,
    BetLimitSpec,
    CloseBetting,
    OpenTable,
    encode,
)
from services.dev.infra.kafka_clients import AUDITOR, GATEWAY, OPERATOR, KafkaLogins

BET_TYPES = ("player", "banker", "tie", "player_pair", "banker_pair")
FLOODS_AT_ONCE = 4
WINDOW_MS = 3_600_000
"""Betting windows are closed by the driver (CloseBetting), never by the clock."""


@dataclass
class CoupRun:
    """What the driver saw of one coup."""

    table_id: str
    coup_id: str
    bets: int
    first_sent: float = 0.0
    answered: int = 0
    rejected: int = 0
    settled: int = 0
    closed_at: float | None = None
    resolved_at: float | None = None
    last_published: float = 0.0
    last_received: float = 0.0
    all_answered: asyncio.Event = field(default_factory=asyncio.Event)
    all_settled: asyncio.Event = field(default_factory=asyncio.Event)

    def close_to_settled(self) -> float | None:
        return None if self.closed_at is None else self.last_published - self.closed_at

    def resolved_to_settled(self) -> float | None:
        return None if self.resolved_at is None else self.last_published - self.resolved_at

    def resolved_to_received(self) -> float | None:
        return None if self.resolved_at is None else self.last_received - self.resolved_at


@dataclass
class CellResult:
    """One cell of the matrix: T tables, B bets per coup, C coups per table."""

    tables: int
    bets: int
    coups: int
    coup_runs: list[CoupRun]
    started: float
    ended: float

    @property
    def settled(self) -> int:
        return sum(run.settled for run in self.coup_runs)

    @property
    def rejected(self) -> int:
        return sum(run.rejected for run in self.coup_runs)

    @property
    def seconds(self) -> float:
        return self.ended - self.started


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


class Driver:
    """Produces the load and follows TABLE_EVENTS and BET_EVENTS of one run (one topic prefix)."""

    def __init__(self, bootstrap: str, prefix: str, logins: KafkaLogins | None = None) -> None:
        self.prefix = prefix
        logins = logins if logins is not None else KafkaLogins()
        # Bets as the gateway; the table commands as the operator (the same producer when
        # everyone logs in alike).
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            **logins.options(GATEWAY),
            client_id="pb-bench-driver",
            enable_idempotence=True,
            acks="all",
            linger_ms=5,
            max_batch_size=1024 * 1024,
            # A flood of 10 x 10,000 bets waits for room in the producer's queue: give it time
            # on a busy machine (30 s was too short for 10 tables x 10,000 bets at load 5).
            request_timeout_ms=300_000,
        )
        self._operator = self._producer
        if logins.home is not None:
            self._operator = AIOKafkaProducer(
                bootstrap_servers=bootstrap,
                **logins.options(OPERATOR),
                client_id="pb-bench-operator",
                enable_idempotence=True,
                acks="all",
                request_timeout_ms=60_000,
            )
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            **logins.options(AUDITOR),
            client_id="pb-bench-follower",
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=8 * 1024 * 1024,
            fetch_max_bytes=32 * 1024 * 1024,
        )
        self._partitioner = DefaultPartitioner()
        self._opened: dict[str, asyncio.Queue[str]] = {}
        self._coups: dict[tuple[str, str], CoupRun] = {}
        self._follow_task: asyncio.Task[None] | None = None
        self.sample_bet_settled: bytes | None = None
        # At most a few tables' floods in the producer at once: 100 tables x 10,000 bets
        # (330 MB) queued together made aiokafka time out batches waiting for their turn.
        self._flooding = asyncio.Semaphore(FLOODS_AT_ONCE)
        # One flood at a time per partition: aiokafka's add_batch waits for the partition's
        # last queued batch in a loop whose timeout shrinks by the time waited so far on
        # every turn (aiokafka 0.14), so floods taking turns on one partition timed out.
        self._partition_locks: dict[int, asyncio.Lock] = {}
        self.check: Callable[[], None] = lambda: None
        """Called every second while waiting: raises if the system under test died."""

    async def _wait(self, event: asyncio.Event, timeout: float, what: str) -> None:
        """Wait for ``event`` up to ``timeout`` s, calling :attr:`check` every second."""
        deadline = time.monotonic() + timeout
        while not event.is_set():
            self.check()
            if self._follow_task is not None and self._follow_task.done():
                self._follow_task.result()  # the follower crashed: raise its error
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {what} within {timeout:.0f} s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), min(1.0, left))

    async def start(self, timeout: float = 60.0) -> None:
        await asyncio.wait_for(self._producer.start(), timeout)
        if self._operator is not self._producer:
            await asyncio.wait_for(self._operator.start(), timeout)
        await asyncio.wait_for(self._consumer.start(), timeout)
        partitions: list[TopicPartition] = []
        for topic in (TABLE_EVENTS, BET_EVENTS):
            physical = self.prefix + topic
            deadline = time.monotonic() + timeout
            while not (found := self._consumer.partitions_for_topic(physical)):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"topic {physical} has no partitions")
                await self._consumer._client.force_metadata_update()
                await asyncio.sleep(0.2)
            partitions.extend(TopicPartition(physical, p) for p in sorted(found))
        self._consumer.assign(partitions)
        await self._consumer.seek_to_end(*partitions)
        for partition in partitions:
            await asyncio.wait_for(self._consumer.position(partition), timeout)
        self._follow_task = asyncio.create_task(self._follow())

    async def stop(self) -> None:
        if self._follow_task is not None:
            self._follow_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._follow_task
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._producer.stop(), 30)
        if self._operator is not self._producer:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._operator.stop(), 30)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._consumer.stop(), 30)

    # -- following ------------------------------------------------------------------
    async def _follow(self) -> None:
        while True:
            batches = await self._consumer.getmany(timeout_ms=100, max_records=20_000)
            now = time.time()
            for records in batches.values():
                for record in records:
                    self._on_record(record.value, record.timestamp / 1000.0, now)

    def _on_record(self, value: bytes, published: float, received: float) -> None:
        data: dict[str, Any] = orjson.loads(value)  # the driver's own CPU is the system's loss
        kind = data.get("type")
        table_id = data.get("table_id", "")
        if kind == "BettingOpened":
            queue = self._opened.get(table_id)
            if queue is not None:
                queue.put_nowait(data["coup_id"])
            return
        run = self._coups.get((table_id, data.get("coup_id", "")))
        if run is None:
            return
        if kind == "BetSettled":
            run.settled += 1
            run.last_published = max(run.last_published, published)
            run.last_received = received
            if self.sample_bet_settled is None:
                self.sample_bet_settled = value
            if run.settled >= run.bets - run.rejected:
                run.all_settled.set()
        elif kind in ("BetAccepted", "BetRejected"):
            run.answered += 1
            if kind == "BetRejected":
                run.rejected += 1
            if run.answered >= run.bets:
                run.all_answered.set()
                if run.settled >= run.bets - run.rejected:  # every bet refused: none to settle
                    run.all_settled.set()
        elif kind == "BettingClosed":
            run.closed_at = _epoch(data["occurred_at"])
        elif kind == "CoupResolved":
            run.resolved_at = _epoch(data["occurred_at"])

    # -- producing ------------------------------------------------------------------
    async def _partition(self, topic: str, key: bytes) -> int:
        partitions = sorted(await self._producer.partitions_for(topic))
        partition: int = self._partitioner(key, partitions, partitions)
        return partition

    async def _send_bulk(self, topic: str, key: bytes, values: Sequence[bytes]) -> None:
        """Send ``values`` to the key's partition in as few batches as fit; wait for the acks."""
        partition = await self._partition(topic, key)
        pending = []
        async with self._partition_locks.setdefault(partition, asyncio.Lock()):
            batch = self._producer.create_batch()
            for value in values:
                if batch.append(key=key, value=value, timestamp=None) is None:
                    pending.append(
                        await self._producer.send_batch(batch, topic, partition=partition)
                    )
                    batch = self._producer.create_batch()
                    batch.append(key=key, value=value, timestamp=None)
            if batch.record_count():
                pending.append(await self._producer.send_batch(batch, topic, partition=partition))
        await asyncio.gather(*pending)

    async def open_tables(self, table_ids: Sequence[str]) -> None:
        limits = {t: BetLimitSpec(minimum=1, maximum=1_000_000) for t in BET_TYPES}
        for table_id in table_ids:
            self._opened[table_id] = asyncio.Queue()
            command = OpenTable(
                table_id=table_id,
                decks=8,
                paytable="standard",
                limits=limits,
                currency="EUR",
                betting_window_ms=WINDOW_MS,
                cut_card_from_end=16,
            )
            await self._operator.send(
                self.prefix + TABLE_COMMANDS, encode(command), key=table_id.encode()
            )
        await self._operator.flush()

    def _bets(self, table_id: str, coup_id: str, count: int) -> list[bytes]:
        stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        values = []
        for n in range(count):
            values.append(
                orjson.dumps(
                    {
                        "type": "PlaceBet",
                        "event_id": str(uuid.uuid4()),
                        "schema_version": 1,
                        "occurred_at": stamp,
                        "table_id": table_id,
                        "causation_id": None,
                        "correlation_id": None,
                        "bet_id": f"{coup_id}.b{n}",
                        "coup_id": coup_id,
                        "bettor_id": f"p{n}",
                        "bet_type": BET_TYPES[n % len(BET_TYPES)],
                        "amount": 100 + n % 900,
                        "currency": "EUR",
                    }
                )
            )
        return values

    async def _next_coup(self, table_id: str, timeout: float) -> str:
        return await asyncio.wait_for(self._opened[table_id].get(), timeout)

    async def run_table(
        self, table_id: str, coups: int, bets: int, timeout: float, overlap: bool = True
    ) -> list[CoupRun]:
        """Play ``coups`` coups of ``bets`` bets each on one open table.

        ``overlap=False``: wait until a coup is settled before betting on the next one.
        """
        runs: list[CoupRun] = []
        for _ in range(coups):
            if runs and not overlap:
                await self._wait(runs[-1].all_settled, timeout, "settlement of the last coup")
            coup_id = await self._next_coup(table_id, timeout)
            run = CoupRun(table_id, coup_id, bets)
            self._coups[(table_id, coup_id)] = run
            runs.append(run)
            values = self._bets(table_id, coup_id, bets)
            async with self._flooding:
                run.first_sent = time.time()
                await self._send_bulk(self.prefix + BET_COMMANDS, table_id.encode(), values)
            await self._wait(run.all_answered, timeout, f"answer to every bet of {coup_id}")
            close = CloseBetting(table_id=table_id, coup_id=coup_id)
            await self._operator.send_and_wait(
                self.prefix + TABLE_COMMANDS, encode(close), key=table_id.encode()
            )
        return runs

    async def run_cell(
        self,
        tag: str,
        tables: int,
        bets: int,
        coups: int,
        timeout: float,
        table_ids: Sequence[str] | None = None,
    ) -> CellResult:
        """Open ``tables`` new tables (``<tag>.t<n>``, or ``table_ids``) and play ``coups``
        coups of ``bets`` bets on each.

        With one table its coups do not overlap (each is settled before the next is bet on:
        the latency of a lone coup); with more, each table goes on as soon as its next coup
        opens, so settling one coup overlaps with bets on the next and on other tables.
        """
        if table_ids is None:
            table_ids = [f"{tag}.t{n}" for n in range(tables)]
        await self.open_tables(table_ids)
        started = time.time()
        overlap = tables > 1
        per_table = await asyncio.gather(
            *(self.run_table(table_id, coups, bets, timeout, overlap) for table_id in table_ids)
        )
        runs = [run for table_runs in per_table for run in table_runs]
        for run in runs:
            await self._wait(run.all_settled, timeout, f"settlement of {run.coup_id}")
        # Bets timed from the first PlaceBet sent (after the first BettingOpened).
        started = min((run.first_sent for run in runs), default=started)
        ended = max((run.last_published for run in runs), default=time.time())
        for run in runs:
            self._coups.pop((run.table_id, run.coup_id), None)
        return CellResult(tables, bets, coups, runs, started, ended)
