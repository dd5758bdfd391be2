"""Which part of the history an audit checks: one table and/or coups opened in [since, until)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Filters:
    """Restrict the audit to one table and/or coups opened in [since, until)."""

    table: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def table_in(self, table_id: str) -> bool:
        return self.table is None or table_id == self.table

    def time_in(self, at: str) -> bool:
        if self.since is None and self.until is None:
            return True
        moment = datetime.fromisoformat(at)
        if self.since is not None and moment < self.since:
            return False
        return self.until is None or moment < self.until

    def overlaps(self, start: str, end: str | None) -> bool:
        if self.until is not None and datetime.fromisoformat(start) >= self.until:
            return False
        return not (
            self.since is not None and end is not None and datetime.fromisoformat(end) < self.since
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "since": None if self.since is None else self.since.isoformat(),
            "until": None if self.until is None else self.until.isoformat(),
        }
