"""`punto-banco up`'s casino platforms: the gateway, a demo wallet each, and bettors over HTTP.

:meth:`DemoGateway.prepare` gives each of the run's operators (``PB_OPERATORS``; the house
alone by default) its secrets in ``<data dir>/keys/operators/`` (on the local broker with its
principal's password: each operator's gateway service logs in as ``gateway-<operator>``) and
its gateway service a signing key, and starts a reference wallet per operator
(``examples/wallet.py``, balances in ``<data dir>/demo-wallet.sqlite``, another operator's in
``demo-wallet-<operator>.sqlite``, every player starting with :data:`START_BALANCE`); the
gateway runs as one more service of the run (``punto-banco serve gateway``, port
``PB_GATEWAY_PORT``, one gateway service per operator). :class:`HttpBettors` places the crowd's
well-formed bets through the API as each bettor's operator (signed, concurrent); the malformed
ones (a bad amount, an unknown bet type) still go to Kafka, where settlement answers them. A
bet sent again goes the way its first send went (:func:`routed`): a platform resends through
the gateway, and a copy on Kafka would make a second writer of the gateway's bet ids.
:func:`balance_problems` is the end check of ``up --coups N``: every player's balance in the
wallets equals the start minus the stakes plus what the settlements returned (refunds give the
stake back), from the settlements read on Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx2

from contracts import HOUSE, BetRefunded, BetSettled
from services.dev.demo.bettors import BetKind, PlannedBet
from services.dev.demo.bus import operator_of
from services.dev.demo.processes import PROJECT_ROOT, ServiceSettings
from services.dev.infra.kafka_clients import KafkaLogins
from services.dev.infra.ports import free_port, port_is_free
from services.gateway.auth import signed_headers
from services.gateway.operators import OperatorKeys, OperatorRegistry, service_name

START_BALANCE = 10**12
"""Every demo player's starting balance (minor units): no bet is refused for funds."""
GATEWAY_PORT = 8104
WALLET_PORT = 8200
HTTP_KINDS = frozenset(
    {
        BetKind.VALID,
        BetKind.OPPOSING,
        BetKind.LATE,
        BetKind.BELOW_MINIMUM,
        BetKind.ABOVE_MAXIMUM,
        BetKind.WRONG_CURRENCY,
    }
)
"""The planned bets the API takes (well-formed); the others go to Kafka (a REPEAT goes the way
of the bet it repeats: :func:`routed`)."""


@dataclass
class DemoWallet:
    """One operator's reference wallet process."""

    port: int
    db: Path
    process: subprocess.Popen[bytes] | None = None


@dataclass
class DemoGateway:
    """The run's operators, their wallets and the gateway's settings (see the module
    docstring)."""

    data_dir: Path
    wallet_on: bool = True  # False: the operators have no wallet (their money is their own)
    port: int = GATEWAY_PORT
    wallet_port: int = WALLET_PORT  # the first operator's wallet; the others' any free port
    operators: tuple[str, ...] = (HOUSE,)
    keys: dict[str, OperatorKeys] = field(default_factory=dict)
    wallets: dict[str, DemoWallet] = field(default_factory=dict)
    sent: dict[str, PlannedBet] = field(default_factory=dict)  # bet id -> bet sent over HTTP

    def __post_init__(self) -> None:
        """The usual ports when free (another run may hold them), else any free ones."""
        self.port = self.port if port_is_free(self.port) else free_port()
        self.wallet_port = self.wallet_port if port_is_free(self.wallet_port) else free_port()

    @property
    def operator(self) -> str:
        """The first operator (the house unless ``PB_OPERATORS`` names others)."""
        return self.operators[0]

    @property
    def api_secret(self) -> str:
        """The first operator's API secret (after :meth:`prepare`)."""
        return self.keys[self.operator].api_secret

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wallet_db(self, operator: str) -> Path:
        name = "demo-wallet" if operator == HOUSE else f"demo-wallet-{operator}"
        return self.data_dir / f"{name}.sqlite"

    def env(self) -> dict[str, str]:
        """What ``punto-banco serve gateway`` gets besides the run's settings."""
        return {
            "PB_OPERATORS_DIR": str(self.data_dir / "keys" / "operators"),
            "PB_GATEWAY_OPERATORS": ",".join(self.operators),
            "PB_GATEWAY_PORT": str(self.port),
            "PB_WALLET_RETRY": "0.2,1,2",
        }

    def prepare(self, logins: KafkaLogins | None = None) -> None:
        """Each operator's secrets (new for each run; on the local broker of ``logins`` its
        gateway principal's password), the gateway services' keys, the wallets started."""
        from services.tools.admin.keys import (
            init_run_keys,
        )

        registry = OperatorRegistry(self.data_dir / "keys" / "operators")
        for number, operator in enumerate(self.operators):
            registry.remove(operator)
            port = self.wallet_port if number == 0 else free_port()
            url = f"http://127.0.0.1:{port}" if self.wallet_on else None
            keys = registry.add(operator, url, gateway_password(logins, operator))
            self.keys[operator] = keys
            if self.wallet_on:
                self.wallets[operator] = self._start_wallet(operator, port, keys.wallet_secret)
        init_run_keys(self.data_dir, tuple(service_name(op) for op in self.operators))

    def _start_wallet(self, operator: str, port: int, secret: str) -> DemoWallet:
        wallet = DemoWallet(port, self.wallet_db(operator))
        log = self.data_dir / "logs" / f"{wallet.db.stem.removeprefix('demo-')}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            wallet.process = subprocess.Popen(
                wallet_command(port, wallet.db, START_BALANCE),
                env={**os.environ, "PB_WALLET_SECRET": secret},
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=PROJECT_ROOT,
            )
        return wallet

    def stop(self) -> None:
        for wallet in self.wallets.values():
            if wallet.process is None:
                continue
            wallet.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                wallet.process.wait(timeout=5)
            if wallet.process.poll() is None:
                wallet.process.kill()
            wallet.process = None

    def balances(self) -> dict[str, int]:
        """Every player's balance, in its operator's wallet (a bettor plays for one)."""
        found: dict[str, int] = {}
        for wallet in self.wallets.values():
            if wallet.db.exists():
                with contextlib.closing(sqlite3.connect(wallet.db)) as db:
                    rows = db.execute("SELECT player_id, balance FROM players").fetchall()
                found.update((player, int(balance)) for player, balance in rows)
        return found


