"""`punto-banco up`: local Kafka (and PostgreSQL), the three services, a demo table, bettors.

:func:`run_demo` starts what is needed (through :mod:`services.dev.infra`), opens the tables with
OpenTable on the table-commands topic, has the crowd bet on every BettingOpened (late bets once
betting closed), follows every event topic into the :class:`~services.dev.demo.ledger.Ledger`, and
after ``coups`` coups per table (or on Ctrl-C) closes the tables, waits for the last answers and
settlements, and stops everything it started: services first (SIGTERM, wait, SIGKILL), then the
servers it started itself. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contracts import (
    BetLimitSpec,
    BetRefunded,
    BetRejected,
    BetSettled,
    BettingClosed,
    BettingOpened,
    CloseTable,
    CommandRejected,
    CoupResolved,
    DeadLetter,
    Message,
    OpenTable,
    PlaceBet,
    TableClosed,
    TableMessage,
    amount_for,
)
from services.dev.demo.bettors import Crowd, PlannedBet, TableTerms, demo_limits
from services.dev.demo.bus import cluster_id
from services.dev.demo.gateway import (
    DemoGateway,
    HttpBettors,
    balance_problems,
    gateway_settings,
    routed,
)
from services.dev.demo.ledger import Ledger
from services.dev.demo.processes import SERVICES, ServiceSettings, stop_all
from services.dev.demo.system import LocalSystem, SystemTimeout, run_operators
from services.dev.infra.kafka_clients import ADMIN, DASHBOARD, KafkaLogins
from services.shared.platform.settings import KafkaAuth, Settings
from services.shared.rules.paytable import get_paytable
from services.studio.simulator import Device, LoopbackServer
from services.tools.admin.keys import init_keys

MAX_RESENDS = 3


@dataclass(frozen=True, slots=True)
class DemoConfig:
    """The options of `punto-banco up`."""

    coups: int | None = None
    bettors: int = 20
    wildness: float = 0.1
    data_dir: Path = Path("var")
    postgres: bool = False
    tables: int = 1
    paytable: str = "standard"
    decks: int = 6
    betting_window_ms: int = 1000
    cut_card_from_end: int = 16
    currency: str = "EUR"
    seed: int | None = None
    topic_prefix: str = ""
    bootstrap: str | None = None  # None: start (or reuse) the local Kafka of services.dev.infra
    postgres_env: dict[str, str] | None = None  # POSTGRES_* to use; none and postgres: start one
    ready_timeout: float = 120.0
    stall_timeout: float = 60.0  # fail if nothing happens for this long
    drain_timeout: float = 30.0  # after closing, how long to wait for the last settlements
    gateway: bool = True  # bettors play through the gateway's API, their money in a wallet
    studio: bool = False  # the first table is a studio table, dealt by a simulated shoe

    def __post_init__(self) -> None:
        if self.coups is not None and self.coups < 1:
            raise ValueError(f"--coups must be at least 1, got {self.coups}")
        if not 1 <= self.tables <= 50:
            raise ValueError(f"--tables must be between 1 and 50, got {self.tables}")
        if not 0.0 <= self.wildness <= 1.0:
            raise ValueError(f"--wildness must be between 0 and 1, got {self.wildness}")
        if self.bettors < 0:
            raise ValueError(f"--bettors must be 0 or more, got {self.bettors}")


@dataclass
class TableRun:
    """What the driver knows of one table of the run."""

    table_id: str
    crowd: Crowd
    coups_bet: int = 0
    coups_resolved: int = 0
    current_coup: str | None = None
    closing: bool = False
    closed: bool = False
    late: dict[str, tuple[PlannedBet, ...]] = field(default_factory=dict)
    our_coups: set[str] = field(default_factory=set)
    outcomes: deque[str] = field(default_factory=lambda: deque(maxlen=40))


def place_bet(bet: PlannedBet) -> PlaceBet:
    return PlaceBet(
        table_id=bet.table_id,
        bet_id=bet.bet_id,
        coup_id=bet.coup_id,
        bettor_id=bet.bettor_id,
        bet_type=bet.bet_type,
        amount=amount_for(bet.amount),
        currency=bet.currency,
    )


class TableDriver:
    """Opens the tables, places the crowd's bets, closes the tables after ``coups`` coups."""

    def __init__(self, config: DemoConfig, system: LocalSystem, run_id: str) -> None:
        self.config = config
        self.system = system
        self.limits = demo_limits(bet.value for bet in get_paytable(config.paytable).offered)
        self.tables: dict[str, TableRun] = {}
        for number, table_id in enumerate(self.table_ids(config, run_id), start=1):
            terms = TableTerms(table_id, config.currency, self.limits)
            seed = None if config.seed is None else config.seed * 1000 + number
            crowd = Crowd(terms, bettors=config.bettors, wildness=config.wildness, seed=seed)
            self.tables[table_id] = TableRun(table_id, crowd)
        self.dead_letters: list[DeadLetter] = []
        self.resends: dict[str, int] = {}
        self.http: HttpBettors | None = None  # the gateway's API, when the run has one
        self.command_rejections: list[CommandRejected] = []
        self.started = time.monotonic()
        self.last_progress = time.monotonic()
        self.studio: LoopbackServer | None = None  # the studio table's shoe (the first table)

    @property
    def studio_table(self) -> str | None:
        """The table the simulated shoe deals (``--studio``: the first), or None."""
        return next(iter(self.tables)) if self.config.studio else None

    @staticmethod
    def table_ids(config: DemoConfig, run_id: str) -> list[str]:
        return [f"demo-{run_id}-{number}" for number in range(1, config.tables + 1)]

    def ours(self, message: Message) -> bool:
        return isinstance(message, TableMessage) and message.table_id in self.tables

    def open_tables(self) -> list[OpenTable]:
        config = self.config
        limits = {
            name: BetLimitSpec(minimum=limit.minimum, maximum=limit.maximum)
            for name, limit in self.limits.items()
        }
        return [
            OpenTable(
                table_id=table_id,
                decks=config.decks,
                paytable=config.paytable,
                limits=limits,
                currency=config.currency,
                betting_window_ms=config.betting_window_ms,
                cut_card_from_end=config.cut_card_from_end,
                card_source="studio" if table_id == self.studio_table else "rng",
            )
            for table_id in self.tables
        ]

    async def start(self) -> None:
        for command in self.open_tables():
            await self.system.sender.send(command)
        await self.system.sender.flush()

    async def react(self, message: Message) -> None:
        """Act on one event of the run (bets on a new coup, late bets, closing)."""
        if isinstance(message, DeadLetter):
            self.dead_letters.append(message)
            return
        if not self.ours(message):
            return
        assert isinstance(message, TableMessage)
        table = self.tables[message.table_id]
        self.last_progress = time.monotonic()
        if isinstance(message, BettingOpened):
            table.current_coup = message.coup_id
            if table.closing or (
                self.config.coups is not None and table.coups_bet >= self.config.coups
            ):
                return
            table.coups_bet += 1
            table.our_coups.add(message.coup_id)
            plan = table.crowd.plan_coup(message.coup_id)
            table.late[message.coup_id] = plan.late_bets
            await self._send(plan.open_bets)
        elif isinstance(message, BettingClosed):
            await self._send(table.late.pop(message.coup_id, ()))
            if self.studio is not None and message.table_id == self.studio_table:
                self.studio.release()  # "no more bets": the dealer deals the coup
        elif isinstance(message, CoupResolved):
            table.outcomes.append(message.outcome[0])
            if message.coup_id in table.our_coups:
                table.coups_resolved += 1
                if self.config.coups is not None and table.coups_resolved >= self.config.coups:
                    await self.close(table, f"demo finished after {self.config.coups} coups")
        elif isinstance(message, BetRejected) and message.reason_code == "NO_SUCH_COUP":
            await self._resend(table, message)
        elif isinstance(message, TableClosed):
            table.closed = True
        elif isinstance(message, CommandRejected):
            self.command_rejections.append(message)

    async def _send(self, bets: tuple[PlannedBet, ...]) -> None:
        for bet in bets:
            self.system.ledger.expect(bet)
        http, kafka = routed(bets, self.http.gateway.sent) if self.http else ([], list(bets))
        if self.http is not None:
            self.http.place(http)  # through the gateway: the stake debited first
        await self.system.sender.send_many([place_bet(bet) for bet in kafka])
        await self.system.sender.flush()

    async def _resend(self, table: TableRun, rejected: BetRejected) -> None:
        """A bet that overtook BettingOpened on its way to settlement (NO_SUCH_COUP does not use
        up the bet id) is sent again, unchanged, while its coup is open."""
        state = self.system.ledger.bets.get(rejected.bet_id)
        coup = self.system.ledger.coups.get((table.table_id, rejected.coup_id))
        tries = self.resends.get(rejected.bet_id, 0)
        if state is None or not state.planned or tries >= MAX_RESENDS:
            return
        if self.http is not None and rejected.bet_id in self.http.gateway.sent:
            return  # the gateway answered it for good (a new bet needs a new id)
        if coup is None or coup.betting_closed or table.current_coup != rejected.coup_id:
            return
        self.resends[rejected.bet_id] = tries + 1
        await self.system.sender.send(place_bet(state.planned[0]))  # delivered within linger

    async def close(self, table: TableRun, reason: str) -> None:
        if table.closing:
            return
        table.closing = True
        await self.system.sender.send_now(CloseTable(table_id=table.table_id, reason=reason))

    async def close_all(self, reason: str) -> None:
        for table in self.tables.values():
            await self.close(table, reason)

    def all_closed(self) -> bool:
        return all(table.closed for table in self.tables.values())

    def drained(self) -> bool:
        """Every table closed, its shoes closed (order revealed), every bet answered, and
        settled or refunded if accepted."""
        ledger = self.system.ledger
        shoes_open = any(
            shoe.closed is None for shoe in ledger.shoes.values() if shoe.table_id in self.tables
        )
        return (
            self.all_closed()
            and not shoes_open
            and not ledger.unanswered()
            and not ledger.unsettled()
        )

    def opening_failed(self) -> str | None:
        for rejection in self.command_rejections:
            if rejection.command_type == "OpenTable":
                return f"OpenTable rejected: {rejection.reason_code} {rejection.message}"
        return None


