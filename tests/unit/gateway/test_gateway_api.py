"""The gateway's HTTP API against hostile callers, on an in-memory store (no Kafka, no thread):
unsigned, mis-signed, stale, oversized and malformed requests are refused with problem details;
a replayed request is answered as the first one and never acted on twice; another operator's bet
is not found; a bet id reused with other content is a conflict; the rate limit answers 429 with
Retry-After; the OpenAPI document is generated."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import pytest

from services.gateway.api import create_app
from services.gateway.application import BetRequest, GatewayApplication
from services.gateway.auth import RateLimit, signed_headers
from services.gateway.config import GatewayConfig
from services.gateway.domain import Bet
from services.gateway.operators import OperatorKeys
from services.gateway.outbox import WalletOutbox

SECRETS = {"acme": "a" * 40, "bravo": "b" * 40}
BET = {
    "bet_id": "b-1",
    "player_id": "p1",
    "table_id": "vip-1",
    "coup_id": "vip-1.coup-1",
    "bet_type": "banker",
    "amount": 2500,
    "currency": "EUR",
}


class FakeOperator:
    """An operator's gateway with its store in memory and calls made in place."""

    def __init__(self, name: str, config: GatewayConfig, rate: RateLimit) -> None:
        self.keys = OperatorKeys(name, (SECRETS[name],), "w" * 40)
        self.limit = rate
        self.outbox = WalletOutbox(config, None, name)
        self.app = GatewayApplication(
            env={"PERSISTENCE_MODULE": "eventsourcing.popo"}, operator=name
        )

    def call(self, fn: Callable[..., Any], /, *args: Any) -> Awaitable[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        try:
            future.set_result(fn(*args))
        except Exception as error:
            future.set_exception(error)
        return future

    async def request(self, request: BetRequest) -> Bet:
        return self.app.request(request)

    def waiter(self, bet_id: str) -> asyncio.Future[None]:
        return asyncio.get_running_loop().create_future()

    def forget(self, bet_id: str, waiter: asyncio.Future[None]) -> None:
        pass

    def table_ids(self) -> list[str]:
        return []

    async def table_changed(self, table_id: str, timeout: float) -> None:
        await asyncio.sleep(0)


class FakeGateway:
    def __init__(self, rate: RateLimit | None = None) -> None:
        self.config = GatewayConfig(answer_wait=0.01, max_body=1024)
        self.operators = {
            name: FakeOperator(name, self.config, rate or RateLimit(1000, 1000)) for name in SECRETS
        }

    def operator(self, name: str) -> FakeOperator | None:
        return self.operators.get(name)


async def send(
    gateway: FakeGateway,
    method: str,
    path: str,
    body: Any = None,
    *,
    operator: str = "acme",
    secret: str | None = None,
    now: float | None = None,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> httpx2.Response:
    content = raw if raw is not None else b"" if body is None else json.dumps(body).encode()
    made = signed_headers(operator, secret or SECRETS[operator], method, path, content, now)
    signed = {name.lower(): value for name, value in made.items()}
    if content:
        signed["content-type"] = "application/json"
    transport = httpx2.ASGITransport(app=create_app(gateway))
    async with httpx2.AsyncClient(transport=transport, base_url="http://gateway") as client:
        return await client.request(
            method, path, content=content, headers={**signed, **(headers or {})}
        )


def problem(answer: httpx2.Response, status: int) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    found: dict[str, Any] = answer.json()
    assert found["status"] == status and found["title"] and found["detail"]
    return found


async def test_a_signed_bet_is_recorded_and_answered_pending_with_its_location() -> None:
    gateway = FakeGateway()
    answer = await send(gateway, "POST", "/v1/bets", BET)
    assert answer.status_code == 202
    assert answer.json() == {"bet_id": "b-1", "status": "PENDING"}
    assert answer.headers["location"] == "/v1/bets/b-1"
    view = await send(gateway, "GET", "/v1/bets/b-1")
    assert view.json()["amount"] == 2500 and view.json()["transactions"] == []


@pytest.mark.parametrize(
    "tamper",
    [
        {"secret": "x" * 40},  # another secret
        {"skew": -400},  # too old
        {"skew": 400},  # from the future
        {"operator": "bravo", "secret": SECRETS["acme"]},  # another operator's name
        {"headers": {"x-pb-signature": "sha256=" + "0" * 64}},
        {"headers": {"x-pb-signature": "md5=abc"}},
        {"headers": {"x-pb-timestamp": "yesterday"}},
        {"headers": {"x-pb-operator": "nobody"}},
    ],
)
async def test_a_request_not_signed_by_an_operator_in_time_is_401(tamper: dict[str, Any]) -> None:
    gateway = FakeGateway()
    if "skew" in tamper:  # the request's time, that far from the server's
        tamper = {"now": time.time() + tamper["skew"]}
    problem(await send(gateway, "POST", "/v1/bets", BET, **tamper), 401)
    assert gateway.operators["acme"].app.bet("b-1") is None  # nothing recorded


async def test_a_body_changed_after_signing_is_401() -> None:
    gateway = FakeGateway()
    content = json.dumps(BET).encode()
    signed = signed_headers("acme", SECRETS["acme"], "POST", "/v1/bets", content)
    signed["content-type"] = "application/json"
    transport = httpx2.ASGITransport(app=create_app(gateway))
    async with httpx2.AsyncClient(transport=transport, base_url="http://gateway") as client:
        changed = content.replace(b"2500", b"9500")
        answer = await client.post("/v1/bets", content=changed, headers=signed)
    problem(answer, 401)


async def test_a_replayed_request_is_answered_as_the_first_and_acted_on_once() -> None:
    gateway = FakeGateway()
    now = time.time()
    first = await send(gateway, "POST", "/v1/bets", BET, now=now)
    again = await send(gateway, "POST", "/v1/bets", BET, now=now)
    assert first.json() == again.json()
    app = gateway.operators["acme"].app
    assert app.repository.event_store.recorder.max_notification_id() == 2  # one bet, once


async def test_the_same_bet_id_with_other_content_is_409() -> None:
    gateway = FakeGateway()
    await send(gateway, "POST", "/v1/bets", BET)
    problem(await send(gateway, "POST", "/v1/bets", {**BET, "amount": 2600}), 409)


async def test_another_operators_bet_is_not_found() -> None:
    gateway = FakeGateway()
    await send(gateway, "POST", "/v1/bets", BET, operator="bravo")
    problem(await send(gateway, "GET", "/v1/bets/b-1"), 404)
    assert (await send(gateway, "GET", "/v1/bets/b-1", operator="bravo")).status_code == 200


@pytest.mark.parametrize(
    "change",
    [
        {"amount": 25.5},
        {"amount": "2500"},
        {"amount": True},
        {"amount": 0},
        {"amount": 10**15},
        {"bet_id": "x" * 65},
        {"table_id": "no spaces"},
        {"currency": "eur"},
        {"bet_type": "dragon"},
        {"extra": 1},
    ],
)
async def test_an_unbounded_or_malformed_field_is_422(change: dict[str, Any]) -> None:
    problem(await send(FakeGateway(), "POST", "/v1/bets", {**BET, **change}), 422)


async def test_garbage_and_oversized_bodies_are_refused() -> None:
    gateway = FakeGateway()
    problem(await send(gateway, "POST", "/v1/bets", raw=b"\xff\x00{not json"), 400)
    big = json.dumps({**BET, "player_id": "p" * 5000}).encode()
    problem(await send(gateway, "POST", "/v1/bets", raw=big), 413)


async def test_over_the_rate_limit_is_429_with_retry_after() -> None:
    gateway = FakeGateway(RateLimit(rate=0.5, burst=2, clock=lambda: 100.0))
    for _ in range(2):
        assert (await send(gateway, "GET", "/v1/tables")).status_code == 200
    refused = await send(gateway, "GET", "/v1/tables")
    problem(refused, 429)
    assert refused.headers["retry-after"] == "2"


async def test_the_openapi_document_is_3_1_and_names_every_endpoint() -> None:
    transport = httpx2.ASGITransport(app=create_app(FakeGateway()))
    async with httpx2.AsyncClient(transport=transport, base_url="http://gateway") as client:
        document = (await client.get("/openapi.json")).json()
    assert document["openapi"].startswith("3.1")
    assert set(document["paths"]) == {
        "/v1/bets",
        "/v1/bets/{bet_id}",
        "/v1/tables",
        "/v1/tables/{table_id}/events",
        "/v1/rounds/{table_id}/{coup_id}",
        "/v1/reconciliation",
    }