def gateway_password(logins: KafkaLogins | None, operator: str) -> str | None:
    """The password of ``operator``'s gateway principal on the local broker of ``logins``
    (made when missing), for its operator file; None for the house (the gateway process logs
    in as ``gateway``) or when every client shares one login."""
    if logins is None or logins.home is None or operator == HOUSE:
        return None
    from services.dev.infra.kafka_principals import BrokerPrincipals

    return BrokerPrincipals(logins.home).credentials.ensure(service_name(operator))


def wallet_command(port: int, db: Path, initial: int, *, test_controls: bool = False) -> list[str]:
    """The reference wallet's command line (``examples/wallet.py``; its secret in the
    ``PB_WALLET_SECRET`` of its environment)."""
    command = [sys.executable, str(PROJECT_ROOT / "examples" / "wallet.py")]
    command += ["--port", str(port), "--db", str(db), "--initial-balance", str(initial)]
    return [*command, "--test-controls"] if test_controls else command


def routed(
    bets: Iterable[PlannedBet], over_http: Container[str] = ()
) -> tuple[list[PlannedBet], list[PlannedBet]]:
    """(over HTTP, over Kafka): a bet goes over HTTP when the API takes its shape, a REPEAT
    when the bet it repeats went over HTTP (in ``bets`` before it, or in ``over_http``)."""
    http: list[PlannedBet] = []
    kafka: list[PlannedBet] = []
    for bet in bets:
        if bet.kind is BetKind.REPEAT:
            first = bet.bet_id in over_http or any(b.bet_id == bet.bet_id for b in http)
            (http if first else kafka).append(bet)
            continue
        whole = bet.amount == bet.amount.to_integral_value() and bet.amount > 0
        (http if bet.kind in HTTP_KINDS and whole else kafka).append(bet)
    return http, kafka


class HttpBettors:
    """Places bets through the gateway's API as the run's operator."""

    def __init__(self, gateway: DemoGateway) -> None:
        self.gateway = gateway
        self.client = httpx2.AsyncClient(base_url=gateway.url, timeout=30)
        self.failures: list[str] = []
        self._tasks: set[asyncio.Task[None]] = set()

    def place(self, bets: Iterable[PlannedBet]) -> None:
        """Send each bet in a task of its own (each POST waits for settlement's answer)."""
        for bet in bets:
            self.gateway.sent[bet.bet_id] = bet
            task = asyncio.create_task(self._post(bet))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _post(self, bet: PlannedBet) -> None:
        body = json.dumps(
            {
                "bet_id": bet.bet_id,
                "player_id": bet.bettor_id,
                "table_id": bet.table_id,
                "coup_id": bet.coup_id,
                "bet_type": bet.bet_type,
                "amount": int(bet.amount),
                "currency": bet.currency,
            }
        ).encode()
        operator = operator_of(bet.bettor_id, self.gateway.operators)
        secret = self.gateway.keys[operator].api_secret
        headers = signed_headers(operator, secret, "POST", "/v1/bets", body)
        try:
            answer = await self.client.post(
                "/v1/bets",
                content=body,
                headers={**headers, "content-type": "application/json"},
            )
        except httpx2.HTTPError as error:
            self.failures.append(f"{bet.bet_id}: {error!r}")
            return
        if answer.status_code not in (200, 202):
            self.failures.append(f"{bet.bet_id}: {answer.status_code} {answer.text[:200]}")

    async def close(self) -> None:
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=30)
        await self.client.aclose()


def balance_problems(
    gateway: DemoGateway, settled: Iterable[BetSettled], refunded: Iterable[BetRefunded]
) -> list[str]:
    """Each player whose wallet balance is not the start minus stakes plus returns."""
    voided = {m.bet_id for m in refunded}
    expected: dict[str, int] = {}
    for message in {m.bet_id: m for m in settled}.values():
        if message.bet_id in gateway.sent and message.bet_id not in voided:
            player = message.bettor_id
            expected[player] = expected.get(player, 0) + message.returned - message.stake
    found = gateway.balances()
    players = set(expected) | {b.bettor_id for b in gateway.sent.values() if b.bettor_id in found}
    return [
        f"player {player}: wallet {found.get(player, START_BALANCE)}, expected "
        f"{START_BALANCE + expected.get(player, 0)}"
        for player in sorted(players)
        if found.get(player, START_BALANCE) != START_BALANCE + expected.get(player, 0)
    ]


def gateway_settings(settings: ServiceSettings, gateway: DemoGateway) -> ServiceSettings:
    """The run's settings with the gateway's variables for every child (harmless to others)."""
    extra: Mapping[str, str] = {**settings.extra, **gateway.env()}
    return ServiceSettings(
        settings.bootstrap,
        settings.data_dir,
        settings.topic_prefix,
        settings.postgres,
        extra,
        settings.logins,
    )
