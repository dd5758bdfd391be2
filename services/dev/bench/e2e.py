"""The ``e2e`` benchmark group: the running system beside its ceilings, per store.

For each store (SQLite, and PostgreSQL when ``POSTGRES_*`` settings are in the environment)
one :class:`~services.dev.bench.cluster.Cluster` of the three services is started, the matrix of
cells (T tables x B bets per coup, C coups per table) is played by the
:class:`~services.dev.bench.driver.Driver`, peak resident memory is sampled during the largest
cell, and the ceilings (raw Kafka, raw store appends) are measured in the same run.

Settings (environment): ``KAFKA_BOOTSTRAP_SERVERS`` and ``POSTGRES_*`` as printed by
``punto-banco infra up``; for targeted runs ``PB_BENCH_STORES=sqlite|postgres`` and
``PB_BENCH_CELLS=TxBxC,...`` (e.g. ``1x10000x3``) replace the matrix (the section then names
them), ``PB_BENCH_INSTANCES=1,2`` runs the cells once per count of processes per service, the
services partitioned on topics of ``PB_BENCH_PARTITIONS`` partitions
(:mod:`services.dev.bench.instances`), and ``PB_BENCH_PYSPY=<folder>`` profiles the services
during the largest cell (:mod:`services.dev.bench.profiling`). Work folders live under
``<PB_DATA_DIR>/bench`` and are removed after a run (a failed store keeps its service logs
there).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from contracts import BetSettled, encode
from services.dev.bench.ceilings import (
    Ceiling,
    kafka_ceiling,
    postgres_store_env,
    sqlite_store_env,
    store_ceiling,
)
from services.dev.bench.cluster import (
    Cluster,
    MemorySampler,
    drop_schemas,
    postgres_conninfo,
    run_id,
)
from services.dev.bench.cpu import CpuCell, CpuMeter, budget_text, capacity_text, cpu_table
from services.dev.bench.driver import CellResult, Driver
from services.dev.bench.instances import (
    balanced_tables,
    parse_instances,
    parse_partitions,
    process_memory_table,
    spread_lines,
)
from services.dev.bench.profiling import GLUE, STEPS, PySpy, profiler_folder, step_shares
from services.dev.bench.report import (
    CellRow,
    Figure,
    cells_table,
    latency_summary,
    load_averages,
    machine_lines,
    memory_table,
)
from services.dev.bench.stats import fraction_of, percentile, rate
from services.dev.infra.kafka_clients import ADMIN, KafkaLogins

Cell = tuple[int, int, int]  # tables, bets per coup, coups per table

TARGET_BETS_PER_SECOND = 5000.0
TARGET_KAFKA_FRACTION = 0.25
MESSAGES_PER_BET = 3
"""Kafka messages one settled bet is made of: its PlaceBet in, its BetAccepted and its
BetSettled out. The raw ceiling in bets per second is the message ceiling over this."""
TARGET_SETTLE_SECONDS = 1.0
IN_PROCESS_BETS = 10_000
IN_PROCESS_ROUNDS = 3
"""The in-process floor is the best of this many rounds, each on a fresh store."""


def coups_for(tables: int, bets: int) -> int:
    """Coups per table in the full run: several, fewer as a coup round grows."""
    load = tables * bets
    return 5 if load <= 1_000 else 3 if load <= 30_000 else 1


FULL_CELLS: tuple[Cell, ...] = tuple(
    (t, b, coups_for(t, b)) for t in (1, 10, 100) for b in (10, 1_000, 10_000)
)
QUICK_CELLS: dict[str, tuple[Cell, ...]] = {
    "sqlite": ((1, 10, 3), (10, 1_000, 2), (1, 10_000, 2)),
    "postgres": ((10, 1_000, 1), (1, 10_000, 2)),
}


@dataclass
class StoreRun:
    store: str
    instances: int | None = None  # processes per service, partitioned; None: not partitioned
    cells: list[CellResult] = field(default_factory=list)
    memory: dict[str, int] = field(default_factory=dict)
    memory_load: str = ""
    cpu: list[CpuCell] = field(default_factory=list)  # CPU seconds per part, per cell
    profiles: dict[str, Path] = field(default_factory=dict)  # py-spy's, per service
    profiled: CpuCell | None = None  # the cell the profiles sampled
    single: Ceiling | None = None
    batched: Ceiling | None = None

    @property
    def label(self) -> str:
        """The store, and in a partitioned run the processes per service."""
        if self.instances is None:
            return self.store
        return f"{self.store}, {self.instances} proc{'s' if self.instances > 1 else ''}"


@dataclass
class E2EReport:
    """Everything one run measured, for figures and the Markdown details."""

    quick: bool
    load_at_start: str
    started: str
    kafka: Ceiling | None = None
    kafka_each: Ceiling | None = None
    kafka_version: str = ""
    kafka_login: str = ""  # how the clients logged in: PLAINTEXT or SASL/SCRAM
    postgres_version: str | None = None
    stores: list[StoreRun] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    overrides: str = ""
    in_process: dict[str, float] = field(default_factory=dict)
    partitions: int | None = None  # per topic, in partitioned runs (PB_BENCH_INSTANCES)


def parse_cells(text: str) -> tuple[Cell, ...]:
    """``"1x10000x2,10x1000x2"`` -> ((1, 10000, 2), (10, 1000, 2)) (tables x bets x coups)."""
    cells = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        numbers = part.lower().split("x")
        if len(numbers) != 3 or not all(n.isdigit() and int(n) > 0 for n in numbers):
            raise ValueError(f"a cell is TABLESxBETSxCOUPS, e.g. 1x10000x2, not {part!r}")
        cells.append((int(numbers[0]), int(numbers[1]), int(numbers[2])))
    return tuple(cells)


def postgres_settings(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``POSTGRES_*`` settings from the environment (empty: no PostgreSQL)."""
    env = os.environ if env is None else env
    if not (env.get("POSTGRES_HOST") or env.get("POSTGRES_DBNAME")):
        return {}
    return {key: value for key, value in env.items() if key.startswith("POSTGRES_")}


