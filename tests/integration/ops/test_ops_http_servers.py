"""The HTTP servers on real sockets (uvicorn in the test's event loop), without Kafka.

webserver.AsgiServer serving endpoints.ops_app: the port, the Host check over the wire, a busy
port, the wildcard address, a failing lifespan, a clean stop; the dashboard's server-sent
events (sse-starlette) stream the model's snapshots and end when the dashboard stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator, Mapping

import httpx2
import pytest
from starlette.applications import Starlette

from services.shared.platform.host import AsgiServer
from services.shared.platform.host.endpoints import ops_app
from services.tools.dashboard.server import Dashboard

pytestmark = pytest.mark.timeout(60)


class Ready:
    async def checks(self) -> Mapping[str, str | None]:
        return {"broker": None}


def app(allowed: tuple[str, ...] = ("127.0.0.1", "localhost")) -> Starlette:
    return ops_app(
        Ready(),
        lambda: b"pb_service_up 1.0\n",
        lambda: "{}",
        service="shoe",
        allowed_hosts=allowed,
    )


async def test_an_ops_app_served_on_a_free_port_then_stopped() -> None:
    server = AsgiServer(app(), "127.0.0.1", 0, name="shoe")
    async with server:
        assert server.url == f"http://127.0.0.1:{server.port}"
        async with httpx2.AsyncClient(base_url=server.url) as web:
            assert (await web.get("/health")).json()["status"] == "alive"
            assert (await web.get("/ready")).status_code == 200
            metrics = await web.get("/metrics")
            assert metrics.text == "pb_service_up 1.0\n"
            refused = await web.get("/health", headers={"Host": "evil.example"})
            assert refused.status_code == 400
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", server.port), 1):
        pass


async def test_a_busy_port_is_an_os_error_at_start() -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        server = AsgiServer(app(), "127.0.0.1", squatter.getsockname()[1])
        with pytest.raises(OSError):
            await server.start()
        await server.stop()


async def test_the_wildcard_address_serves_loopback_too() -> None:
    async with AsgiServer(app(), "0.0.0.0", 0) as server:
        url = f"http://127.0.0.1:{server.port}"
        async with httpx2.AsyncClient(base_url=url) as web:
            assert (await web.get("/health")).status_code == 200


async def test_localhost_binds_ipv4_and_ipv6_loopback_is_bracketed() -> None:
    async with (
        AsgiServer(app(), "localhost", 0) as server,
        httpx2.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as web,
    ):
        assert (await web.get("/health")).status_code == 200
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    try:
        server = AsgiServer(app(("[::1]",)), "::1", 0)
        await server.start()
    except OSError:
        pytest.skip("no IPv6 loopback here")
    try:
        assert server.url == f"http://[::1]:{server.port}"
        async with httpx2.AsyncClient(base_url=server.url) as web:
            assert (await web.get("/health")).status_code == 200  # Host: [::1]:port
    finally:
        await server.stop()


async def test_a_failing_lifespan_is_an_error_not_an_exit() -> None:
    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        raise RuntimeError("broker unreachable")
        yield

    server = AsgiServer(Starlette(lifespan=lifespan), "127.0.0.1", 0, lifespan="on")
    with pytest.raises(RuntimeError, match="failed to start"):
        await server.start()
    await server.stop()


async def read_events(response: httpx2.Response) -> AsyncIterator[dict[str, str]]:
    """Each server-sent event of ``response`` as its fields (comment lines left out)."""
    event: dict[str, str] = {}
    async for line in response.aiter_lines():
        if not line:
            if event:
                yield event
            event = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            event[name] = value.removeprefix(" ")


async def test_the_dashboard_streams_snapshots_and_ends_its_streams_on_stop() -> None:
    dashboard = Dashboard("127.0.0.1:1", port=0, push_interval=0.05)
    await dashboard.server.start()  # the pages alone: no Kafka follower here
    try:
        async with (
            httpx2.AsyncClient(base_url=dashboard.server.url, timeout=10) as web,
            web.stream("GET", "/events") as response,
        ):
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["cache-control"] == "no-store"
            events = read_events(response)
            first = await anext(events)
            assert first["event"] == "state" and first["retry"] == "2000"
            assert json.loads(first["data"]) == dashboard.model.snapshot()
            dashboard.model.version += 1  # something changed: a new snapshot follows
            second = await anext(events)
            assert "retry" not in second
            assert json.loads(second["data"])["version"] == dashboard.model.version
            started = time.monotonic()
            dashboard.stopping.set()
            with contextlib.suppress(StopAsyncIteration):
                while True:
                    await asyncio.wait_for(anext(events), 5)
            assert time.monotonic() - started < 2
    finally:
        await dashboard.server.stop()
