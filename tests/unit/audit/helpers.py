"""Histories played in memory through the real Applications (a studio table's too), and
in-memory stores of them; the table ids of a partition, and an archive re-digested (also for the
integration tests)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import count
from pathlib import Path
from typing import Any

from contracts import CloseBetting, OpenTable, PlaceBet, StudioRead
from services.dev.simulation import LocalSystem, PlayLog, open_table_command, play
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


class StudioPlay:
    """A studio table ``s1`` (one deck) on ``system``: its device's reads given to the shoe
    service one ``StudioRead`` each, as the bridge publishes them (a fixed clock: the reads are
    500 ms apart), and its coups bet on, closed and confirmed as a dealer would."""

    def __init__(self, system: LocalSystem) -> None:
        self.system = system
        command = open_table_command("s1", decks=1).model_dump()
        system.command(OpenTable.model_validate({**command, "card_source": "studio"}))
        self.seq = count(1)
        self.clock = datetime(2026, 12, 6, 12, tzinfo=UTC)

    def read(self, what: str, card: str | None = None, **fields: Any) -> None:
        """The device's next read (``skip``: that many sequence numbers lost before it)."""
        for _ in range(fields.pop("skip", 0)):
            next(self.seq)
        self.clock += timedelta(milliseconds=500)
        read = StudioRead(
            table_id="s1",
            device="shoe-1",
            seq=next(self.seq),
            what=what,
            card=card,
            read_at=self.clock,
            **fields,
        )
        self.system.shoe.take_read(read)
        self.system.pump()

    def burn(self, shown: str, *burned: str) -> None:
        self.read("shoe-in")
        self.read("burn-start")
        for code in (shown, *burned):
            self.read("card", code)
        self.read("burn-end")

    def coup(self, *cards: str, cut_before: int | None = None, confirm: bool = True) -> str:
        """Bet on the coup in play, close its betting, read ``cards`` (the second after an
        UNREADABLE and a re-scan; CUT-CARD before card ``cut_before``) and CONFIRM."""
        coup_id = self.system.current_coup("s1")
        assert coup_id is not None, "a coup in play"
        bets = [
            PlaceBet(
                table_id="s1",
                coup_id=coup_id,
                bet_id=f"{coup_id}.{side}",
                bettor_id=f"bettor-{side}",
                bet_type=side,
                amount=1_000,
                currency="EUR",
            )
            for side in ("player", "banker")
        ]
        self.system.place_bets(bets)
        self.system.command(CloseBetting(table_id="s1", coup_id=coup_id))
        for index, code in enumerate(cards):
            if index == cut_before:
                self.read("cut-card")
            if index == 1:
                self.read("unreadable")
                self.read("button", button="RESCAN")
            self.read("card", code)
        if confirm:
            self.read("button", button="CONFIRM")
        return coup_id


def play_studio(*, held: bool = False) -> Played:
    """A software table ``t1`` and a studio table ``s1`` in one system, sealed. The studio
    table deals a shoe (a re-scan in each coup, the cut card in the second), takes it out and
    deals a coup of the next; ``held``: instead, its second coup is held by a gap in the
    device's reads and voided by the supervisor."""
    system = LocalSystem.in_memory()
    system.keep_published = True
    logs = {"t1": play(system, "t1", 6, bets_per_coup=4, decks=1, void_every=5)}
    studio = StudioPlay(system)
    studio.burn("AH", "2S")
    studio.coup("9S", "2D", "TH", "3C")  # Player 9 against Banker 5: natural
    if held:
        studio.coup("2C", "4D", confirm=False)
        studio.read("card", "3H", skip=2)  # reads 17 and 18 never arrived
        coup_id = system.current_coup("s1")
        assert coup_id is not None
        system.command(system.supervisor.void("s1", coup_id, "studio hold: reads lost"))
    else:
        studio.coup("2C", "4D", "3H", "TC", "4C", "5H", cut_before=2)  # a tie of three cards
        studio.coup("9C", "8D", "TS", "7D")  # the coup after the cut card: the shoe closes
        studio.read("shoe-out")
        studio.burn("KH", "2H", "3S", "4S", "5S", "6S", "7S", "8H", "9H", "JH", "QH")
        studio.coup("9D", "2D", "TD", "3D")
    system.pump()
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
