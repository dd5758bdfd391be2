"""Histories played through the real Applications on real stores (SQLite or PostgreSQL)."""

from __future__ import annotations

from eventsourcing.domain import Aggregate, event

from services.dev.simulation import LocalSystem, PlayLog, play
from services.shared.platform.application import ServiceApplication
from services.shared.platform.settings import Settings
from services.tools.audit.auditor import AuditReport, audit
from services.tools.audit.stores import open_stores


def play_on(settings: Settings, coups: int = 14) -> tuple[dict[str, PlayLog], list[object]]:
    """Two 1-deck tables (several shoes), voids, refused and late bets; sealed at the end."""
    with LocalSystem.from_settings(settings) as system:
        system.keep_published = True
        logs = {
            table: play(
                system,
                table,
                coups,
                bets_per_coup=5,
                decks=1,
                void_every=5,
                invalid_every=4,
                late_every=3,
                batch=3,
                seed=seed,
            )
            for seed, table in enumerate(("t1", "t2"), start=1)
        }
        system.pump()
        system.seal()
        return logs, list(system.published)


def audit_settings(settings: Settings) -> AuditReport:
    stores = open_stores(settings)
    try:
        return audit(stores)
    finally:
        for store in stores.values():
            store.close()


class Tally(Aggregate):
    """A small aggregate for tests of the sealing and anchoring machinery."""

    @event("Counted")
    def count(self, by: int) -> None:
        self.total = getattr(self, "total", 0) + by


class TallyApp(ServiceApplication):
    """A service Application with nothing but tallies (its events are sealed like any)."""

    name = "tally"

    def add(self, times: int) -> None:
        tally = Tally()
        for n in range(times):
            tally.count(by=n)
        self.save(tally)
