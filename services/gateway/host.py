"""The gateway process: one platform service per operator, behind one HTTP app.

``punto-banco serve gateway`` runs :func:`serve_gateway`: for each operator it serves
(``PB_GATEWAY_OPERATORS``, default every operator in the operators folder) a
:class:`~services.gateway.service.GatewayService` in this process (its own principal, store,
relay, consumer and wallet outbox: a ``KafkaService``), and one HTTP server on
``PB_HTTP_HOST:PB_GATEWAY_PORT`` with the API (``api.py``, routed by ``X-PB-Operator``) and the
operations endpoints for all of them (``/health``, ``/ready`` naming each operator's failing
check or silent wallet, ``/metrics``). The log line ``gateway: serving`` says it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Recording
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway.api import create_app
from services.gateway.application import BetRequest, GatewayApplication
from services.gateway.auth import RateLimit
from services.gateway.batching import Batcher
from services.gateway.config import GatewayConfig
from services.gateway.domain import Bet, Table, bet_aggregate_id
from services.gateway.operators import OperatorKeys, OperatorRegistry
from services.gateway.outbox import WalletOutbox
from services.gateway.service import gateway_service, gateway_settings
from services.shared.platform.cells import merged_registry
from services.shared.platform.host import AsgiServer, ops_app
from services.shared.platform.logs import configure_logging
from services.shared.platform.settings import Settings
from services.shared.platform.store import StoppedAsStandby

log = logging.getLogger(__name__)

NAME = "gateway"
OPS_PATHS = ("/health", "/ready", "/metrics")


class OperatorGateway:
    """One operator's running gateway service, as the API uses it."""

    def __init__(self, base: Settings, keys: OperatorKeys, config: GatewayConfig) -> None:
        self.keys = keys
        self.settings = gateway_settings(base, keys)
        self.service = gateway_service(self.settings, keys, config)
        self.outbox: WalletOutbox = self.service.outbox
        self.limit = RateLimit(config.rate, config.burst)
        self._waiters: dict[UUID, list[asyncio.Future[None]]] = {}
        self._tables: set[str] = set()
        self._table_events: dict[str, asyncio.Event] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._requests: Batcher[BetRequest, Bet] = Batcher(
            lambda requests: self.call(self.app.requests, requests)
        )

    @property
    def name(self) -> str:
        return self.keys.operator

    @property
    def app(self) -> GatewayApplication:
        return self.service.app

    def call(self, fn: Callable[..., Any], /, *args: Any) -> Awaitable[Any]:
        return self.service.worker.call(fn, *args)

    async def request(self, request: BetRequest) -> Bet:
        """Record a bet (``GatewayApplication.request``), with the bets arriving meanwhile in
        one transaction."""
        return await self._requests.submit(request)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.service.start()
        self.app.add_save_listener(self._on_saved)
        self._tables.update(await self.call(self.app.table_ids))

    async def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.app.remove_save_listener(self._on_saved)
        await self.service.stop()

    # -- waiting for facts ------------------------------------------------------------
    def waiter(self, bet_id: str) -> asyncio.Future[None]:
        """A future set once the bet is answered (or refused by its wallet)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(bet_aggregate_id(self.name, bet_id), []).append(future)
        return future

    def forget(self, bet_id: str, waiter: asyncio.Future[None]) -> None:
        key = bet_aggregate_id(self.name, bet_id)
        found = self._waiters.get(key, [])
        if waiter in found:
            found.remove(waiter)
        if not found:
            self._waiters.pop(key, None)

    def table_ids(self) -> list[str]:
        return sorted(self._tables)

    async def table_changed(self, table_id: str, timeout: float) -> None:
        """Return when the table has a new fact, or after ``timeout`` seconds."""
        changed = self._table_events.setdefault(table_id, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), timeout)

    def _on_saved(self, recordings: Sequence[Recording[UUID]]) -> None:
        answered = set()
        tables = set()
        for recording in recordings:
            event = recording.domain_event
            if isinstance(event, Bet.Answered | Bet.DebitFailed):
                answered.add(event.originator_id)
            elif isinstance(event, Table.Started):
                tables.add(event.table_id)
            elif isinstance(event, Table.Fact):
                tables.add(event.payload["table_id"])
        loop = self._loop
        if (answered or tables) and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._notify, answered, tables)

    def _notify(self, answered: set[UUID], tables: set[str]) -> None:
        for bet in answered:
            for future in self._waiters.pop(bet, []):
                if not future.done():
                    future.set_result(None)
        self._tables.update(tables)
        for table_id in tables:
            changed = self._table_events.pop(table_id, None)
            if changed is not None:
                changed.set()


class Gateway:
    """The gateway process's operators and its HTTP server (see the module docstring)."""

    def __init__(self, base: Settings, config: GatewayConfig, keys: Sequence[OperatorKeys]) -> None:
        if not keys:
            raise ValueError(
                "the gateway serves no operator: `punto-banco operators add NAME` first"
            )
        self.base = base
        self.config = config
        self.operators = {k.operator: OperatorGateway(base, k, config) for k in keys}
        self.http: AsgiServer | None = None
        self.stopping = asyncio.Event()

    def operator(self, name: str) -> OperatorGateway | None:
        return self.operators.get(name)

    async def start(self) -> None:
        """Start every operator's service, then (each outbox listening: a debit requested is
        known as this process's) the HTTP API."""
        for operator in self.operators.values():
            await operator.start()
        await self.wait_ready()
        if self.config.port is not None:
            self.http = AsgiServer(
                self.asgi(), self.base.http_host, self.config.port, name=NAME, lifespan="off"
            )
            await self.http.start()
            log.info("gateway: HTTP API on %s", self.http.url)

    def asgi(self) -> ASGIApp:
        """The API, and the operations endpoints at their paths, for the allowed hosts."""
        hosts = self.base.allowed_hosts
        api = TrustedHostMiddleware(create_app(self), allowed_hosts=hosts, www_redirect=False)
        ops = ops_app(self, self._metrics, lambda: "{}", service=NAME, allowed_hosts=hosts)

        async def route(scope: Scope, receive: Receive, send: Send) -> None:
            target = ops if scope.get("path") in OPS_PATHS else api
            await target(scope, receive, send)

        return route

    async def wait_ready(self, timeout: float = 60.0) -> None:
        for operator in self.operators.values():
            await operator.service.wait_ready(timeout)
            await asyncio.wait_for(operator.outbox.started.wait(), timeout)

    @property
    def failed(self) -> bool:
        return any(op.service.failed for op in self.operators.values())

    async def stop(self) -> None:
        self.stopping.set()
        http, self.http = self.http, None
        if http is not None:
            await http.stop()
        for operator in self.operators.values():
            await operator.stop()

    # -- operations (endpoints.ops_app) ----------------------------------------------
    def alive(self) -> str | None:
        for name, operator in self.operators.items():
            stuck = operator.service.worker.stuck()
            if stuck is not None:
                return f"{name}: {stuck}"
        return None

    async def checks(self) -> dict[str, str | None]:
        operators = list(self.operators.items())
        results = await asyncio.gather(*(op.service.readiness.checks() for _, op in operators))
        failing = [
            f"{name} {check}: {why}"
            for (name, _), checks in zip(operators, results, strict=True)
            for check, why in checks.items()
            if why is not None
        ]
        silent = [
            f"{name}: its wallet has not answered for {seconds:.0f} s"
            for name, op in operators
            if (seconds := op.outbox.silent_for()) is not None
            and seconds > self.config.wallet_silence
        ]
        return {"operators": "; ".join(failing) or None, "wallets": "; ".join(silent) or None}

    async def _metrics(self) -> bytes:
        operators = list(self.operators.values())
        await asyncio.gather(
            *(op.service.metrics.render(op.service) for op in operators), return_exceptions=True
        )
        services = merged_registry(
            NAME, ((index, op.service.metrics.registry) for index, op in enumerate(operators))
        )
        own = CollectorRegistry(auto_describe=False)
        own.register(_WalletMetrics(operators))
        return services + generate_latest(own)


