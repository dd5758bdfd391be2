"""The golden stores of ``tests/fixtures/golden/`` (written once by its ``make_golden.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from contracts import Message
from services.dealing.application import DealingApplication
from services.dealing.messages import to_messages as dealing_messages
from services.settlement.application import SettlementApplication
from services.settlement.messages import to_messages as settlement_messages
from services.shared.platform.relay import with_incidents, without_seals
from services.shared.platform.store import ServiceApplication
from services.shoe.application import ShoeApplication
from services.shoe.messages import to_messages as shoe_messages

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden"
SERVICES = ("shoe", "dealing", "settlement")
APPLICATIONS: dict[str, type[ServiceApplication]] = {
    "shoe": ShoeApplication,
    "dealing": DealingApplication,
    "settlement": SettlementApplication,
}
PUBLISH: dict[str, Callable[[Any], Sequence[Message]]] = {
    "shoe": with_incidents(without_seals(shoe_messages)),
    "dealing": with_incidents(without_seals(dealing_messages)),
    "settlement": with_incidents(without_seals(settlement_messages)),
}


def _jsonl(name: str) -> list[dict[str, Any]]:
    with (GOLDEN / name).open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


GOLDEN_SETS = ("", "sidebets.")
"""The golden stores, by file prefix: the first history (before the side bets existed), and the
commission-free tables played with every side bet (``sidebets.``)."""


@cache
def golden_rows(service: str, prefix: str = "") -> tuple[dict[str, Any], ...]:
    """The service's stored rows of the golden set ``prefix``, in notification order."""
    return tuple(_jsonl(f"{prefix}{service}.rows.jsonl"))


@cache
def legacy_rows(service: str, *, replays: bool | None = None) -> tuple[dict[str, Any], ...]:
    """Hand-made rows of older shapes (``replays``: only those a service class reads)."""
    return tuple(
        row
        for row in _jsonl("legacy.rows.jsonl")
        if row["service"] == service and (replays is None or row["replays"] is replays)
    )


@cache
def published(name: str = "published.jsonl") -> tuple[dict[str, Any], ...]:
    return tuple(_jsonl(name))


def report(name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((GOLDEN / name).read_text(encoding="utf-8"))
    return found


def stored(row: dict[str, Any]) -> StoredEvent:
    return StoredEvent(
        originator_id=UUID(hex=row["originator_id"]),
        originator_version=row["version"],
        topic=row["topic"],
        state=row["state"].encode("utf-8"),
    )


SHOE_SECRET = (GOLDEN / "shoe-secret.txt").read_text(encoding="utf-8").strip()
"""The golden shoe store's secret keys (``PB_SHOE_SECRET_KEY``'s form; test keys)."""


def app_env(service: str, **env: str) -> dict[str, str]:
    """``env`` for the service's Application (the shoe's with the golden secret keys)."""
    if service == "shoe":
        return {"PB_SHOE_SECRET_KEY": SHOE_SECRET, "PB_SHOE_SECRET_KEY_FILE": "", **env}
    return env


@cache
def encrypted_rows() -> tuple[dict[str, Any], ...]:
    """A shoe store whose orders and salts are encrypted (``Shoe.Shuffled`` version 2)."""
    return tuple(_jsonl("shoe.encrypted.rows.jsonl"))


def in_memory(service: str) -> ServiceApplication:
    return APPLICATIONS[service](env=app_env(service, PERSISTENCE_MODULE="eventsourcing.popo"))