@dataclass
class DemoResult:
    """What `up` reports at the end."""

    ledger: Ledger
    driver: TableDriver
    elapsed: float
    interrupted: bool = False
    failure: str | None = None
    killed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failure is None and not self.interrupted and not self.ledger.errors()


View = Callable[[Ledger, TableDriver], None]


@contextlib.contextmanager
def _servers(
    config: DemoConfig, say: Callable[[str], None]
) -> Iterator[tuple[str, KafkaLogins, dict[str, str]]]:
    """Kafka (and PostgreSQL) for the run: given, already running, or started (and stopped
    afterwards) through services.dev.infra; with how each client logs in to that Kafka (the
    local broker: each its own principal; a given one: the environment's login)."""
    from services.dev.infra.kafka import KafkaBroker
    from services.dev.infra.postgres import PostgresServer

    started: list[Callable[[], object]] = []
    try:
        bootstrap = config.bootstrap
        if bootstrap is None:
            broker = KafkaBroker.for_project(home=config.data_dir.resolve() / "kafka", port=None)
            if broker.pid() is None:
                started.append(broker.stop)
            bootstrap = broker.start()
            logins = KafkaLogins.of_broker(broker)
        else:
            logins = KafkaLogins.for_bootstrap(bootstrap, config.data_dir / "kafka")
        postgres: dict[str, str] = {}
        if config.postgres_env is not None:
            postgres = dict(config.postgres_env)
        if config.postgres and not postgres:
            server = PostgresServer(home=config.data_dir.resolve() / "postgres")
            if server.pid() is None:
                started.append(server.stop)
            postgres = server.start()
        yield bootstrap, logins, postgres
    finally:
        if started:
            say("stopping the servers this run started ...")
        for stop in reversed(started):
            stop()


