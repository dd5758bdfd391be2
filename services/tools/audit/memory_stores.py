"""Stores held in memory, read as the audit reads a service's store (``stores.py``).

:class:`RecorderStore` reads an Application's own recorder (an in-memory history);
:class:`ListStore` holds rows in a list (tests tamper with them directly).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from services.tools.audit.stores import BATCH, Row, scan_row_at, scan_rows_of


class RecorderStore:
    """An Application's own recorder as a store (in-process, e.g. an in-memory history)."""

    def __init__(self, service: str, recorder: Any) -> None:
        self.service = service
        self.description = f"{type(recorder).__name__} of {service}"
        self._recorder = recorder

    def count(self) -> int:
        return int(self._recorder.max_notification_id() or 0)

    def rows(self, after: int = 0) -> Iterator[list[Row]]:
        start = after + 1
        while True:
            batch = self._recorder.select_notifications(start, BATCH)
            if not batch:
                return
            yield [
                Row(n.id, n.originator_id.bytes, n.originator_version, n.topic, bytes(n.state))
                for n in batch
            ]
            start = batch[-1].id + 1

    def rows_of(self, originator_id: bytes, before: int) -> Iterator[Row]:
        return scan_rows_of(self, originator_id, before)

    def row_at(self, originator_id: bytes, version: int | None) -> Row | None:
        return scan_row_at(self, originator_id, version)

    def close(self) -> None:
        """Nothing to close: the Application owns its recorder."""


class ListStore:
    """Rows held in a list (tests tamper with them directly)."""

    def __init__(self, service: str, rows: list[Row]) -> None:
        self.service = service
        self.description = f"{len(rows)} rows in memory"
        self.rows_list = rows

    def count(self) -> int:
        return len(self.rows_list)

    def rows(self, after: int = 0) -> Iterator[list[Row]]:
        ordered = sorted(
            (row for row in self.rows_list if row.notification_id > after),
            key=lambda row: row.notification_id,
        )
        for start in range(0, len(ordered), BATCH):
            yield ordered[start : start + BATCH]

    def rows_of(self, originator_id: bytes, before: int) -> Iterator[Row]:
        return scan_rows_of(self, originator_id, before)

    def row_at(self, originator_id: bytes, version: int | None) -> Row | None:
        return scan_row_at(self, originator_id, version)

    def close(self) -> None:
        """Nothing to close."""
