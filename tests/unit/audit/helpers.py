"""Histories played in memory through the real Applications, and in-memory stores of them;
the table ids of a partition, and an archive re-digested (also for the integration tests)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.dev.simulation import LocalSystem, PlayLog, play
from services.shared.facts.settlement import CoupSettledFact
from services.shared.platform.kafka import table_partition
from services.tools.audit.auditor import AuditReport, audit, read_history
from services.tools.audit.checks import Checker, Filters
from services.tools.audit.findings import Code, Finding, Severity
from services.tools.audit.memory_stores import ListStore, RecorderStore
from services.tools.audit.stores import SERVICES, Row, StoreReader

TOPIC_SETTLED = CoupSettledFact.STORED_TOPIC


@dataclass
class Played:
    system: LocalSystem
    logs: dict[str, PlayLog]

    def rows(self) -> dict[str, list[Row]]:
        out = {}
        for name in SERVICES:
            batches = RecorderStore(name, self.system.apps[name].recorder).rows()
            out[name] = [row for batch in batches for row in batch]
        return out


def play_history(*, seal: bool = True, coups: int = 24, tables: int = 2) -> Played:
    """Two 1-deck tables (a new shoe every few coups), voids, refused and late bets."""
    system = LocalSystem.in_memory()
    system.keep_published = True
    logs = {}
    for number in range(1, tables + 1):
        logs[f"t{number}"] = play(
            system,
            f"t{number}",
            coups,
            bets_per_coup=6,
            decks=1,
            paytable="standard" if number == 1 else "tie-9-to-1",
            void_every=5,
            invalid_every=4,
            late_every=3,
            batch=4,
            seed=number,
        )
    system.pump()
    if seal:
        system.seal()
    return Played(system, logs)


def audit_rows(rows: dict[str, list[Row]], filters: Filters | None = None) -> AuditReport:
    return audit({name: ListStore(name, list(r)) for name, r in rows.items()}, filters)


def whole_history(stores: Mapping[str, StoreReader]) -> dict[str, Any]:
    """The audit as it was before it streamed: every store read into one History, then every
    check run on it (findings errors first, totals, what was checked)."""
    history, findings, _seals = read_history(stores)
    checker = Checker(history)
    checker.run()
    found = sorted(findings + checker.findings, key=lambda f: f.severity is not Severity.ERROR)
    return {
        "findings": [f.to_json() for f in found],
        "totals": checker.totals.to_json(),
        "checked": {k: v for k, v in checker.checked.items() if v},
    }


def streamed(report: AuditReport) -> dict[str, Any]:
    """The parts of a report :func:`whole_history` gives."""
    return {
        "findings": [f.to_json() for f in report.findings],
        "totals": report.totals.to_json(),
        "checked": {k: v for k, v in report.checked.items() if v},
    }


def codes(report: AuditReport) -> set[Code]:
    return {finding.code for finding in report.findings}


def only(report: AuditReport, code: Code) -> list[Finding]:
    return [finding for finding in report.findings if finding.code is code]


def edit_state(row: Row, change: Callable[[dict[str, object]], None]) -> Row:
    state = json.loads(row.state)
    change(state)
    return row._replace(state=json.dumps(state, separators=(",", ":")).encode())


def tables_of(partition: int, partitions: int, count: int = 2) -> list[str]:
    """The first ``count`` table ids ``t<N>`` that live in ``partition`` (of ``partitions``)."""
    names = (f"t{n}" for n in range(1, 100))
    return [t for t in names if table_partition(t, partitions) == partition][:count]


def redigest(path: Path) -> None:
    """The archive's ``.sha256`` file rewritten for its bytes as they are now (after a change:
    then only the seals can tell)."""
    sidecar = path.with_name(path.name + ".sha256")
    sidecar.write_text(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}\n")