STORE_MARKER = "up-kafka.json"


async def check_store_matches_kafka(
    data_dir: Path,
    bootstrap: str,
    prefix: str,
    postgres: Mapping[str, str],
    logins: KafkaLogins | None = None,
) -> str | None:
    """A warning when the SQLite stores under ``data_dir`` were written against another Kafka
    cluster or topic prefix than this run's. The services remember how far they read each
    topic partition by its name; on new topics, commands at offsets they think they handled
    would be skipped. (Not checked for PostgreSQL, whose stores live elsewhere.) A
    partitioned run's stores (``<service>-p<N>.sqlite``) count too."""
    if postgres:
        return None
    marker = data_dir / STORE_MARKER
    auth = (logins or KafkaLogins()).auth(ADMIN)
    current = {"cluster_id": await cluster_id(bootstrap, auth=auth), "topic_prefix": prefix}
    stores = [data_dir / f"{name}.sqlite" for name in SERVICES]
    stores += [path for name in SERVICES for path in data_dir.glob(f"{name}-p*.sqlite")]
    previous: dict[str, str] | None = None
    with contextlib.suppress(OSError, ValueError):
        previous = json.loads(marker.read_text())
    marker.write_text(json.dumps(current))
    if any(store.exists() for store in stores) and previous != current:
        return (
            f"WARNING: the event stores in {data_dir} were written with another Kafka "
            f"(or topic prefix) than this one; the services may skip commands they think they "
            f"have handled. Use a fresh --data-dir (or remove its *.sqlite files) for a clean run."
        )
    return None


