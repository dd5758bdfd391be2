"""The device bridge's Application: each device read recorded once, in one transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from services.shared.platform.store import ServiceApplication
from services.studio.protocol import Event
from services.studio_bridge.domain import DeviceReads, Taken, device_uuid

NAME = "studio-bridge"


class BridgeApplication(ServiceApplication):
    name = NAME
    # A device's reads live as long as its table: a restarted bridge starts from a snapshot.
    snapshotting_intervals: ClassVar[dict[type[Any], int]] = {DeviceReads: 500}

    def take(self, table_id: str, reported: Event, read_at: datetime) -> Taken:
        """Record what ``reported`` adds to the reads of its device at ``table_id``."""
        with self.unit_of_work() as unit:
            reads = unit.get(device_uuid(table_id, reported.device), DeviceReads)
            if reads is None:
                reads = DeviceReads(table_id, reported.device)
                unit.add(reads)
            return reads.take(reported, read_at)

    def reads_of(self, table_id: str, device: str) -> DeviceReads | None:
        """The device's reads as stored (a copy), or None before its first event."""
        with self.unit_of_work() as unit:
            return unit.get(device_uuid(table_id, device), DeviceReads)
