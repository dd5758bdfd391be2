"""The gateway as its own process (``punto-banco serve gateway``), killed with SIGKILL mid-run:
a debit on its way when it dies is rolled back at the next start (the bet refused
WALLET_UNAVAILABLE, the same answer to the platform's resend), credits unconfirmed when it dies
are made after it, and every player's balance ends as the settlements say, each call applied
once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.gateway_harness import INITIAL, LONG_WINDOW, GatewayProcess, gateway_system, until
from tests.integration.gateway.test_gateway_kafka import expected_balances, settled

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(400)]


async def test_the_gateway_killed_mid_run_leaves_every_balance_right(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    async with gateway_system(
        tmp_path, kafka_bootstrap, start_gateway=False, wallet_timeout=5.0
    ) as system:
        wallet = system.wallet
        assert wallet is not None
        gateway = GatewayProcess(system, tmp_path)
        await gateway.start()
        system.use(gateway.url)
        await system.open_table(window_ms=LONG_WINDOW)
        coup = await system.open_coup()
        bet_ids = []
        for n in range(5):
            answer = await system.bet(f"a{n}", coup, player_id=f"s{n % 2}", bet_type="player")
            assert answer.json()["status"] == "ACCEPTED"
            bet_ids.append(f"a{n}")
        # a debit the wallet holds for 2 s: the gateway dies while it is on its way
        await wallet.fault(kind="debit", mode="delay", seconds=2, count=1)
        on_its_way = asyncio.ensure_future(system.bet("lost", coup, player_id="s-lost"))

        async def debit_held() -> bool:
            return (await wallet.calls()).count(["debit", "received"]) == 6

        await until(debit_held, 10, "the debit to reach the wallet")
        gateway.kill()  # SIGKILL: credits of the coup and the debit are in flight
        with pytest.raises(Exception):  # noqa: B017 (the connection is cut)
            await on_its_way
        gateway = GatewayProcess(system, tmp_path)
        await gateway.start()
        system.use(gateway.url)
        resent = await system.bet("lost", coup, player_id="s-lost")
        if resent.json()["status"] != "PENDING":
            assert resent.json()["status"] == "REJECTED"
        await system.close_betting(coup)
        coup = await system.open_coup(after=coup)
        for n in range(3):
            await system.bet(f"b{n}", coup, player_id=f"s{n % 2}", bet_type="banker")
            bet_ids.append(f"b{n}")
        await system.close_betting(coup)
        views = await settled(system, [*bet_ids, "lost"])
        lost = next(v for v in views if v["bet_id"] == "lost")
        assert lost["reason"] == "WALLET_UNAVAILABLE"
        assert {t["kind"]: t["state"] for t in lost["transactions"]} == {
            "debit": "failed",
            "rollback": "confirmed",
        }

        async def debit_landed() -> bool:
            return ["debit", 200] in await wallet.calls() or ["debit", 409] in await wallet.calls()

        await until(debit_landed, 20, "the held debit to reach the wallet")
        found = await wallet.balances()
        for player, balance in expected_balances(views).items():
            assert found.get(player, INITIAL) == balance, player
        gateway.kill()


async def test_a_second_gateway_waits_as_a_standby_and_takes_over(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    async with gateway_system(tmp_path, kafka_bootstrap, start_gateway=False) as system:
        first = GatewayProcess(system, tmp_path)
        await first.start()
        second = GatewayProcess(system, tmp_path)
        second_start = asyncio.ensure_future(second.start())  # waits for acme's store
        system.use(first.url)
        await system.open_table(window_ms=LONG_WINDOW)
        coup = await system.open_coup()
        for n in range(3):
            await system.bet(f"f{n}", coup, player_id=f"u{n}", bet_type="player")
        await system.close_betting(coup)
        await until(lambda: "standby" in second.log.read_text(errors="replace"), 60, "the standby")
        assert not second_start.done()
        first.kill()
        await second_start  # it holds the lease now, and serves
        system.use(second.url)
        coup = await system.open_coup(after=coup)
        for n in range(3):
            await system.bet(f"g{n}", coup, player_id=f"u{n}", bet_type="banker")
        await system.close_betting(coup)
        views = await settled(system, [f"f{n}" for n in range(3)] + [f"g{n}" for n in range(3)])
        assert system.wallet is not None
        found = await system.wallet.balances()
        for player, balance in expected_balances(views).items():
            assert found.get(player, INITIAL) == balance, player
        second.kill()