class _WalletMetrics(Collector):
    """The wallet calls of each operator: by kind and answer, latency, unconfirmed bets."""

    def __init__(self, operators: Sequence[OperatorGateway]) -> None:
        self.operators = operators

    def collect(self) -> list[Metric]:
        calls = CounterMetricFamily(
            "pb_wallet_calls",
            "Wallet calls by kind and answer.",
            labels=["operator", "kind", "answer"],
        )
        seconds = CounterMetricFamily(
            "pb_wallet_call_seconds", "Time spent in answered wallet calls.", labels=["operator"]
        )
        open_bets = GaugeMetricFamily(
            "pb_gateway_open_bets",
            "Bets not done (unanswered, unsettled or unconfirmed).",
            labels=["operator"],
        )
        silent = GaugeMetricFamily(
            "pb_wallet_silent_seconds",
            "How long the wallet has left calls unanswered.",
            labels=["operator"],
        )
        unconfirmed = GaugeMetricFamily(
            "pb_wallet_unconfirmed_calls",
            "Wallet calls on their way or waiting to be tried again.",
            labels=["operator"],
        )
        for op in self.operators:
            stats = op.outbox.stats
            unconfirmed.add_metric([op.name], op.outbox.unconfirmed_calls())
            for (kind, answer), count in sorted(stats.calls.items()):
                calls.add_metric([op.name, kind, answer], count)
            seconds.add_metric([op.name], stats.seconds)
            open_bets.add_metric([op.name], len(op.outbox.open))
            silent.add_metric([op.name], op.outbox.silent_for() or 0.0)
        return [calls, seconds, open_bets, silent, unconfirmed]


def load_operators(base: Settings, config: GatewayConfig) -> list[OperatorKeys]:
    """The operators to serve, from the operators folder (``OperatorError`` says what is wrong)."""
    registry = OperatorRegistry(config.operators_dir or base.keys_dir / "operators")
    names = list(config.operators) or registry.names()
    return [registry.get(name) for name in names]


async def run_gateway(base: Settings, config: GatewayConfig) -> int:
    """Run until SIGTERM/SIGINT (or a crashed service); the process exit code."""
    gateway = Gateway(base, config, load_operators(base, config))
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, gateway.stopping.set)
    try:
        try:
            await gateway.start()
        except StoppedAsStandby as stopped:
            log.info("%s", stopped)
            return 0
        log.info("%s: serving", NAME)  # what `punto-banco up` waits for
        stops = [op.service.stopping.wait() for op in gateway.operators.values()]
        await asyncio.wait(
            [asyncio.ensure_future(w) for w in (*stops, gateway.stopping.wait())],
            return_when=asyncio.FIRST_COMPLETED,
        )
    finally:
        await gateway.stop()
    return 1 if gateway.failed else 0


def serve_gateway(base: Settings, config: GatewayConfig) -> int:
    configure_logging(base)
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # a line per wallet call otherwise
    return asyncio.run(run_gateway(base, config))
