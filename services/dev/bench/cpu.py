"""CPU time per bet, per part of the system, and the capacity model it gives.

Bets per second depend on what else the 2 cores do; the CPU time a bet costs does not (much):
it is what sizes a deployment. :class:`CpuMeter` reads the CPU time (user + system, psutil) of
each part before and after a cell: the three services, the Kafka broker and the PostgreSQL
server (found by the port they listen on; PostgreSQL with its backends, living or reaped;
a service run as several processes, every one of them) and
the benchmark's own process (the driver: its own time only, not its children's, the services).
:func:`capacity_text` turns the largest cell's figures into bets per second per core, what one
service process can do at most (a Python process runs on one core), and cores per 100 tables;
:func:`budget_text` what a sustained bar leaves settlement once the rest of the machine is paid.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import psutil

SERVICES_ORDER = ("shoe", "dealing", "settlement", "kafka", "postgres", "driver")
SYSTEM = ("shoe", "dealing", "settlement", "kafka", "postgres")
"""What a deployment runs (the driver stands in for the gateways and is not counted)."""


def listening_pid(port: int) -> int | None:
    """The process listening on ``port`` on this machine, if any (and if visible to us)."""
    with contextlib.suppress(psutil.Error, OSError):
        for connection in psutil.net_connections(kind="tcp"):
            if (
                connection.status == psutil.CONN_LISTEN
                and connection.laddr
                and connection.laddr.port == port
                and connection.pid is not None
            ):
                return connection.pid
    return None


def _seconds(pid: int, tree: bool = True) -> float:
    """CPU seconds of a process and (``tree``) of its reaped children and living descendants."""
    try:
        root = psutil.Process(pid)
        times = root.cpu_times()
        total = times.user + times.system
        if not tree:
            return total
        total += times.children_user + times.children_system
        for child in root.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                child_times = child.cpu_times()
                total += child_times.user + child_times.system
    except psutil.Error:
        return 0.0
    return total


Pids = Mapping[str, int | Sequence[int]]
"""A part's process, or its processes (a service run as several: their sum)."""


class CpuMeter:
    """CPU seconds spent by each named part (its process trees) between two readings."""

    def __init__(self, pids: Pids) -> None:
        self.pids = {
            name: (pid,) if isinstance(pid, int) else tuple(pid) for name, pid in pids.items()
        }
        self._start: dict[str, float] = {}
        # The driver is the parent of the services it started: only its own time is its.
        self._own_only = {name for name, pids in self.pids.items() if os.getpid() in pids}

    @classmethod
    def for_system(
        cls, services: Pids, kafka_port: int | None, postgres_port: int | None
    ) -> CpuMeter:
        pids = dict(services)
        for name, port in (("kafka", kafka_port), ("postgres", postgres_port)):
            pid = listening_pid(port) if port else None
            if pid is not None:
                pids[name] = pid
        pids["driver"] = os.getpid()
        return cls(pids)

    def read(self) -> dict[str, float]:
        return {
            name: sum(_seconds(pid, tree=name not in self._own_only) for pid in pids)
            for name, pids in self.pids.items()
        }

    def start(self) -> None:
        self._start = self.read()

    def stop(self) -> dict[str, float]:
        """CPU seconds per part since :meth:`start`."""
        end = self.read()
        return {name: max(0.0, end[name] - self._start.get(name, 0.0)) for name in end}


@dataclass(frozen=True)
class CpuCell:
    """One cell's CPU seconds per part, with what it did."""

    store: str
    tables: int
    bets: int
    settled: int
    seconds: float
    cpu: Mapping[str, float]

    def micros_per_bet(self, part: str) -> float:
        return self.cpu.get(part, 0.0) / max(1, self.settled) * 1e6

    @property
    def system_micros_per_bet(self) -> float:
        return sum(self.micros_per_bet(part) for part in SYSTEM if part in self.cpu)


def cpu_table(cells: Sequence[CpuCell]) -> str:
    """CPU microseconds per settled bet, per part, for each measured cell."""
    parts = [part for part in SERVICES_ORDER if any(part in cell.cpu for cell in cells)]
    lines = [
        "| Store | Cell | " + " | ".join(parts) + " | system (no driver) | bets/s per core |",
        "|---|---|" + "---:|" * (len(parts) + 2),
    ]
    for cell in cells:
        per_bet = [f"{cell.micros_per_bet(part):,.0f}" for part in parts]
        system = cell.system_micros_per_bet
        per_core = 1e6 / system if system else 0.0
        lines.append(
            f"| {cell.store} | {cell.tables} x {cell.bets:,} | "
            + " | ".join(per_bet)
            + f" | {system:,.0f} | {per_core:,.0f} |"
        )
    return "\n".join(lines)


def capacity_text(cell: CpuCell, bets_per_coup: int = 500, coup_seconds: float = 60.0) -> str:
    """The capacity model of one (large) cell: per core, per process, per 100 tables."""
    system = cell.system_micros_per_bet
    if not system or "settlement" not in cell.cpu:
        return "(not measured in this run)"
    settlement = cell.micros_per_bet("settlement")
    per_core = 1e6 / system
    load = 100 * bets_per_coup / coup_seconds  # bets/s of 100 tables
    busiest = max(("shoe", "dealing", "settlement"), key=cell.micros_per_bet)
    return (
        f"From the {cell.store} cell {cell.tables} tables x {cell.bets:,} bets: one settled bet "
        f"costs {system:,.0f} us of CPU in the system (services, Kafka, PostgreSQL; the "
        f"driver's {cell.micros_per_bet('driver'):,.0f} us not counted), so one core carries "
        f"about {per_core:,.0f} bets/s. The busiest service is {busiest}: "
        f"{cell.micros_per_bet(busiest):,.0f} us per bet, and one Python process uses one core "
        f"at most, so one {busiest} process tops out near "
        f"{1e6 / cell.micros_per_bet(busiest):,.0f} bets/s whatever the machine (settlement: "
        f"{settlement:,.0f} us per bet). 100 tables at {bets_per_coup:,} bets per coup and a "
        f"coup every {coup_seconds:.0f} s are {load:,.0f} bets/s: about "
        f"{load * system / 1e6:,.1f} cores in all, {load * settlement / 1e6:,.2f} of them "
        "settlement's."
    )


def budget_text(cell: CpuCell, target: float, cores: int) -> str:
    """What a sustained bar of ``target`` bets/s leaves settlement per bet on ``cores`` cores,
    once every other process of the cell (the driver too: it shares the cores) is paid."""
    if not target or "settlement" not in cell.cpu:
        return ""
    budget = cores * 1e6 / target
    others = sum(cell.micros_per_bet(part) for part in cell.cpu if part != "settlement")
    left, used = budget - others, cell.micros_per_bet("settlement")
    verdict = (
        f"leaves settlement {left:,.0f} us per bet; it used {used:,.0f}"
        if left > 0
        else "leaves settlement nothing: no settlement cost meets that bar on this machine"
    )
    return (
        f"At the sustained bar of {target:,.0f} bets/s, this machine's {cores} cores give every "
        f"process on it {budget:,.0f} us of CPU per bet together. In the {cell.store} cell "
        f"{cell.tables} tables x {cell.bets:,} bets the parts other than settlement (the driver "
        f"included) used {others:,.0f} us per bet, which {verdict}."
    )
