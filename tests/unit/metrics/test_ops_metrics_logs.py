"""Operations: metrics counted from published messages, JSON logs with ids, HTTP settings."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import generate_latest

from contracts import BetAccepted, BetRejected, BetSettled, CoupResolved, CoupSettled
from services.shared.platform.host.endpoints import asyncapi_page
from services.shared.platform.host.metrics import ServiceMetrics
from services.shared.platform.logs import JsonFormatter, TextFormatter, message_context
from services.shared.platform.settings import Settings, SettingsError

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def resolved(coup: str = "c1", outcome: str = "BANKER") -> CoupResolved:
    return CoupResolved(
        table_id="t1",
        occurred_at=T0,
        coup_id=coup,
        coup_number=1,
        shoe_id="s",
        player_cards=["2C", "3C"],
        banker_cards=["4C", "5C"],
        player_total=5,
        banker_total=9,
        outcome=outcome,  # type: ignore[arg-type]
        natural=True,
        player_pair=False,
        banker_pair=False,
    )


def value(metrics: ServiceMetrics, name: str, labels: dict[str, str] | None = None) -> float:
    found = metrics.registry.get_sample_value(name, labels or {})
    return 0.0 if found is None else found


def test_domain_counters_come_from_published_messages() -> None:
    metrics = ServiceMetrics("settlement")
    accepted = BetAccepted(
        table_id="t1",
        bet_id="b1",
        coup_id="c1",
        bettor_id="x",
        bet_type="tie",
        amount=100,
        currency="EUR",
    )
    rejected = BetRejected(
        table_id="t1",
        bet_id="b2",
        coup_id="c1",
        bettor_id="x",
        bet_type="tie",
        amount="0",
        currency="EUR",
        reason_code="INVALID_AMOUNT",
        message="no",
    )
    metrics.observe_published([accepted, accepted, rejected, resolved(), resolved("c2", "TIE")])
    assert value(metrics, "pb_bets_accepted_total", {"bet_type": "tie"}) == 2
    assert value(metrics, "pb_bets_rejected_total", {"reason": "INVALID_AMOUNT"}) == 1
    assert value(metrics, "pb_coups_resolved_total", {"outcome": "BANKER"}) == 1
    assert value(metrics, "pb_coups_resolved_total", {"outcome": "TIE"}) == 1
    assert value(metrics, "pb_messages_published_total", {"type": "BetAccepted"}) == 2


def test_settlement_latency_from_coup_resolved_to_bets_settled_published() -> None:
    metrics = ServiceMetrics("settlement")
    delivery: Any = SimpleNamespace(message=resolved().model_copy(update={"occurred_at": T0}))
    recent: Any = SimpleNamespace(
        message=resolved("c9").model_copy(update={"occurred_at": datetime.now(UTC)})
    )
    metrics.observe_delivered([delivery, recent])
    settled = BetSettled(
        table_id="t1",
        bet_id="b1",
        coup_id="c9",
        bettor_id="x",
        bet_type="banker",
        result="WIN",
        stake=100,
        payout=95,
        returned=195,
        currency="EUR",
    )
    coup = CoupSettled(
        table_id="t1", coup_id="c9", bets=1, staked=100, paid=195, house_result=-95, currency="EUR"
    )
    metrics.observe_published([settled, settled, coup])
    assert value(metrics, "pb_settlement_latency_seconds_count") == 1  # once per coup
    assert value(metrics, "pb_settlement_latency_seconds_sum") < 5
    assert value(metrics, "pb_bets_settled_total", {"result": "WIN"}) == 2
    text = generate_latest(metrics.registry).decode()
    assert "pb_dead_letters_total 0.0" in text and 'pb_service_up{service="settlement"} 1.0' in text
    assert "pb_partition_stops_total 0.0" in text


def record(message: str, args: tuple[object, ...] = (), **extra: Any) -> logging.LogRecord:
    rec = logging.LogRecord("x", logging.WARNING, __file__, 1, message, args, None)
    rec.__dict__.update(extra)
    return rec


def test_json_logs_carry_the_ids_of_the_message_being_handled() -> None:
    bet = SimpleNamespace(table_id="t1", coup_id="c1", bet_id="b1", other=3)
    with message_context(bet):
        line = JsonFormatter("settlement").format(record("handled"))
    data = json.loads(line)
    assert data["service"] == "settlement" and data["message"] == "handled"
    assert (data["table_id"], data["coup_id"], data["bet_id"]) == ("t1", "c1", "b1")
    outside = json.loads(JsonFormatter("s").format(record("x", table_id="t9")))
    assert outside["table_id"] == "t9" and "coup_id" not in outside
    text = TextFormatter("dealing").format(record("dead letter", table_id="t2"))
    assert text.endswith("dead letter [table=t2]")


FORGED = (
    "b1\n2026-01-01 00:00:00,000 INFO [settlement] x: all bets paid\x1b[2J\x1b]0;t\x07\u2028\x85"
)
"""A bet id (or any attacker-named value) that would forge a log line and drive a terminal."""
CONTROLS = ("\n", "\r", "\x1b", "\x07", "\u2028", "\x85")


def test_text_logs_escape_what_attackers_name_one_record_one_line() -> None:
    bet = SimpleNamespace(table_id="t1", coup_id="c1", bet_id=FORGED)
    with message_context(bet):
        line = TextFormatter("settlement").format(record("dead letter: %s", args=(FORGED,)))
    assert "\n" not in line and not any(char in line for char in CONTROLS)
    escaped = "b1\\n2026-01-01 00:00:00,000 INFO [settlement] x: all bets paid\\x1b[2J"
    assert line.count(escaped) == 2  # in the message and in [bet=...]
    assert line.endswith("\\x1b]0;t\\x07\\u2028\\x85]")


def test_a_traceback_is_indented_and_escaped_so_no_line_of_it_looks_like_a_record() -> None:
    try:
        raise ValueError(FORGED)
    except ValueError:
        rec = record("handler failed")
        rec.exc_info = sys.exc_info()
    lines = TextFormatter("settlement").format(rec).split("\n")
    assert lines[0].endswith("handler failed")
    assert len(lines) > 2 and all(line.startswith("    ") for line in lines[1:])
    assert not any(char in "\n".join(lines) for char in CONTROLS if char != "\n")


def test_json_logs_keep_one_line_and_read_back_exactly() -> None:
    bet = SimpleNamespace(table_id="t1", coup_id="c1", bet_id=FORGED)
    with message_context(bet):
        line = JsonFormatter("settlement").format(record("dead letter: %s", args=(FORGED,)))
    assert not any(char in line for char in CONTROLS)
    data = json.loads(line)
    assert data["bet_id"] == FORGED and data["message"] == f"dead letter: {FORGED}"


def test_http_ports_per_service_env_and_off() -> None:
    assert Settings.from_env("shoe", {}).http_port == 8101
    assert Settings.from_env("dealing", {}).http_port == 8102
    assert Settings.from_env("settlement", {}).http_port == 8103
    assert Settings.from_env("shoe", {"PB_HTTP_PORT": "0"}).http_port == 0
    env = {"PB_HTTP_PORT": "9000", "PB_HTTP_PORT_SHOE": "off"}
    assert Settings.from_env("shoe", env).http_port is None
    assert Settings.from_env("dealing", env).http_port == 9000
    assert Settings.from_env("shoe", {"PB_LOG_FORMAT": "JSON"}).log_format == "json"
    with pytest.raises(SettingsError, match="PB_HTTP_PORT"):
        Settings.from_env("shoe", {"PB_HTTP_PORT": "70000"})
    with pytest.raises(SettingsError, match="PB_HTTP_HOST"):
        Settings.from_env("shoe", {"PB_HTTP_HOST": "http://0.0.0.0"})
    with pytest.raises(SettingsError, match="PB_LOG_FORMAT"):
        Settings.from_env("shoe", {"PB_LOG_FORMAT": "xml"})


def test_asyncapi_page_lists_channels_and_escapes() -> None:
    page = asyncapi_page(
        {
            "info": {"title": "pb <x>", "version": "1"},
            "channels": {"c": {"address": "punto-banco.bet-events", "messages": {"A": {}}}},
            "operations": {},
            "components": {"schemas": {"BetSettled": {"type": "object"}}},
        }
    )
    assert "pb &lt;x&gt;" in page and "punto-banco.bet-events" in page and "BetSettled" in page


def test_latency_window_is_bounded() -> None:
    metrics = ServiceMetrics("settlement")
    many: Any = [
        SimpleNamespace(message=resolved(f"c{i}").model_copy(update={"occurred_at": T0}))
        for i in range(10_050)
    ]
    metrics.observe_delivered(many)
    assert len(metrics._resolved_at) == 10_000
    assert ("t1", "c0") not in metrics._resolved_at


def test_the_stopped_partition_gauge_goes_to_1_and_back_to_0() -> None:
    metrics = ServiceMetrics("settlement")
    labels = {"service": "settlement", "topic": "punto-banco.table-events", "partition": "3"}
    metrics.observe_stopped("punto-banco.table-events", 3, True)
    assert value(metrics, "pb_partition_stopped", labels) == 1
    text = generate_latest(metrics.registry).decode()
    assert (
        'pb_partition_stopped{partition="3",service="settlement",'
        'topic="punto-banco.table-events"} 1.0' in text
    )
    metrics.observe_stopped("punto-banco.table-events", 3, False)
    assert value(metrics, "pb_partition_stopped", labels) == 0


async def test_readiness_names_a_stopped_partition() -> None:
    """/ready answers 503 with each failing check (endpoints.py); this is the check."""
    import asyncio

    from aiokafka import TopicPartition

    from services.shared.platform.consumer.stops import PartitionStops
    from services.shared.platform.host.service import ServiceReadiness
    from services.shared.platform.store import AppWorker, WriterLease

    class Checks(ServiceReadiness):
        async def broker(self) -> None:
            return None

        async def store(self) -> None:
            return None

    stops = PartitionStops()
    ready = asyncio.Event()
    ready.set()
    host: Any = SimpleNamespace(
        settings=Settings.from_env("settlement", {}),
        consumer=SimpleNamespace(ready=ready, stops=stops),
        stopping=asyncio.Event(),
        lease=WriterLease("sqlite var/settlement.db"),
        worker=AppWorker("settlement"),
    )
    readiness = Checks(host)
    standby = await readiness.checks()  # another instance writes the store: not ready
    assert standby["writer"] == (
        "standby: sqlite var/settlement.db is written by another instance (?)"
    )
    assert standby["store"] == "not opened by a standby"
    host.lease.held = True
    assert set((await readiness.checks()).values()) == {None}
    stops.stop(
        TopicPartition("p.punto-banco.table-events", 3),
        "punto-banco.table-events",
        41,
        "CoupResolved",
        "t7",
        "handler failed: KeyError('c9')",
    )
    checks = await readiness.checks()
    handling = checks["handling"]
    assert handling is not None and handling.startswith(
        "punto-banco.table-events:3 stopped at offset 41 (CoupResolved, table t7)"
    )
    assert "KeyError('c9')" in handling and "1 failed try, next in" in handling
    assert checks["broker"] is None


def test_quarantined_messages_are_counted_by_type() -> None:
    from uuid import uuid4

    from contracts import MessageQuarantined

    metrics = ServiceMetrics("settlement")

    def quarantined(message_type: str) -> MessageQuarantined:
        return MessageQuarantined(
            table_id="t1",
            service="settlement",
            original_topic="punto-banco.bet-events",
            message_type=message_type,
            message_id=uuid4(),
            notification_id=7,
            message_index=0,
            size=2_000_000,
            sha256="0" * 64,
            reason="larger than the broker accepts",
        )

    metrics.observe_quarantined([quarantined("BetRejected"), quarantined("BetRejected")])
    metrics.observe_quarantined([quarantined("CoupSettled")])
    assert value(metrics, "pb_messages_quarantined_total", {"type": "BetRejected"}) == 2
    assert value(metrics, "pb_messages_quarantined_total", {"type": "CoupSettled"}) == 1
