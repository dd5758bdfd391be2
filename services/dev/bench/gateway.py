"""The ``gateway`` benchmark group: bets per second through the HTTP API, and the time from a
``POST /v1/bets`` to its answer, with the demo wallet and without, beside the Kafka-direct path.

For each path one run of the three services and the gateway (``punto-banco serve gateway``,
SQLite stores, the house's operator) is started on the broker of ``KAFKA_BOOTSTRAP_SERVERS``
under a topic prefix of its own; one table is opened with a long betting window, and
:data:`BETS` bets (quick: :data:`QUICK_BETS`) are placed on its open coup by
:data:`CONCURRENCY` clients at once: each POST waits for settlement's answer. The Kafka-direct
path produces the same bets as PlaceBet records and times each until its BetAccepted is read
on bet-events. Figures: accepted bets per second (all bets over the time from the first send
to the last answer) and the p50 / p99 from send to answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx2

from contracts import BetAccepted, BetLimitSpec, BetRejected, BettingOpened, OpenTable, PlaceBet
from services.dev.bench.report import Figure
from services.dev.demo.gateway import DemoGateway, gateway_settings
from services.dev.demo.processes import SERVICES, ServiceSettings
from services.dev.demo.system import LocalSystem
from services.dev.infra.kafka_clients import KafkaLogins
from services.gateway.auth import signed_headers

BETS = 3000
QUICK_BETS = 600
CONCURRENCY = 400
WINDOW_MS = 120_000
LIMITS = {
    name: BetLimitSpec(minimum=100, maximum=100_000)
    for name in ("player", "banker", "tie", "player_pair", "banker_pair")
}


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def _system(folder: Path, path: str) -> tuple[LocalSystem, DemoGateway | None]:
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    settings = ServiceSettings(
        bootstrap=bootstrap,
        data_dir=folder,
        topic_prefix=f"bench-gw-{uuid.uuid4().hex[:8]}.",
        extra={"PB_HTTP_PORT": "off", "PB_OPERATORS": "house", "PB_LOG_LEVEL": "INFO"},
        logins=KafkaLogins.for_bootstrap(bootstrap),
    )
    gateway = None
    services: tuple[str, ...] = SERVICES
    if path != "kafka":
        gateway = DemoGateway(folder, wallet_on=path == "wallet")
        settings = gateway_settings(settings, gateway)
        services = (*SERVICES, "gateway")
        gateway.prepare()
    system = LocalSystem(settings, folder / "logs", services=services)
    await system.start(ready_timeout=120)
    return system, gateway


async def _open_coup(system: LocalSystem, table_id: str) -> str:
    await system.sender.send_now(
        OpenTable(
            table_id=table_id,
            decks=8,
            limits=LIMITS,
            currency="EUR",
            betting_window_ms=WINDOW_MS,
        )
    )
    await system.until(
        lambda: any(m.table_id == table_id for m in system.seen(BettingOpened)), 60, "a coup"
    )
    return next(m.coup_id for m in system.seen(BettingOpened) if m.table_id == table_id)


def _bet(table_id: str, coup_id: str, n: int) -> dict[str, object]:
    return {
        "bet_id": f"bench-{n}",
        "player_id": f"player-{n % 500}",
        "table_id": table_id,
        "coup_id": coup_id,
        "bet_type": ("player", "tie", "player_pair")[n % 3],
        "amount": 1000,
        "currency": "EUR",
    }


async def _over_http(gateway: DemoGateway, table_id: str, coup_id: str, bets: int) -> list[float]:
    """Each bet's seconds from its POST to its answer (ACCEPTED ones only)."""
    latencies: list[float] = []
    queue = list(range(bets))
    limits = httpx2.Limits(max_connections=CONCURRENCY)
    async with httpx2.AsyncClient(base_url=gateway.url, timeout=60, limits=limits) as client:

        async def worker() -> None:
            while queue:
                body = json.dumps(_bet(table_id, coup_id, queue.pop())).encode()
                headers = signed_headers(
                    gateway.operator, gateway.api_secret, "POST", "/v1/bets", body
                )
                headers["content-type"] = "application/json"
                started = time.perf_counter()
                answer = await client.post("/v1/bets", content=body, headers=headers)
                if answer.status_code == 200 and answer.json()["status"] == "ACCEPTED":
                    latencies.append(time.perf_counter() - started)

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return latencies


async def _over_kafka(system: LocalSystem, table_id: str, coup_id: str, bets: int) -> list[float]:
    sent: dict[str, float] = {}
    messages = []
    for n in range(bets):
        fields = _bet(table_id, coup_id, n)
        fields["bettor_id"] = fields.pop("player_id")
        messages.append(PlaceBet.model_validate(fields))
    for message in messages:
        sent[message.bet_id] = time.perf_counter()
    await system.sender.send_many(messages)
    await system.sender.flush()
    answered: dict[str, float] = {}
    read = [0]  # records of the history looked at

    def done() -> bool:
        now = time.perf_counter()
        for record in system.history[read[0] :]:
            message = record.message
            if isinstance(message, BetAccepted | BetRejected) and message.bet_id in sent:
                answered.setdefault(message.bet_id, now)
        read[0] = len(system.history)
        return len(answered) >= bets

    await system.until(done, 120, "every bet answered")
    return [answered[bet_id] - sent[bet_id] for bet_id in answered]


async def _measure(path: str, bets: int, progress: Callable[[str], None]) -> list[Figure]:
    folder = Path(tempfile.mkdtemp(prefix=f"pb-bench-gateway-{path}-"))
    system, gateway = await _system(folder, path)
    try:
        table_id = f"bench-{uuid.uuid4().hex[:6]}"
        coup_id = await _open_coup(system, table_id)
        progress(f"gateway: {bets} bets, {path}")
        started = time.perf_counter()
        if gateway is None:
            latencies = await _over_kafka(system, table_id, coup_id, bets)
        else:
            latencies = await _over_http(gateway, table_id, coup_id, bets)
        elapsed = time.perf_counter() - started
    finally:
        await system.stop()
        if gateway is not None:
            gateway.stop()
        shutil.rmtree(folder, ignore_errors=True)
    label = {"kafka": "Kafka direct", "wallet": "HTTP API, wallet", "none": "HTTP API, no wallet"}
    name = label[path]
    return [
        Figure(f"{name}: bets/s", len(latencies) / elapsed, "bets/s", higher_is_better=True),
        Figure(f"{name}: p50 send -> answer", statistics.median(latencies) * 1000, "ms"),
        Figure(f"{name}: p99 send -> answer", percentile(latencies, 0.99) * 1000, "ms"),
    ]


def run_gateway_group(quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    bets = QUICK_BETS if quick else BETS
    figures: list[Figure] = []
    for path in ("none", "wallet", "kafka"):
        figures += asyncio.run(_measure(path, bets, progress))
    return figures