async def run_demo(
    config: DemoConfig,
    view: View | None = None,
    stop: asyncio.Event | None = None,
    say: Callable[[str], None] = print,
) -> DemoResult:
    """Play the demo; see the module docstring. ``stop`` (set on Ctrl-C) ends it early."""
    stop = stop or asyncio.Event()
    run_id = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
    data_dir = config.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    with _servers(config, say) as (bootstrap, logins, postgres):
        settings = ServiceSettings(
            bootstrap=bootstrap,
            data_dir=data_dir,
            topic_prefix=config.topic_prefix,
            postgres=postgres,
            logins=logins,
        )
        if postgres:
            where = f"{postgres.get('POSTGRES_HOST', '?')}:{postgres.get('POSTGRES_PORT', '5432')}"
            say(f"event stores: PostgreSQL {where}/{postgres.get('POSTGRES_DBNAME', '?')}")
        else:
            say(f"event stores: SQLite files in {data_dir}")
        ledger = Ledger()
        operators = run_operators(settings)
        gateway = DemoGateway(data_dir, operators=operators) if config.gateway else None
        services: tuple[str, ...] = SERVICES
        if gateway is not None:
            settings = gateway_settings(settings, gateway)
            services = (*SERVICES, "gateway")
        studio = contextlib.AsyncExitStack()
        shoe: LoopbackServer | None = None
        if config.studio:
            table = TableDriver.table_ids(config, run_id)[0]
            settings, shoe = await _studio_shoe(studio, settings, config, table)
            services = (*services, "studio-bridge")
        system = LocalSystem(settings, data_dir / "logs", services=services, ledger=ledger)
        driver = TableDriver(config, system, run_id)
        driver.studio = shoe
        system.accept = driver.ours
        system.reactors.append(driver.react)
        result = DemoResult(ledger, driver, 0.0)
        started = time.monotonic()
        dashboard = None
        try:
            prefix = config.topic_prefix
            warning = await check_store_matches_kafka(data_dir, bootstrap, prefix, postgres, logins)
            if warning:
                say(warning)
            if gateway is not None:
                gateway.prepare(logins)
                driver.http = HttpBettors(gateway)
                wallets = ", ".join(str(gateway.wallet_db(op)) for op in operators)
                say(f"the gateway's API: {gateway.url}; the demo wallets: {wallets}")
            say(f"starting the services (logs in {data_dir / 'logs'}) ...")
            await system.start(ready_timeout=config.ready_timeout)
            say("services ready; opening the table" + ("s" if config.tables > 1 else ""))
            dashboard = await _start_dashboard(  # issue 6
                bootstrap, config.topic_prefix, say, logins.auth(DASHBOARD)
            )
            await driver.start()
            driver.started = driver.last_progress = time.monotonic()
            await _play(config, system, driver, stop, view)
            if gateway is not None and config.coups is not None and not stop.is_set():
                result.failure = await _balances_right(system, gateway, config.drain_timeout)
                if result.failure is None:
                    say(f"wallet: all {len(gateway.balances())} players' balances are right")
        except asyncio.CancelledError:
            result.interrupted = True
            result.failure = "interrupted"
        except (SystemTimeout, RuntimeError, OSError) as error:
            result.failure = f"{type(error).__name__}: {error}"
            if "bootstrap" in str(error).lower():
                result.failure += (
                    f" (is Kafka running on {bootstrap}? leave out --kafka to start a local one,"
                    " or run `punto-banco infra up`)"
                )
        finally:
            result.interrupted = result.interrupted or stop.is_set()
            result.elapsed = time.monotonic() - started
            if dashboard is not None:  # issue 6: the live dashboard
                await dashboard.stop()
            say("stopping the services ...")
            try:
                if driver.http is not None:
                    await driver.http.close()
                result.killed = await asyncio.shield(system.stop())
            except asyncio.CancelledError:  # Ctrl-C again while stopping: no more waiting
                result.interrupted = True
                result.killed = stop_all(system.services.values(), timeout=5)
            if gateway is not None:
                gateway.stop()
            await studio.aclose()
        if view is not None:
            view(ledger, driver)
        return result


