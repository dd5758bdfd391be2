"""A real service's /health, /ready, /metrics and /asyncapi over real Kafka and SQLite.

The shoe service runs in-process (KafkaService) with its HTTP endpoints on a free loopback
port; commands go to Kafka, and the metrics follow what it handles and publishes.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from contracts import SHOE_COMMANDS, DrawCards, ShuffleShoe
from services.dev.infra.ports import free_port
from services.shared.platform.settings import Settings
from services.shoe.service import build_service
from tests.integration.platform.kafka_tools import send_messages, send_raw, settings_for

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


def get(url: str, host: str | None = None) -> tuple[int, str, str]:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


async def fetch(url: str) -> tuple[int, str, str]:
    return await asyncio.to_thread(get, url)


def sample(text: str, name: str, labels: str = "") -> float:
    """One sample of the Prometheus text exposition (0 when absent)."""
    pattern = re.escape(name + (f"{{{labels}}}" if labels else "")) + r" ([0-9.e+-]+)$"
    found = re.search(pattern, text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


async def metrics_until(url: str, check: Any, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        _status, _type, text = await fetch(url + "/metrics")
        if check(text) or time.monotonic() > deadline:
            return text
        await asyncio.sleep(0.2)


async def test_endpoints_of_a_running_service(kafka_bootstrap: str, tmp_path: Path) -> None:
    settings = settings_for("shoe", kafka_bootstrap, data_dir=tmp_path, http_port=0)
    async with build_service(settings) as host:
        await host.wait_ready()
        assert host.http is not None
        url = host.http.url
        assert url.startswith("http://127.0.0.1:")

        status, _type, body = await fetch(url + "/health")
        assert status == 200 and json.loads(body)["status"] == "alive"

        status, _type, body = await fetch(url + "/ready")
        ready = json.loads(body)
        assert status == 200, ready
        assert ready["checks"] == {
            "writer": "ok",
            "broker": "ok",
            "store": "ok",
            "partitions": "ok",
            "handling": "ok",
            "running": "ok",
        }

        status, content_type, text = await fetch(url + "/metrics")
        assert status == 200 and content_type.startswith("text/plain")
        assert sample(text, "pb_messages_published_total", 'type="ShoeShuffled"') == 0
        assert sample(text, "pb_dead_letters_total") == 0

        await send_messages(
            settings,
            SHOE_COMMANDS,
            [
                ShuffleShoe(table_id="t1", shoe_id="s1", decks=1, cut_card_from_end=10),
                DrawCards(table_id="t1", shoe_id="s1", coup_id="c1", request_id="r1", count=4),
            ],
        )
        await send_raw(settings, SHOE_COMMANDS, [(b"t1", b"not json")])

        def flowed(text: str) -> bool:
            return (
                sample(text, "pb_messages_published_total", 'type="CardDrawn"') == 4
                and sample(text, "pb_dead_letters_total") == 1
                and sample(text, "pb_relay_backlog_events") == 0
            )

        text = await metrics_until(url, flowed)
        assert sample(text, "pb_messages_published_total", 'type="ShoeShuffled"') == 1
        assert sample(text, "pb_messages_published_total", 'type="CardsBurned"') == 1
        assert sample(text, "pb_messages_published_total", 'type="CardDrawn"') == 4
        assert sample(text, "pb_dead_letters_total") == 1
        assert sample(text, "pb_messages_handled_total") == 2
        assert sample(text, "pb_event_store_events") >= 2
        assert sample(text, "pb_event_store_bytes") > 0
        assert sample(text, "pb_relay_backlog_events") == 0
        assert "pb_partition_stopped{" not in text  # no partition was ever stopped
        text = await metrics_until(
            url, lambda t: "pb_consumer_lag_messages{" in t and "lag_messages{" in t
        )
        lags = re.findall(r"^pb_consumer_lag_messages\{.*\} ([0-9.e+-]+)$", text, re.MULTILINE)
        assert lags and all(float(lag) == 0 for lag in lags)

        status, content_type, body = await fetch(url + "/asyncapi")
        document = json.loads(body)
        assert status == 200 and content_type == "application/json"
        assert document["asyncapi"].startswith("3.")
        assert any("shoe-commands" in name for name in document["channels"])
        assert not any("bet-events" in name for name in document["channels"])
        status, content_type, body = await fetch(url + "/asyncapi.html")
        assert status == 200 and "ShuffleShoe" in body

        status, _type, _body = await fetch(url + "/nothing")
        assert status == 404
        # A Host header not in PB_HTTP_ALLOWED_HOSTS (default: 127.0.0.1, localhost) is refused.
        status, _type, body = await asyncio.to_thread(get, url + "/metrics", "evil.example")
        assert status == 400 and "pb_" not in body
        status, _type, _body = await asyncio.to_thread(get, url + "/health", "localhost")
        assert status == 200
    # Stopped: the port is closed.
    with pytest.raises(OSError):
        get(url + "/health")


async def test_not_ready_when_the_broker_does_not_answer(tmp_path: Path) -> None:
    from services.shared.platform.host.service import ServiceReadiness  # the running service's

    dead = f"127.0.0.1:{free_port()}"
    settings = Settings.from_env("shoe", {"KAFKA_BOOTSTRAP_SERVERS": dead})
    fake: Any = SimpleNamespace(settings=settings)
    checks = ServiceReadiness(fake)
    problem = await checks.broker()
    assert problem is not None and dead in problem
    problem = await checks.store()  # no app: the store is not reachable either
    assert problem is not None and "event store" in problem
    await checks.close()


async def test_a_busy_port_is_a_warning_not_a_failure(
    kafka_bootstrap: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        settings = settings_for("shoe", kafka_bootstrap, data_dir=tmp_path, http_port=port)
        async with build_service(settings) as host:
            assert host.http is None
        assert "no HTTP endpoints" in caplog.text


async def test_a_second_instance_is_a_standby_alive_but_not_ready_until_the_writer_stops(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Two shoe instances on one store: the second waits for the writer lease
    (store/lease.py), answers /health, and its /ready says it is a standby; it serves once
    the first stopped."""
    settings = settings_for("shoe", kafka_bootstrap, data_dir=tmp_path, http_port=0)
    first = build_service(settings)
    await first.start()
    second = build_service(settings)
    starting = asyncio.create_task(second.start())
    try:
        await first.wait_ready()
        while second.http is None:  # the endpoints come before the lease
            await asyncio.sleep(0.05)
        url = second.http.url
        status, _type, body = await fetch(url + "/health")
        assert status == 200
        status, _type, body = await fetch(url + "/ready")
        checks = json.loads(body)["checks"]
        assert status == 503 and checks["writer"].startswith("standby: sqlite ")
        assert checks["store"] == "not opened by a standby"
        assert not starting.done() and second.consumer is None  # in no consumer group

        await first.stop()
        await asyncio.wait_for(starting, 60)
        await second.wait_ready()
        status, _type, body = await fetch(url + "/ready")
        assert status == 200, body
    finally:
        await first.stop()
        if not starting.done():
            starting.cancel()
        await second.stop()
