"""The gateway's test system: the three services, the reference wallet and the gateway, on the
session's real broker, with a signed HTTP client.

- :class:`WalletProcess`: ``examples/wallet.py`` as a child process (its balances in a SQLite
  file, so it can be killed and started again), with its test controls (faults, balances);
- :func:`gateway_system`: shoe, dealing and settlement serving operator ``acme`` in this
  process, a wallet, and the gateway (in this process, or as ``punto-banco serve gateway``
  children: ``GatewayProcess``) logged in as ``gateway-acme``;
- :class:`SignedClient`: requests signed as the platform signs them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

from contracts import TABLE_COMMANDS, BetLimitSpec, CloseBetting, OpenTable
from services.dealing.service import build_service as build_dealing
from services.dev.demo.gateway import wallet_command
from services.dev.infra.ports import free_port
from services.gateway.auth import signed_headers
from services.gateway.config import GatewayConfig
from services.gateway.host import Gateway
from services.gateway.operators import OperatorKeys, OperatorRegistry
from services.settlement.service import build_service as build_settlement
from services.shared.platform.host import KafkaService
from services.shared.platform.settings import Settings, replace
from services.shoe.service import build_service as build_shoe
from tests import kafka_logins
from tests.integration.platform.kafka_tools import send_messages, settings_for
from tests.signing_keys import key_env
from tests.supervisors import keyring_path

ROOT = Path(__file__).resolve().parents[1]
OPERATOR = "acme"
INITIAL = 100_000
LONG_WINDOW = 60_000
"""A betting window (ms) no test outlasts: the test closes betting itself
(:meth:`GatewaySystem.close_betting`), as a window of wall time can close before a loaded
machine places the last bet."""
BET_TYPES = ("player", "banker", "tie", "player_pair", "banker_pair")


async def until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``condition`` (sync or async) until truthy; AssertionError naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if asyncio.iscoroutine(found):
            found = await found
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)


class WalletProcess:
    """The reference wallet as a child process (see the module docstring)."""

    def __init__(self, folder: Path, secret: str, initial: int = INITIAL) -> None:
        self.db = folder / "wallet.sqlite"
        self.secret = secret
        self.initial = initial
        self.port = 0
        self.process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = subprocess.Popen(
            wallet_command(self.port, self.db, self.initial, test_controls=True),
            env={**os.environ, "PB_WALLET_SECRET": self.secret},
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert "listening on" in line, line
        self.port = int(line.rsplit(":", 1)[1])

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    async def fault(self, **rule: Any) -> None:
        async with httpx2.AsyncClient() as client:
            answer = await client.post(f"{self.url}/_faults", content=json.dumps(rule))
            answer.raise_for_status()

    async def calls(self) -> list[list[Any]]:
        """Every call answered so far: [kind, status]."""
        async with httpx2.AsyncClient() as client:
            answer = await client.get(f"{self.url}/_calls")
            answer.raise_for_status()
            found: list[list[Any]] = answer.json()
            return found

    async def balances(self) -> dict[str, int]:
        async with httpx2.AsyncClient() as client:
            answer = await client.get(f"{self.url}/_balances")
            answer.raise_for_status()
            found: dict[str, int] = answer.json()
            return found


class SignedClient:
    """An HTTP client signing each request as operator ``operator``."""

    def __init__(self, url: str, operator: str, secret: str) -> None:
        self.url = url
        self.operator = operator
        self.secret = secret
        self.client = httpx2.AsyncClient(base_url=url, timeout=30)

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        now: float | None = None,
    ) -> httpx2.Response:
        content = raw if raw is not None else b"" if body is None else json.dumps(body).encode()
        signed = signed_headers(self.operator, self.secret, method, path, content, now)
        if content:
            signed["content-type"] = "application/json"
        return await self.client.request(
            method, path, content=content, headers={**signed, **(headers or {})}
        )

    async def close(self) -> None:
        await self.client.aclose()


class GatewayProcess:
    """``punto-banco serve gateway`` as a child process, on the system's settings."""

    def __init__(self, system: GatewaySystem, folder: Path) -> None:
        self.port = free_port()
        self.log = folder / f"gateway-{self.port}.log"
        settings = system.settings
        self.env = {
            **os.environ,
            **key_env(),
            **kafka_logins.env(f"gateway-{OPERATOR}"),
            "KAFKA_BOOTSTRAP_SERVERS": settings.kafka_bootstrap_servers,
            "PB_TOPIC_PREFIX": settings.topic_prefix,
            "PB_DATA_DIR": str(settings.data_dir),
            "PB_PERSISTENCE": settings.persistence,
            "PB_OPERATORS_DIR": str(system.registry_dir),
            "PB_GATEWAY_OPERATORS": OPERATOR,
            "PB_GATEWAY_PORT": str(self.port),
            "PB_WALLET_RETRY": "0.2,0.5,1",
            "PB_WALLET_TIMEOUT": str(system.config.wallet_timeout),
            "PB_RELAY_POLL_INTERVAL": "0.05",
        }
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [str(ROOT / ".venv" / "bin" / "punto-banco"), "serve", "gateway"],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        await until(
            lambda: "gateway: serving" in self.log.read_text(errors="replace"),
            90,
            f"the gateway to serve ({self.log})",
        )

    def kill(self) -> None:
        if self.process is not None:
            terminate(self.process)
            self.process = None


