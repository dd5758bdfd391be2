"""The audit of the golden stores is the recorded report (and of the legacy rows, too)."""

from __future__ import annotations

from typing import Any

from services.tools.audit.auditor import audit
from services.tools.audit.memory_stores import ListStore
from services.tools.audit.stores import Row
from tests.unit.compat.golden import SERVICES, golden_rows, legacy_rows, report

DROPPED = ("generated_at", "seconds", "stores")


def _audit(with_legacy: bool, prefix: str = "") -> dict[str, Any]:
    stores = {}
    for service in SERVICES:
        rows = golden_rows(service, prefix) + (legacy_rows(service) if with_legacy else ())
        stores[service] = ListStore(
            service,
            [
                Row(
                    number,
                    bytes.fromhex(row["originator_id"]),
                    row["version"],
                    row["topic"],
                    row["state"].encode("utf-8"),
                )
                for number, row in enumerate(rows, start=1)
            ],
        )
    found: dict[str, Any] = audit(stores).to_json()
    for key in DROPPED:
        found.pop(key)
    return found


def test_the_audit_of_the_golden_stores_is_the_recorded_report() -> None:
    assert _audit(with_legacy=False) == report("audit.json")


def test_the_audit_of_the_side_bets_golden_stores_is_the_recorded_report() -> None:
    """Every side bet's payout recomputed from the cards as when it was recorded."""
    recorded = report("sidebets.audit.json")
    assert recorded["passed"] and recorded["checked"]["bets"] > 500
    assert _audit(with_legacy=False, prefix="sidebets.") == recorded


def test_the_legacy_rows_give_the_recorded_findings() -> None:
    """Retired one-bet events and an 8-item answer line are read (their bets are judged)."""
    assert _audit(with_legacy=True) == report("legacy.audit.json")
