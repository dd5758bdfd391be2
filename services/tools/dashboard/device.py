"""A studio table's device as the dashboard shows it: counters over its reads and holds.

Fed with the table's ``StudioRead`` messages (the device bridge's, topic
``punto-banco.studio-reads``) and its ``IncidentRaised`` of code ``STUDIO_HOLD`` (the shoe
service's, topic ``punto-banco.incidents``: the message starts with the hold's reason).
Only counters and the last read and hold are kept, never the reads themselves.

Whether the table is held now is not on Kafka (a supervisor's decision lifts a hold); the
panel says what is: the last hold, when, and the coups resolved and voided since (none since
a hold: the table may well still be held).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from contracts import IncidentRaised, StudioRead

STALE_AFTER = 30.0
"""Seconds without a read after which the device is shown silent (the bridge's
``PB_STUDIO_SILENCE`` default: it opens such a connection again)."""

HOLD = "STUDIO_HOLD"
"""The incident code of a studio shoe's hold."""


@dataclass
class DevicePanel:
    """One studio table's device: what its reads and holds add up to."""

    device: str = ""  # the device of the last read
    reads: int = 0  # reads received (gaps not counted)
    cards: int = 0
    unreadable: int = 0
    rescans: int = 0  # the dealer's RESCAN button
    gaps: int = 0
    missing: int = 0  # device sequence numbers never received, over all gaps
    last_seq: int | None = None
    last_read_at: datetime | None = None
    holds: int = 0
    last_hold_reason: str | None = None
    last_hold_at: datetime | None = None
    resolved_at_hold: int = 0  # the table's coups resolved and voided at the last hold
    voided_at_hold: int = 0

    def take(self, read: StudioRead) -> None:
        """Count one read (each once: the caller skips redeliveries)."""
        self.device = read.device
        if read.what == "gap":
            self.gaps += 1
            self.missing += _last_seq(read) - read.seq + 1
        else:
            self.reads += 1
            if read.what == "card":
                self.cards += 1
            elif read.what == "unreadable":
                self.unreadable += 1
            elif read.button == "RESCAN":
                self.rescans += 1
        self.last_seq = max(_last_seq(read), -1 if self.last_seq is None else self.last_seq)
        if self.last_read_at is None or read.read_at > self.last_read_at:
            self.last_read_at = read.read_at

    def hold(self, incident: IncidentRaised, coups_resolved: int, coups_voided: int) -> None:
        """Count a hold; ``coups_resolved``/``coups_voided``: the table's counts until then."""
        self.holds += 1
        if self.last_hold_at is None or incident.occurred_at >= self.last_hold_at:
            self.last_hold_reason = incident.message.split(":", 1)[0].strip()
            self.last_hold_at = incident.occurred_at
            self.resolved_at_hold, self.voided_at_hold = coups_resolved, coups_voided

    def snapshot(self, now: float, coups_resolved: int, coups_voided: int) -> dict[str, Any]:
        """The panel's JSON at ``now`` (seconds since the epoch) for a table that has resolved
        and voided that many coups."""
        silent = None
        if self.last_read_at is not None:
            silent = round(max(0.0, now - self.last_read_at.timestamp()), 1)
        last_hold = None
        if self.last_hold_at is not None:
            last_hold = {
                "reason": self.last_hold_reason,
                "at": self.last_hold_at.isoformat(timespec="seconds"),
                "coups_resolved_since": coups_resolved - self.resolved_at_hold,
                "coups_voided_since": coups_voided - self.voided_at_hold,
            }
        return {
            "device": self.device,
            "reads": self.reads,
            "cards": self.cards,
            "unreadable": self.unreadable,
            "rescans": self.rescans,
            "gaps": self.gaps,
            "missing": self.missing,
            "last_seq": self.last_seq,
            "last_read_at": None
            if self.last_read_at is None
            else self.last_read_at.isoformat(timespec="seconds"),
            "silent_for": silent,
            "stale": silent is not None and silent > STALE_AFTER,
            "holds": self.holds,
            "last_hold": last_hold,
        }


def _last_seq(read: StudioRead) -> int:
    """The last device sequence number ``read`` stands for (a gap's last missing one)."""
    return read.seq if read.last_seq is None else read.last_seq