@dataclass
class GatewaySystem:
    settings: Settings  # the gateway's (gateway-acme)
    keys: OperatorKeys
    config: GatewayConfig
    wallet: WalletProcess | None
    registry_dir: Path
    gateway: Gateway | None = None
    client: SignedClient | None = None
    hosts: list[KafkaService[Any]] = field(default_factory=list)
    service_settings: dict[str, Settings] = field(default_factory=dict)

    async def restart_settlement(self) -> None:
        """Start settlement again (after ``hosts[2].stop()``), on its store."""
        settings = self.service_settings["settlement"]
        self.hosts[2] = build_settlement(settings)
        await self.hosts[2].start()
        await self.hosts[2].wait_ready()

    @property
    def api(self) -> SignedClient:
        assert self.client is not None
        return self.client

    async def start_gateway(self) -> None:
        self.gateway = Gateway(self.settings, self.config, [self.keys])
        await self.gateway.start()

        assert self.gateway.http is not None
        self.use(self.gateway.http.url)

    def use(self, url: str) -> None:
        """Talk to the gateway at ``url`` (a process of its own)."""
        if self.client is None:
            self.client = SignedClient(url, OPERATOR, self.keys.api_secret)
        else:
            self.client.client.base_url = httpx2.URL(url)

    async def stop_gateway(self) -> None:
        if self.gateway is not None:
            await self.gateway.stop()
            self.gateway = None

    async def open_table(self, table_id: str = "vip-1", window_ms: int = LONG_WINDOW) -> None:
        command = OpenTable(
            table_id=table_id,
            decks=1,
            limits={t: BetLimitSpec(minimum=100, maximum=50_000) for t in BET_TYPES},
            currency="EUR",
            betting_window_ms=window_ms,
            cut_card_from_end=14,
        )
        await send_messages(self.settings, TABLE_COMMANDS, [command])

    async def close_betting(self, coup_id: str, table_id: str = "vip-1") -> None:
        """Close betting on ``coup_id`` now (a test that bets under a long window)."""
        await send_messages(
            self.settings, TABLE_COMMANDS, [CloseBetting(table_id=table_id, coup_id=coup_id)]
        )

    async def open_coup(self, table_id: str = "vip-1", after: str | None = None) -> str:
        """The coup open for bets at the table (another than ``after``)."""

        async def found() -> str | None:
            answer = await self.api.request("GET", "/v1/tables")
            assert answer.status_code == 200, answer.text
            for table in answer.json():
                coup = table["coup"]
                if table["table_id"] == table_id and coup and coup["coup_id"] != after:
                    return str(coup["coup_id"])
            return None

        coup: str = await until(found, 60, f"a coup open for bets at {table_id}")
        return coup

    async def bet(self, bet_id: str, coup_id: str, **fields: Any) -> httpx2.Response:
        body = {
            "bet_id": bet_id,
            "player_id": "p1",
            "table_id": "vip-1",
            "coup_id": coup_id,
            "bet_type": "banker",
            "amount": 1000,
            "currency": "EUR",
            **fields,
        }
        return await self.api.request("POST", "/v1/bets", body)

    async def view(self, bet_id: str) -> dict[str, Any]:
        answer = await self.api.request("GET", f"/v1/bets/{bet_id}")
        assert answer.status_code == 200, answer.text
        found: dict[str, Any] = answer.json()
        return found


@contextlib.asynccontextmanager
async def gateway_system(
    tmp_path: Path,
    kafka_bootstrap: str,
    *,
    wallet: bool = True,
    start_gateway: bool = True,
    postgres_env: dict[str, str] | None = None,
    **config: Any,
) -> AsyncIterator[GatewaySystem]:
    """Shoe, dealing, settlement (operator ``acme``), the wallet and the gateway."""
    operators = (OPERATOR,)
    base = settings_for(
        "dealing",
        kafka_bootstrap,
        data_dir=tmp_path,
        operators=operators,
        postgres_env=postgres_env,
    )
    prefix = base.topic_prefix.rstrip(".")

    def settings(name: str) -> Settings:
        return settings_for(
            name,
            kafka_bootstrap,
            data_dir=tmp_path,
            prefix=prefix,
            operators=operators,
            postgres_env=postgres_env,
            supervisor_keyring=str(keyring_path()),
        )

    own = replace(
        settings(f"gateway-{OPERATOR}"), kafka_auth=kafka_logins.auth(f"gateway-{OPERATOR}")
    )
    registry = OperatorRegistry(tmp_path / "operators")
    wallet_secret = secrets.token_urlsafe(16)
    wallet_process = WalletProcess(tmp_path, wallet_secret) if wallet else None
    if wallet_process is not None:
        wallet_process.start()
    keys = registry.add(OPERATOR, wallet_process.url if wallet_process else None)
    keys = dataclasses.replace(keys, wallet_secret=wallet_secret)
    registry.folder.joinpath(f"{OPERATOR}.json").write_bytes(keys.to_json())
    system = GatewaySystem(
        own,
        keys,
        GatewayConfig(port=0, wallet_retry=(0.2, 0.5, 1.0), **config),
        wallet_process,
        registry.folder,
    )
    system.service_settings = {name: settings(name) for name in ("shoe", "dealing", "settlement")}
    system.hosts = [
        build_shoe(settings("shoe")),
        build_dealing(settings("dealing")),
        build_settlement(settings("settlement")),
    ]
    try:
        for host in system.hosts:
            await host.start()
        for host in system.hosts:
            await host.wait_ready()
        if start_gateway:
            await system.start_gateway()
        yield system
    finally:
        await system.stop_gateway()
        for host in reversed(system.hosts):
            await host.stop()
        if system.client is not None:
            await system.client.close()
        if wallet_process is not None:
            wallet_process.kill()


def terminate(process: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGKILL)
    process.wait()
