"""A gateway's quota on the real broker: what `infra` sets, the broker enforces (issue 20, item 5).

Every gateway principal gets a producer byte rate and a share of the broker's threads
(``kafka_acls.GATEWAY_QUOTA``; `infra up`, `infra credentials --add` and a run's own gateways
alike). A gateway that produces faster is slowed down by the broker to about its rate (it
measures a rate over ``quota.window.num`` = 11 windows of ``quota.window.size.seconds`` = 1, and
mutes the connection of a principal above it for as long as it takes to come back to it).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from contracts import bet_commands_topic
from services.dev.infra.kafka_acls import GATEWAY_QUOTA, project_quotas, role_quota
from services.dev.infra.kafka_principals import GATEWAY_BYTE_RATE, gateway_quota
from tests import kafka_logins
from tests.integration.platform.kafka_tools import settings_for

pytestmark = [pytest.mark.kafka]

OPERATOR = "quota-probe"
"""The operator of this test alone: its gateway's quota is set here (the quota is the
principal's, on every topic)."""


def test_only_gateways_have_a_quota_and_infra_takes_its_rate_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert role_quota("gateway") == GATEWAY_QUOTA
    for role in ("shoe", "dealing", "settlement", "operator", "supervisor", "auditor"):
        assert role_quota(role) is None, role
    quotas = project_quotas({"gateway": "gateway", "gateway-acme": "gateway", "shoe": "shoe"})
    assert set(quotas) == {"gateway", "gateway-acme"}
    assert quotas["gateway"] == {
        "producer_byte_rate": float(GATEWAY_QUOTA.producer_byte_rate),
        "request_percentage": float(GATEWAY_QUOTA.request_percentage),
    }
    monkeypatch.setenv(GATEWAY_BYTE_RATE, "0")  # none: the quota is removed
    assert gateway_quota().config()["producer_byte_rate"] is None
    monkeypatch.setenv(GATEWAY_BYTE_RATE, "65536")
    assert gateway_quota().producer_byte_rate == 65536


async def test_a_gateway_producing_above_its_quota_is_slowed_to_it(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not kafka_logins.authenticated():
        pytest.skip("the session's broker does not authenticate: no principal has a quota")
    rate = 32 * 1024
    monkeypatch.setenv(GATEWAY_BYTE_RATE, str(rate))
    # The run's gateway of OPERATOR is made as `infra` makes gateways: with their quota.
    settings = settings_for("settlement", kafka_bootstrap, data_dir=tmp_path, operators=(OPERATOR,))
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap,
        **kafka_logins.options(f"gateway-{OPERATOR}"),
        linger_ms=5,
        request_timeout_ms=60_000,
    )
    value = b"x" * 1024
    total = 16 * rate  # 16 seconds' worth
    await producer.start()
    try:
        topic = settings.topic(bet_commands_topic(OPERATOR))
        await producer.send_and_wait(topic, value, key=b"t1")  # connected, metadata known
        started = time.monotonic()
        for _ in range(total // len(value)):
            await producer.send(topic, value, key=b"t1")
        await producer.flush()
        elapsed = time.monotonic() - started
    finally:
        await producer.stop()
    # Unthrottled (PB_KAFKA_GATEWAY_BYTE_RATE=0), 512 KiB take 0.04 s here; held to 32 KiB/s,
    # 13 s (measured: the first window's burst is soon paid back).
    assert elapsed >= 3.0, f"{total} bytes in {elapsed:.2f} s: no quota held the gateway"