def postgres_version(postgres: Mapping[str, str]) -> str | None:
    import psycopg

    try:
        with psycopg.connect(postgres_conninfo(postgres), connect_timeout=10) as connection:
            row = connection.execute("SHOW server_version").fetchone()
    except psycopg.Error:
        return None
    return str(row[0]) if row else None


def sample_bet_settled() -> bytes:
    """A realistic encoded BetSettled (used when the run captured none)."""
    return encode(
        BetSettled(
            table_id="bench-0000.sqlite.T100xB10000.t99",
            bet_id="bench-0000.sqlite.T100xB10000.t99.c1.b9999",
            coup_id="bench-0000.sqlite.T100xB10000.t99.c1",
            bettor_id="p9999",
            bet_type="banker",
            result="WIN",
            stake=999,
            payout=949,
            returned=1948,
            currency="EUR",
        )
    )


def tables_text(tables: int) -> str:
    return f"{tables} table" if tables == 1 else f"{tables} tables"


def _timeout(tables: int, bets: int) -> float:
    return max(120.0, tables * bets / 200.0)


async def _run_store(
    run: StoreRun,
    cluster: Cluster,
    cells: Sequence[Cell],
    progress: Callable[[str], None],
) -> bytes | None:
    await cluster.start()
    driver = Driver(cluster.bootstrap, cluster.topic_prefix, cluster.logins)
    driver.check = cluster.check_alive
    await driver.start()
    largest = max(cells, key=lambda cell: cell[0] * cell[1])
    postgres_port = cluster.postgres.get("POSTGRES_PORT")
    meter = CpuMeter.for_system(
        cluster.service_pids(),
        kafka_port=int(cluster.bootstrap.split(",")[0].rsplit(":", 1)[1]),
        postgres_port=int(postgres_port) if postgres_port else None,
    )
    try:
        for tables, bets, coups in cells:
            progress(f"{run.label}: {tables} tables x {bets:,} bets x {coups} coups")
            sampler = None
            spy = None
            if (tables, bets, coups) == largest:
                sampler = MemorySampler(cluster.pids())
                sampler.start()
                folder = profiler_folder()
                if folder is not None:
                    name = run.label.replace(", ", "-").replace(" ", "")
                    spy = PySpy(folder, name, cluster.pids())
            tag = f"{cluster.tag}.{run.store}.T{tables}xB{bets}"
            meter.start()
            try:
                ids = None
                if cluster.instances is not None:  # every partition its share of the tables
                    ids = balanced_tables(tag, tables, cluster.partitions)
                result = await driver.run_cell(
                    tag, tables, bets, coups, _timeout(tables, bets), table_ids=ids
                )
                cpu = meter.stop()
                run.cpu.append(
                    CpuCell(run.label, tables, bets, result.settled, result.seconds, cpu)
                )
                if spy is not None:
                    run.profiled = run.cpu[-1]
            finally:
                if spy is not None:
                    spy.stop()
                    run.profiles = spy.outputs
                if sampler is not None:
                    run.memory = await sampler.stop()
                    run.memory_load = f"{tables_text(tables)} x {bets:,} bets per coup"
            run.cells.append(result)
            cluster.check_alive()
        return driver.sample_bet_settled
    finally:
        await driver.stop()


