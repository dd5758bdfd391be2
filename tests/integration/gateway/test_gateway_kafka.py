"""The gateway on real Kafka with the three services and the reference wallet: bets placed over
HTTP are answered by settlement, their stakes debited first, their returns credited, refused
bets' stakes rolled back; every player's balance ends as the settlements say."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from tests.gateway_harness import INITIAL, LONG_WINDOW, GatewaySystem, gateway_system, until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


async def settled(system: GatewaySystem, bet_ids: list[str]) -> list[dict[str, Any]]:
    """Every bet's view once each is done: refused, or settled with its calls confirmed."""

    async def done() -> list[dict[str, Any]] | None:
        views = [await system.view(bet_id) for bet_id in bet_ids]
        for view in views:
            calls = all(t["state"] != "requested" for t in view["transactions"])
            if view["status"] == "PENDING" or not calls:
                return None
            if view["status"] == "ACCEPTED" and view["settlement"] is None:
                return None
        return views

    found: list[dict[str, Any]] = await until(done, 120, "every bet settled and confirmed")
    return found


def expected_balances(views: list[dict[str, Any]]) -> dict[str, int]:
    balances: dict[str, int] = {}
    for view in views:
        player = view["player_id"]
        balances.setdefault(player, INITIAL)
        if view["status"] == "ACCEPTED":
            balances[player] += view["settlement"]["returned"] - view["amount"]
    return balances


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_bets_through_the_api_move_each_players_money_once(
    tmp_path: Path, kafka_bootstrap: str, request: pytest.FixtureRequest, store: str
) -> None:
    postgres = request.getfixturevalue("postgres_env") if store == "postgres" else None
    async with gateway_system(tmp_path, kafka_bootstrap, postgres_env=postgres) as system:
        assert system.wallet is not None
        await system.open_table(window_ms=LONG_WINDOW)  # closed below, after the bets
        rng = random.Random(3)
        bet_ids: list[str] = []
        coup = None
        for _ in range(2):
            coup = await system.open_coup(after=coup)
            for n in range(8):
                bet_id = f"{coup}/{n}"
                answer = await system.bet(
                    bet_id,
                    coup,
                    player_id=f"p{n % 4}",
                    bet_type=rng.choice(["player", "banker", "tie"]),
                    amount=rng.choice([100, 2500, 10_000]),
                )
                assert answer.status_code == 200, answer.text
                assert answer.json()["status"] in ("ACCEPTED", "REJECTED")
                bet_ids.append(bet_id)
            # another player backs both sides: the second is refused, its stake rolled back
            first = await system.bet(f"{coup}/x1", coup, player_id="p9", bet_type="player")
            second = await system.bet(f"{coup}/x2", coup, player_id="p9", bet_type="banker")
            assert first.json()["status"] == "ACCEPTED"
            assert second.json() == {
                "bet_id": f"{coup}/x2",
                "status": "REJECTED",
                "reason": "OPPOSING_BETS",
                "message": second.json()["message"],
            }
            bet_ids += [f"{coup}/x1", f"{coup}/x2"]
            await system.close_betting(coup)
        views = await settled(system, bet_ids)
        refused = [v for v in views if v["status"] == "REJECTED"]
        assert refused and all(
            [t["kind"] for t in v["transactions"]] == ["debit", "rollback"] for v in refused
        )
        balances = await system.wallet.balances()
        for player, balance in expected_balances(views).items():
            assert balances[player] == balance, player


async def test_without_a_wallet_bets_are_placed_and_settled(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    async with gateway_system(tmp_path, kafka_bootstrap, wallet=False) as system:
        await system.open_table(window_ms=LONG_WINDOW)
        coup = await system.open_coup()
        answer = await system.bet("b1", coup)
        assert answer.json() == {"bet_id": "b1", "status": "ACCEPTED"}
        await system.close_betting(coup)
        (view,) = await settled(system, ["b1"])
        assert view["transactions"] == []
        assert view["settlement"]["stake"] == 1000
