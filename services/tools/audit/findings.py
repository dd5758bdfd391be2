"""What the audit found: one :class:`Finding` per problem, naming what it concerns.

Its codes and severities are the read side's one list (:mod:`services.tools.history.codes`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from services.tools.history.codes import Check, Severity

Code = Check
"""The audit's codes: the one list of check codes (the values of the JSON report)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem; ``store``/``notification_id`` say where in which store, if known;
    ``partition``: the partition whose stores it was found in (a partitioned deployment)."""

    severity: Severity
    code: Code
    message: str
    table_id: str | None = None
    shoe_id: str | None = None
    coup_id: str | None = None
    bet_id: str | None = None
    store: str | None = None
    notification_id: int | None = None
    partition: int | None = None

    def where(self) -> str:
        parts = [
            f"table {self.table_id}" if self.table_id else "",
            f"shoe {self.shoe_id}" if self.shoe_id else "",
            f"coup {self.coup_id}" if self.coup_id else "",
            f"bet {self.bet_id}" if self.bet_id else "",
            f"partition {self.partition}" if self.partition is not None else "",
            f"{self.store} store" if self.store else "",
            f"notification {self.notification_id}" if self.notification_id is not None else "",
        ]
        return ", ".join(part for part in parts if part)

    def __str__(self) -> str:
        where = self.where()
        head = f"{self.severity.value.upper()} {self.code.value}"
        return f"{head}: {where}: {self.message}" if where else f"{head}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["severity"] = self.severity.value
        out["code"] = self.code.value
        return {k: v for k, v in out.items() if v is not None}


__all__ = ["Code", "Finding", "Severity"]