def _row(store: str, cell: CellResult) -> CellRow:
    closed = [v for r in cell.coup_runs if (v := r.close_to_settled()) is not None]
    resolved = [v for r in cell.coup_runs if (v := r.resolved_to_settled()) is not None]
    received = [v for r in cell.coup_runs if (v := r.resolved_to_received()) is not None]
    closed_p50, closed_p99 = latency_summary(closed)
    resolved_p50, resolved_p99 = latency_summary(resolved)
    return CellRow(
        store=store,
        tables=cell.tables,
        bets=cell.bets,
        coups=cell.coups,
        settled=cell.settled,
        seconds=cell.seconds,
        bets_per_second=rate(cell.settled, cell.seconds),
        closed_p50=closed_p50,
        closed_p99=closed_p99,
        resolved_p50=resolved_p50,
        resolved_p99=resolved_p99,
        received_p99=percentile(received, 0.99) if received else None,
    )


def measure(quick: bool, progress: Callable[[str], None], workdir: Path) -> E2EReport:
    """Run the whole group: every store's matrix, the ceilings, the memory."""
    from services.dev.infra.programs import KAFKA_VERSION

    report = E2EReport(
        quick=quick,
        load_at_start=load_averages(),
        started=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        kafka_version=KAFKA_VERSION,
    )
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or "127.0.0.1:9092"
    logins = KafkaLogins.for_bootstrap(bootstrap)  # each client its own principal
    report.kafka_login = "SASL/SCRAM-SHA-512" if logins.authenticated else "PLAINTEXT"
    postgres = postgres_settings()
    stores: list[tuple[str, dict[str, str]]] = [("sqlite", {})]
    if postgres:
        report.postgres_version = postgres_version(postgres)
        stores.append(("postgres", postgres))
    else:
        report.skipped.append("PostgreSQL (no POSTGRES_* settings in the environment)")
    sample: bytes | None = None
    report.overrides = " ".join(
        f"{name}={os.environ[name]}"
        for name in (
            "PB_BENCH_STORES",
            "PB_BENCH_CELLS",
            "PB_BENCH_INSTANCES",
            "PB_BENCH_PARTITIONS",
        )
        if os.environ.get(name)
    )
    only_stores = os.environ.get("PB_BENCH_STORES", "").split(",")
    stores = [(name, pg) for name, pg in stores if name in only_stores or only_stores == [""]]
    chosen = parse_cells(os.environ.get("PB_BENCH_CELLS", ""))
    instances = parse_instances(os.environ.get("PB_BENCH_INSTANCES", ""))
    if instances:
        report.partitions = parse_partitions(os.environ.get("PB_BENCH_PARTITIONS", ""))
    # The bets go as `gateway`: capacity is measured, not its quota (docs/scaling.md).
    with logins.unthrottled(bootstrap):
        for store, pg in stores:
            cells = chosen or (QUICK_CELLS[store] if quick else FULL_CELLS)
            counts: tuple[int | None, ...] = instances or (None,)
            for index, processes in enumerate(counts):
                run = StoreRun(store, instances=processes)
                report.stores.append(run)
                tag = run_id()
                data_dir = workdir / f"e2e-{tag}-{store}"
                cluster = Cluster(
                    bootstrap,
                    data_dir,
                    pg,
                    tag,
                    logins=logins,
                    instances=processes,
                    partitions=3 if processes is None else report.partitions or 3,
                )
                failed, captured = _play(report, run, cluster, cells, progress)
                sample = sample or captured
                if index < len(counts) - 1:  # the last run's folder holds the store ceiling's
                    _clean(data_dir, failed)
            progress(f"{store}: raw store appends")
            saves = 300 if quick else 2_000
            if pg:
                schema = f"bench_{tag}_ceiling"
                try:
                    run.single, run.batched = store_ceiling(postgres_store_env(pg, schema), saves)
                finally:
                    drop_schemas(pg, schema)
            else:
                run.single, run.batched = store_ceiling(
                    sqlite_store_env(data_dir / "ceiling.sqlite"), saves
                )
            _clean(data_dir, failed)
    progress("settlement in-process: 10,000 bets on one coup")
    from services.dev.bench.settle_in_process import best
    from services.dev.bench.settle_in_process import run as settle_in_process

    in_process_dir = workdir / f"settle-{run_id()}"
    in_process_dir.mkdir(parents=True, exist_ok=True)
    try:
        report.in_process = best(
            [
                settle_in_process(IN_PROCESS_BETS, sqlite_store_env(in_process_dir / f"{n}.sqlite"))
                for n in range(IN_PROCESS_ROUNDS)
            ]
        )
    finally:
        shutil.rmtree(in_process_dir, ignore_errors=True)
    progress("raw Kafka produce-and-consume")
    count = 50_000 if quick else 300_000
    payload = sample or sample_bet_settled()
    prefix = f"bench-{run_id()}."
    admin = logins.auth(ADMIN)
    report.kafka_each = asyncio.run(kafka_ceiling(bootstrap, prefix, payload, count, auth=admin))
    report.kafka = asyncio.run(
        kafka_ceiling(bootstrap, prefix, payload, count, batched=True, auth=admin)
    )
    return report


