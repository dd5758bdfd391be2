"""`punto-banco up`'s casino platform: the gateway, a demo wallet, and bettors playing over HTTP.

:func:`prepare_gateway` gives the run's operator (the house) its secrets in
``<data dir>/keys/operators/`` and the gateway its signing key, and starts the reference wallet
(``examples/wallet.py``, balances in ``<data dir>/demo-wallet.sqlite``, every player starting
with :data:`START_BALANCE`); the gateway runs as one more service of the run
(``punto-banco serve gateway``, port ``PB_GATEWAY_PORT``). :class:`HttpBettors` places the
crowd's well-formed bets through the API (signed, concurrent); the malformed ones (a bad
amount, an unknown bet type, a reused bet id) still go to Kafka, where settlement answers them.
:func:`balance_problems` is the end check of ``up --coups N``: every player's balance in the
wallet equals the start minus the stakes plus what the settlements returned (refunds give the
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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx2

from contracts import HOUSE, BetRefunded, BetSettled
from services.dev.demo.bettors import BetKind, PlannedBet
from services.dev.demo.processes import PROJECT_ROOT, ServiceSettings
from services.dev.infra.ports import free_port, port_is_free
from services.gateway.auth import signed_headers
from services.gateway.operators import OperatorRegistry, service_name

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
"""The planned bets the API takes (well-formed); the others go to Kafka."""


@dataclass
class DemoGateway:
    """The run's operator, wallet and gateway settings (see the module docstring)."""

    data_dir: Path
    operator: str = HOUSE
    wallet_on: bool = True  # False: the operator has no wallet (its money is its own)
    port: int = GATEWAY_PORT
    wallet_port: int = WALLET_PORT
    api_secret: str = ""
    wallet: subprocess.Popen[bytes] | None = None
    sent: dict[str, PlannedBet] = field(default_factory=dict)  # bet id -> bet sent over HTTP

    def __post_init__(self) -> None:
        """The usual ports when free (another run may hold them), else any free ones."""
        self.port = self.port if port_is_free(self.port) else free_port()
        self.wallet_port = self.wallet_port if port_is_free(self.wallet_port) else free_port()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def wallet_db(self) -> Path:
        return self.data_dir / "demo-wallet.sqlite"

    def env(self) -> dict[str, str]:
        """What ``punto-banco serve gateway`` gets besides the run's settings."""
        return {
            "PB_OPERATORS_DIR": str(self.data_dir / "keys" / "operators"),
            "PB_GATEWAY_OPERATORS": self.operator,
            "PB_GATEWAY_PORT": str(self.port),
            "PB_WALLET_RETRY": "0.2,1,2",
        }

    def prepare(self) -> None:
        """The operator's secrets (new for each run), the gateway's key, the wallet started."""
        from services.shared.platform.keys import init_run_keys

        registry = OperatorRegistry(self.data_dir / "keys" / "operators")
        registry.remove(self.operator)
        url = f"http://127.0.0.1:{self.wallet_port}" if self.wallet_on else None
        keys = registry.add(self.operator, url)
        self.api_secret = keys.api_secret
        init_run_keys(self.data_dir, (service_name(self.operator),))
        if not self.wallet_on:
            return
        log = self.data_dir / "logs" / "wallet.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            self.wallet = subprocess.Popen(
                wallet_command(self.wallet_port, self.wallet_db, START_BALANCE),
                env={**os.environ, "PB_WALLET_SECRET": keys.wallet_secret},
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=PROJECT_ROOT,
            )

    def stop(self) -> None:
        if self.wallet is not None:
            self.wallet.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.wallet.wait(timeout=5)
            if self.wallet.poll() is None:
                self.wallet.kill()
            self.wallet = None

    def balances(self) -> dict[str, int]:
        if not self.wallet_db.exists():
            return {}
        with contextlib.closing(sqlite3.connect(self.wallet_db)) as db:
            rows = db.execute("SELECT player_id, balance FROM players").fetchall()
        return {player: int(balance) for player, balance in rows}


def wallet_command(port: int, db: Path, initial: int, *, test_controls: bool = False) -> list[str]:
    """The reference wallet's command line (``examples/wallet.py``; its secret in the
    ``PB_WALLET_SECRET`` of its environment)."""
    command = [sys.executable, str(PROJECT_ROOT / "examples" / "wallet.py")]
    command += ["--port", str(port), "--db", str(db), "--initial-balance", str(initial)]
    return [*command, "--test-controls"] if test_controls else command


def routed(bets: Iterable[PlannedBet]) -> tuple[list[PlannedBet], list[PlannedBet]]:
    """(over HTTP, over Kafka): a bet goes over HTTP when the API takes its shape."""
    http: list[PlannedBet] = []
    kafka: list[PlannedBet] = []
    for bet in bets:
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
        headers = signed_headers(
            self.gateway.operator, self.gateway.api_secret, "POST", "/v1/bets", body
        )
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
