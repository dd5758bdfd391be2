"""Re-translating the golden rows gives what the relay published, byte for byte.

``published.jsonl`` holds every message the relay made of each golden row (event ids
included: a republished message must keep its id), and ``legacy.published.jsonl`` those of
the hand-made rows of older shapes (upcast on the way in).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest

from contracts import encode
from tests.unit.compat.golden import (
    GOLDEN_SETS,
    PUBLISH,
    SERVICES,
    golden_rows,
    in_memory,
    legacy_rows,
    published,
    stored,
)


def _expected(name: str, service: str) -> dict[int, list[str]]:
    found: dict[int, list[str]] = defaultdict(list)
    for record in published(name):
        if record["service"] == service:
            assert record["index"] == len(found[record["id"]])
            found[record["id"]].append(record["payload"])
    return found


def _translated(service: str, rows: tuple[dict[str, Any], ...]) -> dict[int, list[str]]:
    mapper = in_memory(service).mapper
    translate = PUBLISH[service]
    made: dict[int, list[str]] = {}
    for row in rows:
        messages = translate(mapper.to_domain_event(stored(row)))
        if messages:
            made[row["id"]] = [encode(message).decode("utf-8") for message in messages]
    return made


@pytest.mark.parametrize("prefix", GOLDEN_SETS)
@pytest.mark.parametrize("service", SERVICES)
def test_golden_rows_publish_the_recorded_messages_byte_for_byte(service: str, prefix: str) -> None:
    assert _translated(service, golden_rows(service, prefix)) == _expected(
        f"{prefix}published.jsonl", service
    )


@pytest.mark.parametrize("service", SERVICES)
def test_legacy_rows_publish_the_recorded_messages_byte_for_byte(service: str) -> None:
    rows = legacy_rows(service, replays=True)
    assert _translated(service, rows) == _expected("legacy.published.jsonl", service)


def test_the_side_bets_golden_messages_cover_every_bet_type_and_paytable() -> None:
    """Every bet type settled, on both commission-free paytables, and a refusal of a bet
    type the table does not offer."""
    from services.shared.rules import BetType

    payloads = [json.loads(record["payload"]) for record in published("sidebets.published.jsonl")]
    settled = {p["bet_type"] for p in payloads if p["type"] == "BetSettled"}
    assert settled == {bet.value for bet in BetType}
    assert {p["paytable"] for p in payloads if p["type"] == "TableOpened"} == {
        "no-commission",
        "ez-baccarat",
    }
    reasons = {p["reason_code"] for p in payloads if p["type"] == "BetRejected"}
    assert "BET_TYPE_NOT_OFFERED" in reasons


def test_the_golden_messages_cover_every_published_type() -> None:
    """The golden history publishes every message type the services make of stored events."""
    kinds = {record["payload"].split('"', 4)[3] for record in published()}
    assert kinds >= {
        "ShoeShuffled", "CardsBurned", "CardDrawn", "CutCardReached", "ShoeClosed",
        "TableOpened", "TableClosed", "ShuffleShoe", "CloseShoe", "BettingOpened", "OpenBook",
        "BettingClosed", "CloseBook", "DrawCards", "CardDealt", "CoupResolved", "CoupVoided",
        "CommandRejected", "BetAccepted", "BetRejected", "BetsClosed", "BetSettled",
        "CoupSettled", "BetRefunded", "CoupRefunded", "IncidentRaised",
    }  # fmt: skip