def _play(
    report: E2EReport,
    run: StoreRun,
    cluster: Cluster,
    cells: Sequence[Cell],
    progress: Callable[[str], None],
) -> tuple[bool, bytes | None]:
    """Play the cells on one cluster: (it failed, its logs are kept; a BetSettled it saw)."""
    try:
        captured = asyncio.run(_run_store(run, cluster, cells, progress))
    except Exception as error:  # a dead service or a timeout: report it, go on
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        if first == type(error).__name__:
            first = ""  # aiokafka's KafkaTimeoutError says only its own name
        report.skipped.append(
            f"{run.label}: stopped after {len(run.cells)} of {len(cells)} cells: "
            f"{type(error).__name__} {first} (logs kept in {cluster.data_dir / 'logs'})"
        )
        sys.stderr.write(f"e2e: {report.skipped[-1]}\n")
        return True, None
    finally:
        cluster.stop()
    return False, captured


def _clean(data_dir: Path, keep_logs: bool) -> None:
    """Remove a run's work folder (a failed run's stores only: its logs stay)."""
    if keep_logs:
        for stale in data_dir.glob("*.sqlite*"):
            stale.unlink(missing_ok=True)
    else:
        shutil.rmtree(data_dir, ignore_errors=True)


def _largest(run: StoreRun) -> CellResult | None:
    return max(run.cells, key=lambda c: (c.tables * c.bets, c.tables, c.settled), default=None)


def _one_table_big_coup(run: StoreRun) -> CellResult | None:
    for cell in run.cells:
        if cell.tables == 1 and cell.bets == 10_000:
            return cell
    return None


def sustained_target(report: E2EReport) -> int:
    """The sustained bar in bets/s: 25 % of the run's Kafka ceiling counted in bets, at least
    5,000."""
    kafka = report.kafka.per_second if report.kafka else 0.0
    return round(max(TARGET_BETS_PER_SECOND, TARGET_KAFKA_FRACTION * kafka / MESSAGES_PER_BET))


