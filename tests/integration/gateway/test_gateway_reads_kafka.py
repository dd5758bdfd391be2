"""What a platform reads from the gateway on real Kafka: the table's public facts as server-sent
events resumable from Last-Event-ID, a round as a recall shows it (cards, outcome, a void with who
and why) with the operator's bets on it, and the day's reconciliation, whose figures are what
settlement published for the operator (JSON and CSV), with nothing left unsettled or unconfirmed
once a voided coup's debits and credits are reversed and every balance is back where it was."""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from contracts import TABLE_COMMANDS, BetRefunded, BetSettled, bet_events_topic
from tests.gateway_harness import INITIAL, LONG_WINDOW, GatewaySystem, gateway_system, until
from tests.integration.gateway.test_gateway_kafka import settled
from tests.integration.platform.kafka_tools import send_messages
from tests.integration.settlement.test_settlement_kafka import TopicReader
from tests.supervisors import supervisor

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


async def sse(system: GatewaySystem, path: str, count: int, **headers: str) -> list[dict[str, Any]]:
    """The first ``count`` events of the stream at ``path``."""
    events: list[dict[str, Any]] = []
    from services.gateway.auth import signed_headers

    signed = signed_headers("acme", system.keys.api_secret, "GET", path, b"")
    async with system.api.client.stream("GET", path, headers={**signed, **headers}) as answer:
        assert answer.status_code == 200
        event: dict[str, Any] = {}
        async for line in answer.aiter_lines():
            if line.startswith("id:"):
                event["id"] = int(line[3:].strip())
            elif line.startswith("event:"):
                event["event"] = line[6:].strip()
            elif line.startswith("data:"):
                event["data"] = json.loads(line[5:].strip())
            elif not line and event:
                events.append(event)
                event = {}
                if len(events) == count:
                    break
    return events


async def test_feed_round_and_reconciliation_of_a_voided_coup(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    async with gateway_system(tmp_path, kafka_bootstrap) as system:
        settings = system.settings
        async with TopicReader(settings, bet_events_topic("acme")) as bet_events:
            assert system.wallet is not None
            await system.open_table(window_ms=LONG_WINDOW)
            coup = await system.open_coup()
            bet_ids = [f"v{n}" for n in range(4)]
            for n, bet_id in enumerate(bet_ids):
                side = ["player", "banker", "tie", "player_pair"][n]
                answer = await system.bet(bet_id, coup, player_id=f"v{n}", bet_type=side)
                assert answer.json()["status"] == "ACCEPTED"
            await system.close_betting(coup)
            await settled(system, bet_ids)
            void = supervisor().void("vip-1", coup, "dealer exposed a card")
            await send_messages(settings, TABLE_COMMANDS, [void])

            async def reversed_all() -> list[dict[str, Any]] | None:
                views = [await system.view(b) for b in bet_ids]
                if all(
                    v["refund"] and all(t["state"] == "confirmed" for t in v["transactions"])
                    for v in views
                ):
                    return views
                return None

            views = await until(reversed_all, 60, "every bet refunded and reversed")
            balances = await system.wallet.balances()
            assert all(balances[f"v{n}"] == INITIAL for n in range(4))
            winners = [v for v in views if v["settlement"]["returned"] > 0]
            for view in winners:
                kinds = [t["kind"] for t in view["transactions"]]
                assert kinds == ["debit", "credit", "rollback", "credit-rollback"]

            # the feed, from the start and resumed
            path = "/v1/tables/vip-1/events?after=0"
            first = await sse(system, path, 4)
            assert first[0]["event"] == "TableOpened" and [e["id"] for e in first] == [2, 3, 4, 5]
            resumed = await sse(system, "/v1/tables/vip-1/events", 2, **{"Last-Event-ID": "3"})
            assert [e["id"] for e in resumed] == [4, 5] and resumed[0] == first[2]

            # the round
            answer = await system.api.request("GET", f"/v1/rounds/vip-1/{coup}")
            found = answer.json()
            assert found["voided"] and found["void_reason"] == "dealer exposed a card"
            assert found["void_supervisor"] == "sup-7" and found["outcome"] is not None
            assert len(found["cards"]) >= 4 and found["bets_count"] == 4
            assert sorted(b["bet_id"] for b in found["bets"]) == bet_ids

            # the reconciliation equals what settlement published for the operator
            await bet_events.wait_until(lambda: len(bet_events.of_type(BetRefunded)) == 4)
            expected: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
            for message in bet_events.of_type(BetSettled):
                day = expected[message.occurred_at.date().isoformat()]
                day["bets"] += 1
                day["staked"] += message.stake
                day["returned"] += message.returned
            for refund in bet_events.of_type(BetRefunded):
                day = expected[refund.occurred_at.date().isoformat()]
                day["refunds"] += 1
                day["adjusted"] += refund.adjustment
            for day, figures in expected.items():
                answer = await system.api.request("GET", f"/v1/reconciliation?day={day}")
                report = answer.json()
                (eur,) = report["currencies"]
                assert {name: eur[name] for name in figures} == figures
                assert eur["net"] == eur["staked"] - eur["returned"] - eur["adjusted"]
                assert report["unsettled_rounds"] == []
                assert report["unconfirmed_transactions"] == []
                text = await system.api.request(
                    "GET", f"/v1/reconciliation?day={day}", headers={"Accept": "text/csv"}
                )
                rows = list(csv.DictReader(io.StringIO(text.text)))
                assert {r["name"]: int(r["value"]) for r in rows if r["currency"] == "EUR"} == {
                    k: v for k, v in eur.items() if k != "currency"
                }
