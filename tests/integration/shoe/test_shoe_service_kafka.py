"""The shoe service over real Kafka with real SQLite / PostgreSQL stores."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from contracts import (
    SHOE_COMMANDS,
    SHOE_EVENTS,
    CardDrawn,
    CardsBurned,
    CloseShoe,
    CutCardReached,
    DrawCards,
    Message,
    ShoeClosed,
    ShoeShuffled,
    ShuffleShoe,
)
from services.shared.platform.settings import Settings
from services.shared.rules import shoe as rules
from services.shared.rules.cards import Card
from services.shoe.service import build_service
from tests.integration.platform.kafka_tools import read_topic, send_messages, settings_for

pytestmark = [pytest.mark.kafka]

ROOT = Path(__file__).resolve().parents[3]


def events(records: list) -> list[Message]:  # type: ignore[type-arg]
    seen: dict[object, Message] = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        message = r.message(SHOE_EVENTS)
        seen.setdefault(message.event_id, message)  # a republished message has the same id
    return list(seen.values())


def closed_in(records: list) -> bool:  # type: ignore[type-arg]
    return any(b'"ShoeClosed"' in r.value for r in records)


def check_whole_shoe(messages: list[Message], requests: dict[str, int]) -> ShoeClosed:
    """Every request answered once, in shoe order; the reveal matches all of it."""
    shuffled = [m for m in messages if isinstance(m, ShoeShuffled)]
    burned = [m for m in messages if isinstance(m, CardsBurned)]
    drawn = [m for m in messages if isinstance(m, CardDrawn)]
    cuts = [m for m in messages if isinstance(m, CutCardReached)]
    closed = [m for m in messages if isinstance(m, ShoeClosed)]
    assert len(shuffled) == len(burned) == len(closed) == 1
    reveal = closed[0]
    assert reveal.commitment == shuffled[0].commitment
    order = [Card.parse(c) for c in reveal.order]
    assert rules.verify_commitment(order, bytes.fromhex(reveal.salt), shuffled[0].commitment)
    assert reveal.order[0] == burned[0].shown_card
    assert all(reveal.order[p.position] == p.card for p in burned[0].burned)
    positions = [m.position for m in drawn]
    assert positions == list(range(burned[0].next_position, burned[0].next_position + len(drawn)))
    assert all(reveal.order[m.position] == m.card for m in drawn)
    per_request: dict[str, int] = {}
    for m in drawn:
        per_request[m.request_id] = per_request.get(m.request_id, 0) + 1
    assert per_request == requests
    assert reveal.cards_dealt == burned[0].next_position + len(drawn)
    if burned[0].next_position + len(drawn) > shuffled[0].cut_card_index:
        assert len(cuts) == 1
        assert cuts[0].position == shuffled[0].cut_card_index
    else:
        assert cuts == []
    return reveal


async def test_a_whole_shoe_through_kafka(
    kafka_bootstrap: str, tmp_path: Path, store_env: dict[str, str] | None
) -> None:
    settings = settings_for("shoe", kafka_bootstrap, data_dir=tmp_path, postgres_env=store_env)
    async with build_service(settings) as host:
        await host.wait_ready()
        draws = [
            DrawCards(table_id="t1", shoe_id="s1", coup_id=f"c{i}", request_id=f"r{i}", count=6)
            for i in range(6)
        ]
        await send_messages(
            settings,
            SHOE_COMMANDS,
            [
                ShuffleShoe(table_id="t1", shoe_id="s1", decks=1, cut_card_from_end=30),
                *draws,
                draws[2],  # the same message delivered twice
                DrawCards(table_id="t1", shoe_id="s1", coup_id="c2", request_id="r2", count=6),
                CloseShoe(table_id="t1", shoe_id="s1"),
            ],
        )
        records = await read_topic(settings, SHOE_EVENTS, closed_in)
    messages = events(records)
    check_whole_shoe(messages, {f"r{i}": 6 for i in range(6)})
    assert any(isinstance(m, CutCardReached) for m in messages)


def start_shoe_process(settings: Settings, env_extra: dict[str, str]) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": settings.kafka_bootstrap_servers,
        "PB_TOPIC_PREFIX": settings.topic_prefix,
        "PB_POSTGRES_SCHEMA_PREFIX": settings.postgres_schema_prefix,
        "PB_DATA_DIR": str(settings.data_dir),
        "PB_PERSISTENCE": settings.persistence,
        "PB_LOG_LEVEL": "WARNING",
        "PB_SIGNING_KEY": settings.signing_key,  # the test session's keys (settings_for)
        "PB_KEYRING": settings.keyring,
        "PB_SHOE_SECRET_KEY_FILE": settings.shoe_secret_key_file,  # its orders are encrypted
        **settings.kafka_auth.env(),  # the shoe's own Kafka login
        **env_extra,
    }
    command = [str(Path(sys.executable).parent / "punto-banco"), "serve", "shoe"]
    return subprocess.Popen(command, cwd=ROOT, env=env)


def stop(process: subprocess.Popen[bytes], sig: int) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def test_shoe_killed_mid_shoe_goes_on_from_its_store(
    kafka_bootstrap: str, tmp_path: Path, store_env: dict[str, str] | None
) -> None:
    settings = settings_for("shoe", kafka_bootstrap, data_dir=tmp_path, postgres_env=store_env)
    draws = [
        DrawCards(table_id="t9", shoe_id="s1", coup_id=f"c{i}", request_id=f"r{i}", count=4)
        for i in range(60)
    ]
    process = start_shoe_process(settings, store_env or {})
    try:
        await send_messages(
            settings,
            SHOE_COMMANDS,
            [ShuffleShoe(table_id="t9", shoe_id="s1", decks=6, cut_card_from_end=60), *draws[:40]],
        )
        before = await read_topic(
            settings,
            SHOE_EVENTS,
            lambda r: sum(b'"CardDrawn"' in x.value for x in r) >= 20,
            timeout=60,
        )
        stop(process, signal.SIGKILL)
        assert process.returncode == -signal.SIGKILL
        # commands keep arriving while the service is down
        await send_messages(settings, SHOE_COMMANDS, draws[40:])
        process = start_shoe_process(settings, store_env or {})
        await send_messages(settings, SHOE_COMMANDS, [CloseShoe(table_id="t9", shoe_id="s1")])
        records = await read_topic(settings, SHOE_EVENTS, closed_in, timeout=90)
        stop(process, signal.SIGTERM)
        assert process.returncode == 0  # a clean stop on SIGTERM
    finally:
        stop(process, signal.SIGKILL)
    assert sum(b'"CardDrawn"' in r.value for r in before) >= 20
    check_whole_shoe(events(records), {f"r{i}": 4 for i in range(60)})