def figures(report: E2EReport) -> list[Figure]:
    """The group's figures (targets from issue 7)."""
    out: list[Figure] = []
    kafka = report.kafka.per_second if report.kafka else 0.0
    kafka_bets = kafka / MESSAGES_PER_BET  # the same messages, counted as bets
    bets_target = sustained_target(report)
    in_process_shown = False  # once, beside the first SQLite run
    for ceiling in (report.kafka_each, report.kafka):
        if ceiling is not None:
            out.append(
                Figure(
                    f"Ceiling: raw Kafka produce+consume ({ceiling.what.split(', ')[-1]})",
                    ceiling.per_second,
                    "msgs/s",
                    runs=1,
                    note=f"{ceiling.count:,} x {ceiling.what} (a real encoded BetSettled), "
                    "idempotent producer acks=all, 3 partitions, one consumer",
                )
            )
    for run in report.stores:
        big = _one_table_big_coup(run)
        if big is not None:
            resolved = [v for r in big.coup_runs if (v := r.resolved_to_settled()) is not None]
            if resolved:
                out.append(
                    Figure(
                        f"{run.label}: 10,000 bets on one coup: CoupResolved -> last "
                        "BetSettled published, p99",
                        percentile(resolved, 0.99) * 1000,
                        "ms",
                        TARGET_SETTLE_SECONDS * 1000,
                        runs=len(resolved),
                        note="1 table; p99 over its coups (few samples: near the slowest)",
                    )
                )
        largest = _largest(run)
        if largest is not None:
            per_second = rate(largest.settled, largest.seconds)
            out.append(
                Figure(
                    f"{run.label}: Sustained bets settled per second "
                    f"({tables_text(largest.tables)} x {largest.bets:,} bets)",
                    per_second,
                    "bets/s",
                    bets_target,
                    higher_is_better=True,
                    runs=len(largest.coup_runs),
                    note=f"{largest.settled:,} bets from first PlaceBet sent to last BetSettled "
                    f"published; target = max(5,000, 25 % of the Kafka ceiling counted in bets: "
                    f"{kafka:,.0f} msgs/s / {MESSAGES_PER_BET} messages per bet = "
                    f"{kafka_bets:,.0f} bets/s); {fraction_of(per_second, kafka_bets):.0%} "
                    "of that ceiling",
                )
            )
        if run.single is not None and run.batched is not None:
            out.append(
                Figure(
                    f"{run.label}: Ceiling: store appends, one event per save",
                    run.single.per_second,
                    "saves/s",
                    runs=1,
                    note=f"{run.single.count:,} Application.save calls (a transaction each)",
                )
            )
            note = ""
            if largest is not None:
                share = fraction_of(rate(largest.settled, largest.seconds), run.batched.per_second)
                note = f"; the pipeline's bets/s is {share:.0%} of it"
            out.append(
                Figure(
                    f"{run.label}: Ceiling: store appends, {run.batched.what}",
                    run.batched.per_second,
                    "events/s",
                    runs=1,
                    note=f"{run.batched.count:,} small events{note}",
                )
            )
        if run.store == "sqlite" and report.in_process and not in_process_shown:
            in_process_shown = True
            for key, label in (
                ("settle", "CoupResolved applied, all bets settled and recorded"),
                ("translate", "settled event -> 10,001 encoded messages (relay's mapping)"),
            ):
                out.append(
                    Figure(
                        f"sqlite: in-process, {IN_PROCESS_BETS:,} bets: {label}",
                        report.in_process[key] * 1000,
                        "ms",
                        runs=IN_PROCESS_ROUNDS,
                        note="services/dev/bench/settle_in_process.py (no Kafka), the best of "
                        "fresh stores: the parts of the latency above that are not publishing",
                    )
                )
        for service, peak in sorted(run.memory.items()):
            out.append(
                Figure(
                    f"{run.label}: Peak RSS, {service}",
                    peak / 2**20,
                    "MiB",
                    runs=1,
                    note=f"psutil, sampled every 0.2 s during {run.memory_load}",
                )
            )
    return out


