"""The audit benchmark: audit throughput over a generated history of a million stored events.

The history is made by driving the real Applications in memory
(:mod:`services.dev.simulation`: several tables, many bets per coup in small
batches - one settlement event per batch - voids and refused bets), sealed,
and written as the services' SQLite files under ``var/bench/audit-<size>/``.
It is kept there, so a rerun measures at once; delete the folder to make a
fresh one. The figure is stored events audited per second (reading the three
SQLite stores, verifying the seals, rebuilding and checking everything).
"""

from __future__ import annotations

import json
import resource
import shutil
import sqlite3
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID, uuid5

from services.shared.platform.settings import Settings
from services.shared.platform.store import ServiceApplication, seal_store
from services.tools.audit.auditor import AuditReport, audit
from services.tools.audit.stores import open_stores

CACHE = Path("var/bench")
FULL_EVENTS = 1_000_000
QUICK_EVENTS = 100_000
BASE_EVENTS = 100_000
COPY_NAMESPACE = UUID("5b2f3c1e-8d7a-4e6b-9c0d-1a2b3c4d5e6f")
FORMAT = 5  # bump when the generated history changes (5: late bets on the desk)
MEMORY_LIMIT_MIB = 1024
"""The audit's memory must stay under this whatever the history's length (issue 15)."""
SEAL_EVERY = 20_000
"""Rows between two seals of a generated store (a running service seals every few seconds)."""
TARGET_EVENTS_PER_SECOND = 50_000


@dataclass(frozen=True)
class Figures:
    events: int
    bets: int
    coups: int
    seconds: list[float]
    cpu_seconds: list[float]
    generated_in: float | None
    folder: Path
    report: AuditReport
    peak_rss_mib: float
    """The audit process's peak resident memory while auditing (MiB)."""

    @property
    def events_per_second(self) -> float:
        return self.events / statistics.median(self.seconds)

    @property
    def events_per_cpu_second(self) -> float:
        """Events per second of CPU time: what a machine to itself gives."""
        return self.events / statistics.median(self.cpu_seconds)

    @property
    def bets_per_second(self) -> float:
        return self.bets / statistics.median(self.seconds)


def history_folder(events: int, progress: Callable[[str], None]) -> tuple[Path, float | None]:
    """The cached history of at least ``events`` stored events (made if missing)."""
    folder = CACHE / f"audit-{events}"
    marker = folder / "history.json"
    if marker.is_file() and json.loads(marker.read_text()).get("format") == FORMAT:
        return folder, None
    started = time.perf_counter()
    generate(folder, events, progress)
    return folder, time.perf_counter() - started


