"""The wallet contract on real Kafka with a real HTTP wallet that fails on command: a debit whose
fate is unknown (a 5xx, no answer, a late answer, a redirect) is refused WALLET_UNAVAILABLE and
rolled back, never left standing; a refused debit moves nothing; credits and rollbacks are
retried until answered, each applied once; an answer that is not one, or a balance that does
not add up, is an incident; the money is right after the wallet or the gateway stops mid-run;
a corrected result moves each difference once."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from contracts import INCIDENTS, BetCorrected, BetRefunded, IncidentRaised, bet_events_topic
from tests.gateway_harness import (
    INITIAL,
    LONG_WINDOW,
    OPERATOR,
    GatewaySystem,
    gateway_system,
    until,
)
from tests.integration.gateway.test_gateway_kafka import expected_balances, settled
from tests.integration.platform.kafka_tools import send_messages
from tests.integration.settlement.test_settlement_kafka import TopicReader

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def kinds(view: dict[str, Any]) -> dict[str, str]:
    return {t["kind"]: t["state"] for t in view["transactions"]}


async def balances_right(system: GatewaySystem, bet_ids: list[str]) -> list[dict[str, Any]]:
    assert system.wallet is not None
    views = await settled(system, bet_ids)
    found = await system.wallet.balances()
    for player, balance in expected_balances(views).items():
        assert found.get(player, INITIAL) == balance, (player, views)
    return views


async def test_a_debit_whose_fate_is_unknown_is_refused_and_rolled_back(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    async with gateway_system(tmp_path, kafka_bootstrap, wallet_timeout=1.0) as system:
        wallet = system.wallet
        assert wallet is not None
        await system.open_table(window_ms=LONG_WINDOW)
        coup = await system.open_coup()
        cases = {
            "fail": {"mode": "fail", "status": 503},  # nothing applied: rollback 404
            "drop": {"mode": "drop"},  # applied, never answered: rollback reverses it
            "slow": {"mode": "delay", "seconds": 2.5},  # rolled back before it lands: 409
            "redirect": {"mode": "redirect"},  # never followed
        }
        for name, fault in cases.items():
            await wallet.fault(kind="debit", count=1, **fault)
            answer = await system.bet(f"u-{name}", coup, player_id=f"p-{name}")
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"] == "REJECTED"
            assert answer.json()["reason"] == "WALLET_UNAVAILABLE", name
        await system.close_betting(coup)
        views = await balances_right(system, [f"u-{name}" for name in cases])
        for view in views:
            assert kinds(view) == {"debit": "failed", "rollback": "confirmed"}
        # the late debit arrives after its rollback and is refused: the money stays

        async def late_debit_refused() -> bool:
            return ["debit", 409] in await wallet.calls()

        await until(late_debit_refused, 10, "the late debit to reach the wallet")
        assert (await wallet.balances()).get("p-slow", INITIAL) == INITIAL


async def test_a_refused_debit_refuses_the_bet_and_moves_nothing(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    async with gateway_system(tmp_path, kafka_bootstrap) as system:
        assert system.wallet is not None
        await system.open_table(window_ms=LONG_WINDOW)
        coup = await system.open_coup()
        await system.wallet.fault(kind="debit", mode="fail", status=402, count=1)
        poor = await system.bet("poor", coup, player_id="p-poor")
        await system.wallet.fault(kind="debit", mode="fail", status=403, count=1)
        barred = await system.bet("barred", coup, player_id="p-barred")
        assert poor.json()["reason"] == "INSUFFICIENT_FUNDS"
        assert barred.json()["reason"] == "WALLET_REFUSED"
        await system.close_betting(coup)
        for view in await balances_right(system, ["poor", "barred"]):
            assert kinds(view) == {"debit": "failed"}  # nothing moved: nothing to roll back


async def test_credits_are_retried_until_answered_and_applied_once(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    async with (
        gateway_system(tmp_path, kafka_bootstrap) as system,
        TopicReader(system.settings, INCIDENTS) as incidents,
    ):
        wallet = system.wallet
        assert wallet is not None
        await system.open_table(window_ms=LONG_WINDOW)
        coup = await system.open_coup()
        await wallet.fault(kind="credit", mode="fail", status=500, count=2)
        await wallet.fault(kind="credit", mode="drop", count=1)  # applied, answer lost
        await wallet.fault(kind="credit", mode="garbage", count=1)  # applied, 200 not JSON
        await wallet.fault(kind="debit", mode="negative", count=1)  # a balance below zero
        bet_ids = []
        for n, side in enumerate(["player", "banker", "tie", "player", "banker", "tie"]):
            answer = await system.bet(f"c{n}", coup, player_id=f"q{n}", bet_type=side)
            assert answer.json()["status"] == "ACCEPTED"
            bet_ids.append(f"c{n}")
        await system.close_betting(coup)
        views = await balances_right(system, bet_ids)
        credited = [v for v in views if v["settlement"]["returned"] > 0]
        assert credited and all(kinds(v)["credit"] == "confirmed" for v in credited)
        losers = [v for v in views if v["settlement"]["returned"] == 0]
        assert all("credit" not in kinds(v) for v in losers)  # no zero credits by default
        await incidents.wait_until(
            lambda: (
                {m.code for m in incidents.of_type(IncidentRaised) if m.service == "gateway-acme"}
                >= {"WALLET_BALANCE_MISMATCH", "WALLET_ANSWER_MALFORMED"}
            )
        )


async def test_money_is_right_when_the_wallet_and_the_gateway_stop_mid_run(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    async with gateway_system(tmp_path, kafka_bootstrap, wallet_silence=0.5) as system:
        wallet = system.wallet
        assert wallet is not None
        await system.open_table(window_ms=LONG_WINDOW)
        bet_ids: list[str] = []
        coup = await system.open_coup()
        for n in range(6):
            await system.bet(f"k1-{n}", coup, player_id=f"r{n % 3}", bet_type="player")
            bet_ids.append(f"k1-{n}")
        wallet.kill()  # the coup settles while the wallet is down: credits wait
        dead = await system.bet("k1-dead", coup, player_id="r9")  # its rollback waits too
        assert dead.json()["reason"] == "WALLET_UNAVAILABLE"
        await system.close_betting(coup)

        async def settled_unpaid() -> bool:
            views = [await system.view(b) for b in bet_ids]
            return all(v["settlement"] is not None for v in views)

        await until(settled_unpaid, 60, "the coup settled")

        async def not_ready() -> str | None:
            answer = await system.api.client.get("/ready")
            return answer.text if answer.status_code == 503 else None

        bet_ids.append("k1-dead")
        why = await until(not_ready, 30, "/ready to name the silent wallet")
        assert "acme: its wallet has not answered" in why
        metrics = (await system.api.client.get("/metrics")).text
        assert 'pb_wallet_calls_total{answer="none",kind="rollback",operator="acme"}' in metrics
        await system.stop_gateway()  # and the gateway stops with credits unconfirmed
        wallet.start()
        await system.start_gateway()
        coup = await system.open_coup(after=coup)
        for n in range(4):
            await system.bet(f"k2-{n}", coup, player_id=f"r{n % 3}", bet_type="banker")
            bet_ids.append(f"k2-{n}")
        await system.close_betting(coup)
        await balances_right(system, bet_ids)


async def test_bets_wait_for_a_stopped_settlement_and_the_money_ends_right(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    async with gateway_system(tmp_path, kafka_bootstrap, answer_wait=1.0) as system:
        await system.open_table(window_ms=LONG_WINDOW)
        coup = await system.open_coup()
        await system.hosts[2].stop()  # settlement stops: the bets are debited and placed
        answers = [
            await system.bet(f"s{n}", coup, player_id=f"t{n}", bet_type="banker") for n in range(3)
        ]
        for answer in answers:
            assert answer.status_code == 202 and answer.json()["status"] == "PENDING"
            assert answer.headers["location"] == f"/v1/bets/{answer.json()['bet_id']}"
        await system.close_betting(coup)
        await system.restart_settlement()  # it answers the bets placed while it was away
        views = await balances_right(system, ["s0", "s1", "s2"])
        assert all(kinds(v)["debit"] == "confirmed" for v in views)


async def test_a_corrected_result_moves_each_difference_once_through_the_wallet(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """Settlement's BetCorrected (sent here as settlement's relay sends it: a studio correction
    needs a device) turns each settled bet's result around: a loser is credited a win, a
    winner's return is debited back; a call failed, refused (an incident, once) or unanswered
    is made again and applied once; a redelivery moves nothing twice; every balance ends as the
    corrected results say, and back at the start when the coup is then voided (its refunds,
    too, sent as settlement's relay sends them: the gateway takes a source's facts in its
    order, so a real void after the injected corrections would be skipped as already seen)."""
    async with (
        gateway_system(tmp_path, kafka_bootstrap) as system,
        TopicReader(system.settings, INCIDENTS) as incidents,
    ):
        wallet = system.wallet
        assert wallet is not None
        await system.open_table(window_ms=LONG_WINDOW)
        coup = await system.open_coup()
        bet_ids = []
        for n, side in enumerate(["player", "banker"]):
            answer = await system.bet(f"x{n}", coup, player_id=f"x{n}", bet_type=side)
            assert answer.json()["status"] == "ACCEPTED"
            bet_ids.append(f"x{n}")
        await system.close_betting(coup)
        views = await balances_right(system, bet_ids)  # one side at least returns its stake
        corrections = [turned_around(view) for view in views]
        debits = sum(c.difference < 0 for c in corrections)
        assert debits >= 1
        await wallet.fault(kind="debit", mode="fail", status=402, count=2 * debits)
        await wallet.fault(kind="credit", mode="fail", status=503, count=1)
        await wallet.fault(kind="credit", mode="drop", count=1)  # applied, its answer lost
        topic = bet_events_topic(OPERATOR)
        await send_messages(system.settings, topic, corrections)
        await send_messages(system.settings, topic, corrections)  # delivered again

        async def answered() -> list[dict[str, Any]] | None:
            found = [await system.view(b) for b in bet_ids]
            calls = [t for v in found for t in v["transactions"] if t["correction_id"]]
            if len(calls) == 2 and all(t["state"] == "confirmed" for t in calls):
                return found
            return None

        views = await until(answered, 60, "each correction's call confirmed")
        for view, correction in zip(views, corrections, strict=True):
            (call,) = [t for t in view["transactions"] if t["correction_id"]]
            made = "correction-credit" if correction.difference > 0 else "correction-debit"
            assert (call["kind"], call["amount"]) == (made, abs(correction.difference))
            assert view["settlement"]["result"] == correction.result
        await balances_right(system, bet_ids)  # as the corrected results say, once each
        await incidents.wait_until(  # each refused debit raised once, not at every retry
            lambda: (
                sum(
                    m.code == "WALLET_CORRECTION_REFUSED" for m in incidents.of_type(IncidentRaised)
                )
                == debits
            )
        )
        day = corrections[0].occurred_at.date().isoformat()  # when settlement corrected
        answer = await system.api.request("GET", f"/v1/reconciliation?day={day}")
        (figures,) = answer.json()["currencies"]
        assert (figures["corrections"], figures["corrected"]) == (
            2,
            sum(c.difference for c in corrections),
        )

        # the corrected coup voided (settlement's refunds sent as its relay sends them, after
        # its corrections): every call that moved money reversed, each player's stake back
        views = [await system.view(b) for b in bet_ids]
        await send_messages(system.settings, topic, [refunded(view) for view in views])

        async def reversed_all() -> bool:
            found = [await system.view(b) for b in bet_ids]
            return all(
                v["refund"] and all(t["state"] == "confirmed" for t in v["transactions"])
                for v in found
            )

        await until(reversed_all, 60, "every bet refunded and its calls reversed")
        found = await wallet.balances()
        assert {p: found.get(p, INITIAL) for p in ("x0", "x1")} == {"x0": INITIAL, "x1": INITIAL}


def refunded(view: dict[str, Any]) -> BetRefunded:
    """Settlement's refund of the bet on its voided coup (relative to what it returns now)."""
    stake = view["settlement"]["stake"]
    return BetRefunded(
        table_id=view["table_id"],
        coup_id=view["coup_id"],
        bet_id=view["bet_id"],
        bettor_id=view["player_id"],
        stake=stake,
        refunded=stake,
        adjustment=stake - view["settlement"]["returned"],
        currency=view["currency"],
        operator=OPERATOR,
    )


def turned_around(view: dict[str, Any]) -> BetCorrected:
    """The bet's result the other way: a return taken back, or a loss paid as a win."""
    settlement = view["settlement"]
    stake, returned = settlement["stake"], settlement["returned"]
    result, payout = ("LOSE", 0) if returned > 0 else ("WIN", stake)
    return BetCorrected(
        table_id=view["table_id"],
        coup_id=view["coup_id"],
        bet_id=view["bet_id"],
        bettor_id=view["player_id"],
        bet_type=view["bet_type"],
        correction_id=uuid4(),
        stake=stake,
        previous_result=settlement["result"],
        previous_payout=settlement["payout"],
        result=result,
        payout=payout,
        difference=(0 if result == "LOSE" else stake + payout) - returned,
        currency=view["currency"],
        operator=OPERATOR,
    )