METHOD = """\
How it is measured (services/dev/bench): the three services run as
`punto-banco serve shoe|dealing|settlement` subprocesses with their own topic prefix, data
folder (SQLite) or schemas (PostgreSQL), on the broker and database of
`punto-banco infra up`. A driver opens T tables (betting closed by the
driver, never by the clock), and for each coup produces B `PlaceBet` in bulk (aiokafka batches
to the table's partition), waits until settlement has answered every bet, then sends
`CloseBetting`; dealing deals and resolves the coup, settlement settles all its bets in one
transaction and the relay publishes one `BetSettled` per bet. A table's next coup opens with
`CoupResolved`. With one table the driver waits until a coup is settled before betting on the
next (the latency of a lone coup, as the 1 s target asks); with 10 or 100 tables every table
goes on at once, so settling overlaps with bets on other coups (sustained load).

- *Bets/s* = bets settled / (last `BetSettled` published - first `PlaceBet` sent), over every
  coup of the cell: placing, accepting, dealing, settling and publishing all included.
- *Latencies* start at the `occurred_at` of dealing's `BettingClosed` / `CoupResolved` (when
  dealing recorded them) and end at the Kafka record timestamp of the coup's last `BetSettled`
  (CreateTime, set by the relay's producer when it appended the record, or the broker's
  LogAppendTime if the topic is configured so): "published". `BetSettled`'s
  own `occurred_at` is the time the settlement was *recorded* (one stored event per coup), not
  published, so it is not used. "Last received" is the driver's own clock when it read that
  record (consumer lag included). All clocks are this machine's.
- *Ceilings*: raw aiokafka produce-and-consume of copies of a real encoded `BetSettled` through
  the same broker (idempotent producer, acks=all, no decoding), and raw eventsourcing
  `Application.save` of small events to the same store (one event per save, and 1,000 per save).
"""


def details(report: E2EReport, command: str) -> str:
    """The Markdown below the group's figures: method, machine, matrix, memory."""
    rows = [_row(run.label, cell) for run in report.stores for cell in run.cells]
    parts = [
        "",
        f"Run started {report.started} ({'quick subset' if report.quick else 'full matrix'}): "
        f"`{(report.overrides + ' ') if report.overrides else ''}{command}`.",
        "",
        *machine_lines(report.kafka_version, report.postgres_version, report.load_at_start),
    ]
    if report.kafka_login:
        parts.append(f"- Kafka clients: {report.kafka_login} (each service its own principal).")
    for skipped in report.skipped:
        parts.append(f"- Not measured: {skipped}.")
    parts += ["", "### Matrix", "", cells_table(rows), ""]
    memory = {run.label: run.memory for run in report.stores if run.memory}
    if memory:
        loads = " / ".join(sorted({run.memory_load for run in report.stores if run.memory}))
        table = memory_table if report.partitions is None else process_memory_table
        parts += [table(memory, loads), ""]
    if report.partitions is not None:
        parts += [partitioned_text(report), ""]
    parts += [cpu_section(report), steps_section(report), where_the_time_goes(report)]
    parts += ["", METHOD, FINDINGS]
    return "\n".join(parts)


def partitioned_text(report: E2EReport) -> str:
    """How a partitioned run spread its tables over the partitions and the processes."""
    partitions = report.partitions or 0
    cells = {
        (run.instances, tuple(sorted({c.table_id for c in cell.coup_runs})))
        for run in report.stores
        if run.instances is not None
        for cell in run.cells
    }
    return "\n".join(
        [
            "### Partitioned services",
            "",
            f"Each service ran partitioned (`PB_PARTITIONED=yes`) as the number of processes the "
            f"run names, on topics of {partitions} partitions (every run the same), one cell per "
            "partition a process owns (its own store, writer lease, consumer, relay). A table's "
            "records go to the partition murmur2 of its id gives (Kafka's default "
            "partitioner); a few tables spread that way land unevenly, so the driver picked "
            "table ids that give every partition its share "
            "(`services.dev.bench.instances.balanced_tables`). Rows named by the store alone "
            "ran as the default run does (one process each, not partitioned, 3 partitions).",
            "",
            *spread_lines(sorted(cells), partitions),
        ]
    )


def cpu_section(report: E2EReport) -> str:
    """CPU microseconds per settled bet per part, the capacity model of the largest cell, and
    what the sustained bar leaves settlement on this machine (:func:`budget_text`)."""
    cells = [cell for run in report.stores for cell in run.cpu]
    if not cells:
        return ""
    largest = max(cells, key=lambda cell: (cell.settled, cell.store == "postgres"))
    target = sustained_target(report) if report.kafka else 0  # no ceiling measured: no bar
    cores = os.cpu_count() or 1
    budgets = [  # each store's sustained cell (the cell of its bets/s figure)
        budget_text(max(run.cpu, key=lambda c: (c.tables * c.bets, c.tables)), target, cores) + "\n"
        for run in report.stores
        if run.cpu and target
    ]
    return "\n".join(
        [
            "### CPU per bet and the capacity model",
            "",
            "CPU time (user + system, psutil) each part spent during a cell, over the bets "
            "settled in it, in microseconds per bet: the services, the Kafka broker, the "
            "PostgreSQL server with its backends (PostgreSQL rows only), and the driver (which "
            "stands in for the gateways and is not counted in the system). Other work on the "
            "machine that uses the same broker or database is counted in theirs.",
            "",
            cpu_table(cells),
            "",
            capacity_text(largest),
            "",
            *budgets,
        ]
    )