async def _studio_shoe(
    stack: contextlib.AsyncExitStack, settings: ServiceSettings, config: DemoConfig, table: str
) -> tuple[ServiceSettings, LoopbackServer]:
    """``--studio``: a simulated card-reading shoe dealing ``table`` (one shoe of
    ``config.decks``, a coup each time betting closes), served until ``stack`` closes; its
    device bridge's key made for that table alone. The run's settings with the bridge's."""
    device = Device(decks=config.decks, cut_card_from_end=max(config.cut_card_from_end, 1))
    server = await stack.enter_async_context(LoopbackServer(device, pace=0.05, heartbeat=2.0))
    init_keys(
        Settings(service="studio-bridge", data_dir=settings.data_dir), ["studio-bridge"], [table]
    )
    extra = {**settings.extra, "PB_STUDIO_TABLE": table, "PB_STUDIO_DEVICE_PORT": str(server.port)}
    return dataclasses.replace(settings, extra=extra), server


async def _balances_right(system: LocalSystem, gateway: DemoGateway, timeout: float) -> str | None:
    """None once every player's wallet balance is the start minus stakes plus returns (the
    last credits may still be on their way); else what is wrong after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        await system.pump(timeout_ms=100)
        problems = balance_problems(gateway, system.seen(BetSettled), system.seen(BetRefunded))
        if not problems:
            return None
        if time.monotonic() > deadline:
            return "wallet balances wrong: " + "; ".join(problems[:5])
        await asyncio.sleep(0.2)


async def _start_dashboard(
    bootstrap: str, prefix: str, say: Callable[[str], None], auth: KafkaAuth
) -> Any:
    """The live dashboard (services.tools.dashboard) on loopback; its URL is said. None if off."""
    import os

    from services.tools.dashboard.server import start_for_up

    return await start_for_up(bootstrap, prefix, say, os.environ, auth)


async def _play(
    config: DemoConfig,
    system: LocalSystem,
    driver: TableDriver,
    stop: asyncio.Event,
    view: View | None,
) -> None:
    last_view = 0.0
    closing_since: float | None = None
    while True:
        await system.pump(timeout_ms=100)
        system.check_alive()
        failed = driver.opening_failed()
        if failed:
            raise RuntimeError(failed)
        now = time.monotonic()
        if view is not None and now - last_view > 0.25:
            view(system.ledger, driver)
            last_view = now
        if stop.is_set() and closing_since is None:
            await driver.close_all("stopped by the operator")
        if any(table.closing for table in driver.tables.values()) and closing_since is None:
            closing_since = now
        if driver.drained():
            return
        if (
            closing_since is not None
            and driver.all_closed()
            and (now - closing_since > config.drain_timeout)
        ):
            return  # the summary says what is missing
        if now - driver.last_progress > config.stall_timeout:
            raise SystemTimeout(
                f"nothing happened at the tables for {config.stall_timeout:.0f} s; "
                f"the services' logs end with:\n{system.log_tails()}"
            )