def generate(folder: Path, events: int, progress: Callable[[str], None]) -> None:
    """Make a history of at least ``events`` stored events under ``folder``.

    A base history of up to :data:`BASE_EVENTS` events is PLAYED: tables run
    through the real Applications in memory (200 bets per coup, placed two per
    transaction so each settlement event answers two bets; voids, refused and late
    bets). Bigger histories repeat the base under new table ids (every string that
    starts with the table id renamed, fresh aggregate ids), as if more tables had
    played the same cards at the same time (their rows interleave in each store, as concurrent
    tables' do). The stores are written as the services' SQLite files
    and then sealed, as the running services would have sealed them.
    """
    from services.dev.simulation import LocalSystem, play

    work = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    base = min(events, BASE_EVENTS)
    with LocalSystem.in_memory() as system:
        tables: list[str] = []

        def stored() -> int:
            return sum(app.recorder.max_notification_id() or 0 for app in system.apps.values())

        while stored() < base:
            table_id = f"t{len(tables) + 1:04d}"
            tables.append(table_id)

            def report(number: int, table_id: str = table_id) -> None:
                if number % 25 == 0:
                    progress(f"playing {table_id}: {stored():,} of {base:,} events")

            play(
                system,
                table_id,
                max(10, min(2000, base // 100)),
                bets_per_coup=200,
                batch=2,
                void_every=97,
                invalid_every=13,
                late_every=17,
                seed=len(tables),
                on_coup=report,
            )
        system.pump()
        copies = -(-events // stored())
        for name, app in system.apps.items():
            progress(f"writing and sealing the {name} store ({copies} copies of the base)")
            _dump(app.recorder, work / f"{name}.sqlite", tables, copies, name)
    (work / "history.json").write_text(json.dumps({"format": FORMAT, "events": events}))
    shutil.rmtree(folder, ignore_errors=True)
    work.rename(folder)


def _dump(recorder: object, path: Path, tables: list[str], copies: int, service: str) -> None:
    """Write an in-memory notification log ``copies`` times as eventsourcing's SQLite store,
    sealed every :data:`SEAL_EVERY` rows as the running service seals it (its seals
    interleave with its rows)."""
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=OFF")
    connection.execute("PRAGMA synchronous=OFF")
    connection.execute(
        "CREATE TABLE stored_events (originator_id TEXT, originator_version INTEGER, "
        "topic TEXT, state BLOB, PRIMARY KEY (originator_id, originator_version))"
    )
    rows = []
    start = 1
    while True:
        batch = recorder.select_notifications(start, 20_000)  # type: ignore[attr-defined]
        if not batch:
            break
        rows += [(n.originator_id, n.originator_version, n.topic, n.state) for n in batch]
        start = batch[-1].id + 1
    # The copies are tables that played at the same time: their rows interleave in the log,
    # row by row, as concurrent tables' rows do in a service's store.
    renames = [
        [(f'"{t}'.encode(), f'"c{copy:03d}-{t}'.encode()) for t in tables] for copy in range(copies)
    ]
    connection.commit()
    out = []
    for oid, version, topic, state in rows:
        for copy in range(copies):
            stored_oid, stored = oid, state
            if copy:
                stored_oid = uuid5(COPY_NAMESPACE, f"{copy}:{oid}")
                for old, new in renames[copy]:
                    stored = stored.replace(old, new)
            out.append((stored_oid.hex, version, topic, stored))
        if len(out) >= SEAL_EVERY:
            _insert(connection, out, path, service)
            out = []
    _insert(connection, out, path, service)
    connection.close()


def _insert(
    connection: sqlite3.Connection,
    rows: list[tuple[str, int, str, bytes]],
    path: Path,
    service: str,
) -> None:
    """Append rows (the next notification ids) and seal them."""
    connection.executemany(
        "INSERT INTO stored_events (originator_id, originator_version, topic, state) "
        "VALUES (?, ?, ?, ?)",
        rows,
    )
    connection.commit()
    env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)}
    app = ServiceApplication(env=env)
    try:
        seal_store(app, service)
    finally:
        app.close()


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the audit's second process)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run(quick: bool, progress: Callable[[str], None]) -> Figures:
    """Generate (or reuse) the history and time full audits of it."""
    target = QUICK_EVENTS if quick else FULL_EVENTS
    folder, generated_in = history_folder(target, progress)
    settings = Settings.from_env("shoe", persistence="sqlite", data_dir=folder)
    seconds: list[float] = []
    cpu_seconds: list[float] = []
    report: AuditReport | None = None
    peak = 0.0
    for attempt in range(1 if quick else 3):
        progress(f"auditing (run {attempt + 1})")
        stores = open_stores(settings)
        try:
            with PeakMemory() as memory:
                cpu = _cpu_seconds()
                started = time.perf_counter()
                report = audit(stores)
                seconds.append(time.perf_counter() - started)
                cpu_seconds.append(_cpu_seconds() - cpu)
            peak = max(peak, memory.peak_mib)
        finally:
            for store in stores.values():
                store.close()
    assert report is not None
    return Figures(
        events=report.total_events,
        bets=report.checked.get("bets", 0),
        coups=report.checked.get("coups", 0),
        seconds=seconds,
        cpu_seconds=cpu_seconds,
        generated_in=generated_in,
        folder=folder,
        report=report,
        peak_rss_mib=peak,
    )


class PeakMemory:
    """The peak resident memory (VmRSS, Linux) of this process while in the ``with``,
    sampled every 20 ms by a thread (0 where /proc is not there)."""

    def __init__(self) -> None:
        self.peak_mib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._read()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self._read()
            self._stop.wait(0.02)

    def _read(self) -> None:
        try:
            with open("/proc/self/status", encoding="ascii") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        self.peak_mib = max(self.peak_mib, int(line.split()[1]) / 1024)
                        return
        except OSError:
            return