def steps_section(report: E2EReport) -> str:
    """Where a bet's CPU goes: each service's CPU per bet split by the steps of its profile."""
    runs = [run for run in report.stores if run.profiled is not None and run.profiles]
    if not runs:
        return ""
    lines = [
        "### Where a bet's CPU goes, per service and step",
        "",
        "The profiled cell's CPU per bet of each service (psutil), split in the shares of its "
        "py-spy samples per step (`services.dev.bench.profiling.STEPS` says which frames make "
        "a step; a stack counts for its most specific step). In microseconds per settled bet.",
    ]
    for run in runs:
        cell = run.profiled
        assert cell is not None
        services = [name for name in ("shoe", "dealing", "settlement") if name in run.profiles]
        shares = {name: step_shares(run.profiles[name].read_text()) for name in services}
        steps = [step for step, _ in STEPS if any(step in shares[name] for name in services)]
        steps += [GLUE] if any(GLUE in shares[name] for name in services) else []
        lines += [
            "",
            f"{run.label}, {tables_text(cell.tables)} x {cell.bets:,} bets:",
            "",
            "| Step | " + " | ".join(services) + " | all |",
            "|---|" + "---:|" * (len(services) + 1),
        ]
        for step in [*steps, "total"]:
            micros = [
                cell.micros_per_bet(name) * (1.0 if step == "total" else shares[name].get(step, 0))
                for name in services
            ]
            lines.append(
                f"| {step} | "
                + " | ".join(f"{m:,.0f}" for m in micros)
                + f" | {sum(micros):,.0f} |"
            )
    return "\n".join(lines) + "\n"


def where_the_time_goes(report: E2EReport) -> str:
    """A lone 10,000-bet coup's latency split into what was measured apart in this run."""
    sqlite = next((run for run in report.stores if run.store == "sqlite"), None)
    big = _one_table_big_coup(sqlite) if sqlite is not None else None
    latencies = (
        []
        if big is None
        else [v for r in big.coup_runs if (v := r.resolved_to_settled()) is not None]
    )
    settle = report.in_process.get("settle")
    translate = report.in_process.get("translate")
    if not latencies or settle is None or translate is None:
        return "### Where the time goes\n\n(not measured in this run)\n"
    total = percentile(latencies, 0.5)
    lines = [
        "### Where the time goes",
        "",
        f"A lone coup of 10,000 bets on SQLite: CoupResolved -> last BetSettled published "
        f"{total * 1000:,.0f} ms (p50). Measured apart in the same run: settling and recording "
        f"the coup {settle * 1000:,.0f} ms, mapping the stored event to 10,001 encoded messages "
        f"{translate * 1000:,.0f} ms; the remaining "
        f"{max(0.0, total - settle - translate) * 1000:,.0f} ms is delivery of CoupResolved, "
        "the relay's wake-up and publishing.",
    ]
    each, batched = report.kafka_each, report.kafka
    if each is not None and batched is not None:
        publish = 10_001 / batched.per_second
        lines[-1] += (
            f" Publishing 10,001 messages costs about {10_001 / each.per_second * 1000:,.0f} ms "
            f"at the raw per-message `send()` rate measured above and "
            f"{publish * 1000:,.0f} ms with `send_batch`."
        )
        floor = settle + translate + publish
        p99 = percentile(latencies, 0.99)
        lines[-1] += (
            f" The floor (settling, mapping and that publish) is {floor * 1000:,.0f} ms; the "
            f"p99, {p99 * 1000:,.0f} ms, is {p99 / floor:.2f}x the floor (issue 25's bar: 1.25)."
        )
    return "\n".join(lines) + "\n"


