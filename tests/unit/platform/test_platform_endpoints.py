"""The operations app (endpoints.ops_app) through Starlette's TestClient: no socket, no Kafka."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping

import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest
from starlette.testclient import TestClient

from services.shared.platform.host.endpoints import ops_app

DOCUMENT = {
    "asyncapi": "3.0.0",
    "info": {"title": "shoe <service>", "version": "1"},
    "channels": {"c": {"address": "punto-banco.shoe-commands", "messages": {"ShuffleShoe": {}}}},
    "operations": {},
    "components": {"schemas": {"ShuffleShoe": {"type": "object"}}},
}


class Checks:
    """A Readiness whose answers the test sets."""

    def __init__(self, **answers: str | None) -> None:
        self.answers: dict[str, str | None] = dict(answers)
        self.calls = 0

    async def checks(self) -> Mapping[str, str | None]:
        self.calls += 1
        return self.answers


def registry_text() -> bytes:
    registry = CollectorRegistry()
    Counter("pb_bets_settled", "Bets settled.", ["result"], registry=registry).labels("WIN").inc(3)
    return generate_latest(registry)


def client(checks: object = None, **kwargs: object) -> TestClient:
    app = ops_app(
        checks or Checks(broker=None, store=None),  # type: ignore[arg-type]
        kwargs.pop("metrics", registry_text),  # type: ignore[arg-type]
        kwargs.pop("asyncapi", lambda: json.dumps(DOCUMENT)),  # type: ignore[arg-type]
        service="shoe",
        allowed_hosts=kwargs.pop("allowed_hosts", ("127.0.0.1", "localhost")),  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    )
    return TestClient(app, base_url="http://127.0.0.1:8101")


def test_health_answers_while_the_process_runs() -> None:
    response = client().get("/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "alive" and body["service"] == "shoe" and body["uptime_s"] >= 0
    assert response.headers["cache-control"] == "no-store"


def test_ready_is_200_when_every_check_passes() -> None:
    response = client(Checks(broker=None, store=None, partitions=None)).get("/ready")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ready",
        "service": "shoe",
        "checks": {"broker": "ok", "store": "ok", "partitions": "ok"},
    }


def test_ready_is_503_naming_the_failing_check() -> None:
    checks = Checks(broker=None, handling="punto-banco.table-events:3 stopped at offset 41")
    web = client(checks)
    response = web.get("/ready")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "not ready"
    assert body["checks"] == {
        "broker": "ok",
        "handling": "punto-banco.table-events:3 stopped at offset 41",
    }
    checks.answers["handling"] = None  # the partition goes on: ready again, asked anew
    assert web.get("/ready").status_code == 200
    assert checks.calls == 2


def test_ready_is_503_when_the_checks_fail_or_hang() -> None:
    class Broken:
        async def checks(self) -> Mapping[str, str | None]:
            raise RuntimeError("store gone")

    class Hanging:
        async def checks(self) -> Mapping[str, str | None]:
            await asyncio.sleep(60)
            return {}

    response = client(Broken()).get("/ready")
    assert response.status_code == 503
    assert "RuntimeError('store gone')" in response.json()["checks"]["readiness"]
    response = client(Hanging(), ready_timeout=0.05).get("/ready")
    assert response.status_code == 503
    assert response.json()["checks"] == {"readiness": "the checks did not answer within 0.05 s"}


def test_metrics_are_the_prometheus_text_format() -> None:
    response = client().get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    text = response.text
    assert "# TYPE pb_bets_settled_total counter" in text
    assert 'pb_bets_settled_total{result="WIN"} 3.0' in text


def test_metrics_may_be_produced_by_a_coroutine() -> None:
    async def refreshed() -> bytes:
        await asyncio.sleep(0)
        return b"pb_service_up 1.0\n"

    response = client(metrics=refreshed).get("/metrics")
    assert response.status_code == 200 and response.text == "pb_service_up 1.0\n"


def test_asyncapi_document_and_page_are_made_once() -> None:
    made: list[int] = []

    def document() -> str:
        made.append(1)
        return json.dumps(DOCUMENT)

    web = client(asyncapi=document)
    for path in ("/asyncapi", "/asyncapi.json"):
        response = web.get(path)
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        assert response.json()["asyncapi"] == "3.0.0"
    page = web.get("/asyncapi.html")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "shoe &lt;service&gt;" in page.text and "punto-banco.shoe-commands" in page.text
    assert "<script" not in page.text
    assert made == [1]


def test_a_failing_asyncapi_document_is_a_500_that_says_why() -> None:
    def broken() -> str:
        raise KeyError("no broker")

    response = client(asyncapi=broken).get("/asyncapi")
    assert response.status_code == 500 and "KeyError('no broker')" in response.text


@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1.nip.io", "shoe"])
def test_a_host_header_not_allowed_is_refused_with_400(host: str) -> None:
    web = client()
    for path in ("/health", "/ready", "/metrics", "/asyncapi"):
        response = web.get(path, headers={"Host": f"{host}:8101"})
        assert response.status_code == 400, path
        assert response.text == "Invalid host header"


def test_allowed_hosts_take_names_patterns_and_ipv6() -> None:
    web = client(allowed_hosts=["shoe", "*.punto-banco.svc", "::1"])
    for host in ("shoe:8101", "shoe.punto-banco.svc", "[::1]:8101"):
        assert web.get("/health", headers={"Host": host}).status_code == 200, host
    assert web.get("/health", headers={"Host": "localhost"}).status_code == 400


def test_allowed_hosts_must_be_usable() -> None:
    with pytest.raises(ValueError, match="no allowed host"):
        client(allowed_hosts=[])
    with pytest.raises(ValueError, match="without port"):
        client(allowed_hosts=["shoe:8101"])


def test_only_get_and_head_and_known_paths() -> None:
    web = client()
    assert web.head("/health").status_code == 200
    assert web.post("/ready").status_code == 405
    assert web.get("/nothing").status_code == 404


class StuckChecks(Checks):
    """A Readiness that also says whether the process is alive (as ServiceReadiness does)."""

    def __init__(self, why: str | None) -> None:
        super().__init__(handling=why)
        self.why = why

    def alive(self) -> str | None:
        return self.why


def test_health_is_503_with_the_reason_when_the_process_is_stuck() -> None:
    why = "settlement: the store call handle has run for 130 s (more than 120 s): stuck"
    response = client(StuckChecks(why)).get("/health")
    assert response.status_code == 503
    assert response.json()["status"] == "stuck" and response.json()["why"] == why
    assert client(StuckChecks(None)).get("/health").status_code == 200
