"""The dashboard's pages (dashboard_app) through Starlette's TestClient: no socket, no Kafka.

The event stream (/events) is followed over a real socket in
tests/integration/ops/test_ops_http_servers.py, and in a browser in tests/e2e.
"""

from __future__ import annotations

import asyncio

import pytest
from starlette.testclient import TestClient

from services.tools.dashboard.model import DashboardModel
from services.tools.dashboard.server import Dashboard, dashboard_app


def client(model: DashboardModel | None = None) -> TestClient:
    app = dashboard_app(model or DashboardModel(), asyncio.Event(), ["127.0.0.1", "localhost"])
    return TestClient(app, base_url="http://127.0.0.1:8100")


def test_the_page_and_its_files_are_served() -> None:
    web = client()
    for path, kind, needle in (
        ("/", "text/html", "/app.js"),
        ("/index.html", "text/html", "/style.css"),
        ("/app.js", "javascript", 'new EventSource("/events")'),
        ("/style.css", "text/css", "{"),
    ):
        response = web.get(path)
        assert response.status_code == 200, path
        assert kind in response.headers["content-type"], path
        assert needle in response.text, path
    assert web.get("/nothing.js").status_code == 404


def test_state_is_the_model_snapshot_as_json() -> None:
    model = DashboardModel()
    response = client(model).get("/api/state")
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    assert response.json() == model.snapshot()


def test_health() -> None:
    response = client().get("/health")
    assert response.json() == {"status": "alive", "service": "dashboard"}


@pytest.mark.parametrize("path", ["/", "/api/state", "/events", "/health", "/app.js"])
def test_a_host_header_not_allowed_is_refused_with_400(path: str) -> None:
    response = client().get(path, headers={"Host": "attacker.example:8100"})
    assert response.status_code == 400


def test_the_dashboard_checks_its_address_and_allowed_hosts() -> None:
    with pytest.raises(ValueError, match="PB_HTTP_HOST"):
        Dashboard("127.0.0.1:9092", host="http://0.0.0.0")
    with pytest.raises(ValueError, match="PB_HTTP_ALLOWED_HOSTS"):
        Dashboard("127.0.0.1:9092", allowed_hosts=["dash:8100"])
    dashboard = Dashboard("127.0.0.1:9092", host="0.0.0.0", allowed_hosts=["dash.local"])
    web = TestClient(dashboard.app, base_url="http://dash.local:8100")
    assert web.get("/health").status_code == 200
    assert web.get("/health", headers={"Host": "127.0.0.1"}).status_code == 400