FINDINGS = """
### What the profiles showed, and what was changed

Profile: `PB_BENCH_PYSPY=/tmp/pbspy PB_BENCH_PYSPY_GIL=1 PB_BENCH_STORES=sqlite
PB_BENCH_CELLS=10x1000x3 punto-banco bench --only e2e --quick` (py-spy 0.4, 100 Hz, only the
thread holding the GIL: Python's own work; collapsed stacks per service,
`services.dev.bench.profiling.top_functions` sums them). Before the changes below (commit ac7125a,
2026-11-30 05:34, same machine): 10 tables x 1,000 bets 1,994 / 1,883 bets/s (SQLite /
PostgreSQL), a lone 10,000-bet coup 972 / 1,021 ms (p99, CoupResolved -> last BetSettled).
In the order they paid off:

1. Dealing read settlement's whole bet-events topic to find one `BetsClosed` per coup: decoding
   that flood was 47 % of dealing's samples and about a third of a core. `BetsClosed` now has its
   own topic (`punto-banco.book-events`); every relayed message also carries a `pb-type` header,
   so a subscription limited to some types (`Subscription.types`) skips the others unparsed.
2. With 10 tables, 43 % of the bets reached settlement before their coup's `BettingOpened`
   and were held at the table's desk, one `BetHeld` event each (plus a desk snapshot every 500,
   rebuilt from the store: 12 % of settlement). Held bets are now one `BetsHeld` event per unit
   of work, and the consumer applies a fetch's partitions in subscription order (dealing's
   events before the bets fetched with them).
3. `contracts.decode` parsed every message twice (`json.loads`, then pydantic): now one strict
   pass, and the step-by-step reading only for bytes that fail it (25 -> 10 us per PlaceBet).
4. The relay re-validated every `BetAccepted` it built and decoded the JSON of the events it
   had just saved: bulk messages are now built from the already validated values
   (`contracts.trusted`, proved byte-identical to validated messages by property tests), the
   save listener hands the just-saved events over, and a coup's 10,001 messages are encoded in
   chunks of 1,000 while the chunks before are being sent.
5. The benchmark driver parsed every bet event with `json`; it uses orjson (the driver shares
   the two cores with the system it measures).
6. With 100 tables dealing was the queue: it applied table commands and shoe events one
   message per transaction (its unit of work recorded events aggregate by aggregate, so a
   batch could have published a table's events out of the order they happened). The unit of
   work now has checkpoints (`UnitOfWork.checkpoint`: events raised before it are recorded
   before those raised after) and dealing applies a fetched batch in one transaction,
   checkpointing after each message: the same published order as one by one (a unit test
   compares both, voids included), one commit per batch. 100 tables x 10 bets, BettingClosed
   -> last BetSettled p50: 4.1 s -> 1.9 s (SQLite), 8.8 s -> 3.3 s (PostgreSQL).

What is left in settlement (same profile after the changes, share of its GIL samples): building
the bulk messages (`trusted` ~10 %, per-line ids ~8 %, `model_dump_json` ~5 %), dataclass
records per message and per delivery ~6 %, PlaceBet validation ~4 %, judging and recording
bets ~10 %, aiokafka's record parsing and batching ~5 %; no single item dominates. Each bet
costs one consumed command and two published events handled in one Python process, on two
cores shared with Kafka, PostgreSQL, the other services and the driver.

The Kafka alternative of the sustained target (25 % of the raw ceiling) is not reachable this
way: the ceiling moves bytes in C and Java (counted in bets, the raw ceiling is the message rate
over the 3 messages of a bet), while the pipeline decodes, judges, records and encodes each bet
in Python. The next steps, each a design change rather than a tuning: the outbox relay in a
process of its own (its mapping and sending are about a third of settlement's work), and more
than one settlement process, each owning a share of the tables' partitions.

The largest cell (100 tables x 10,000 bets in flight at once) also shows the memory cost:
settlement peaks at about 1.5 GiB with a million open bets.
"""


def run_group(quick: bool, progress: Callable[[str], None]) -> tuple[list[Figure], E2EReport]:
    """Measure in a work folder under ``var/bench`` (removed afterwards)."""
    workdir = Path(os.environ.get("PB_DATA_DIR") or "var") / "bench"
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    report = measure(quick, progress, workdir)
    progress(f"done in {time.monotonic() - started:.0f} s")
    return figures(report), report
