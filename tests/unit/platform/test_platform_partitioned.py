"""A partitioned service's cells: each partition's own store, offsets, anchors and metrics.

``Settings.for_partition`` is what keeps partition n's state apart from every other's (a
cell judged with another cell's store would mix two partitions' tables); the anchors of two
partitions' stores must never share an event id (the audit matches anchors to stores); the
process's /metrics merges its cells' registries without mixing their samples. A cell that
cannot stop must not leave the process healthy and stalled, and a SIGTERM must not cut a
cell's stop short (its last seal, its relay's backlog, its lease).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry, Counter

from services.shared.platform.cells import CellHost, partitioned
from services.shared.platform.cells.partitioned import merged_registry
from services.shared.platform.consumer.processor import RebalanceListener
from services.shared.platform.host import KafkaService
from services.shared.platform.host.faststream import subscriber_options
from services.shared.platform.relay import anchor_message
from services.shared.platform.settings import Settings, SettingsError
from services.shared.platform.store import LEDGER_ID, SealLedger

DIGEST = "ab" * 32


def test_a_cell_has_its_own_store_offsets_group_and_no_endpoints() -> None:
    env = {"PB_DATA_DIR": "/data", "PB_PARTITIONED": "yes", "PB_HTTP_PORT_SETTLEMENT": "8103"}
    settings = Settings.from_env("settlement", env)
    assert settings.partitioned and settings.partition is None
    assert settings.store_name == "settlement"
    cell = settings.for_partition(4)
    assert cell.partition == 4 and cell.partitioned
    assert cell.store_name == "settlement-p4"
    assert cell.sqlite_path == Path("/data/settlement-p4.sqlite")
    assert cell.postgres_schema == "settlement_p4"
    assert cell.consumer_group == "punto-banco-settlement.p4"  # below the group: ACLs allow
    assert settings.consumer_group == "punto-banco-settlement"
    assert cell.http_port is None and settings.http_port == 8103
    assert cell.describe_store().endswith("settlement-p4.sqlite")
    other = settings.for_partition(5)
    assert other.sqlite_path != cell.sqlite_path
    assert other.postgres_schema != cell.postgres_schema


def test_partitioned_is_off_unless_asked_and_a_partition_number_is_bounded() -> None:
    assert not Settings.from_env("settlement", {}).partitioned
    with pytest.raises(SettingsError, match="PB_PARTITIONED"):
        Settings.from_env("settlement", {"PB_PARTITIONED": "sometimes"})
    for bad in (-1, 1000):
        with pytest.raises(SettingsError, match="partition"):
            Settings("settlement", partition=bad)


def test_a_cell_is_assigned_its_partition_and_joins_no_group() -> None:
    cell = Settings("settlement").for_partition(2)
    options = subscriber_options(cell, RebalanceListener(), title="t", description="d")
    assert options["group_id"] == "punto-banco-settlement.p2"  # its offsets' group
    assert "listener" not in options and "partition_assignment_strategy" not in options
    whole = subscriber_options(
        Settings("settlement"), RebalanceListener(), title="t", description="d"
    )
    assert "listener" in whole and "partition_assignment_strategy" in whole


def sealed(version: int = 2) -> SealLedger.Sealed:
    return SealLedger.Sealed(
        originator_id=LEDGER_ID,
        originator_version=version,
        timestamp=datetime(2026, 12, 1, tzinfo=UTC),
        from_id=0,
        to_id=10,
        count=10,
        ids=[],
        fingerprints="",
        digest=DIGEST,
        previous_digest="0" * 64,
    )


def test_two_partitions_anchors_of_the_same_seal_number_are_different_records() -> None:
    whole = anchor_message("settlement", sealed())
    first = anchor_message("settlement", sealed(), 0)
    second = anchor_message("settlement", sealed(), 1)
    assert whole.partition is None and first.partition == 0 and second.partition == 1
    assert len({whole.event_id, first.event_id, second.event_id}) == 3
    assert first.service == second.service == "settlement"  # the Kafka key and signer
    # A service's one store keeps the event ids it always had (anchors already published).
    assert anchor_message("settlement", sealed(), None).event_id == whole.event_id


def test_the_processes_metrics_label_each_cells_samples_with_its_partition() -> None:
    registries = []
    for partition, handled in ((0, 3), (2, 5)):
        registry = CollectorRegistry()
        Counter("pb_handled", "Handled.", registry=registry).inc(handled)
        registries.append((partition, registry))
    text = merged_registry("settlement", registries).decode()
    assert 'pb_handled_total{cell="0"} 3.0' in text
    assert 'pb_handled_total{cell="2"} 5.0' in text
    assert text.count("# HELP pb_handled_total") == 1
    assert 'pb_cells{service="settlement"} 2.0' in text  # the process's own
    spare = merged_registry("settlement", []).decode()  # a process owning no partition
    assert 'pb_cells{service="settlement"} 0.0' in spare


class FakeWorker:
    def __init__(self) -> None:
        self.why: str | None = None

    def stuck(self) -> str | None:
        return self.why


class FakeCell:
    """What CellHost uses of a cell; its stop takes ``stop_for`` seconds (None: never ends)."""

    def __init__(self, stop_for: float | None = 0.0) -> None:
        self.stop_for = stop_for
        self.stopping = asyncio.Event()
        self.worker = FakeWorker()
        self.consumer = None
        self.stopped = False
        self.cancelled = False

    async def stop(self) -> None:
        self.stopping.set()
        try:
            if self.stop_for is None:
                await asyncio.Event().wait()
            await asyncio.sleep(self.stop_for or 0)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.stopped = True


class FakeTemplate:
    inputs = ("table-commands",)

    def asyncapi_json(self) -> str:
        return "{}"


def host(tmp_path: Path) -> CellHost:
    settings = Settings("dealing", data_dir=tmp_path, partitioned=True)
    return CellHost(lambda _settings: cast(KafkaService[Any], FakeTemplate()), settings)


async def test_a_cell_whose_stop_hangs_is_reported_stuck_and_then_ends_the_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(partitioned, "CELL_STOP_TIMEOUT", 0.2)
    cells = host(tmp_path)
    hanging = FakeCell(stop_for=None)
    hanging.worker.why = "a store call has run for 130 s"
    cells.cells[1] = cast(KafkaService[Any], hanging)
    cells._stop_cell(1, "moved away")
    assert 1 not in cells.cells and 1 in cells.leaving
    assert cells.alive() == "p1: a store call has run for 130 s"  # /health: 503
    await asyncio.wait_for(cells.stopping.wait(), 5)  # the process ends (its leases go)
    assert cells.failed and hanging.cancelled and not cells.leaving


async def test_stopping_the_process_waits_for_a_cell_stop_in_progress_never_cuts_it(
    tmp_path: Path,
) -> None:
    cells = host(tmp_path)
    moving, staying = FakeCell(stop_for=0.3), FakeCell()
    cells.cells.update({0: cast(KafkaService[Any], staying), 1: cast(KafkaService[Any], moving)})
    cells._stop_cell(1, "moved away")
    await cells.stop()  # SIGTERM while partition 1's cell stops
    assert moving.stopped and not moving.cancelled  # sealed, published, lease let go
    assert staying.stopped and not cells.cells and not cells.leaving


async def test_a_cell_that_cannot_even_be_built_ends_the_process_not_left_starting(
    tmp_path: Path,
) -> None:
    """A failure while a cell is set up (its settings, its service) is a failed start like any
    other: the process stops (the orchestrator restarts it), the partition is not left
    "starting" for ever with nobody serving it."""

    def build(settings: Settings) -> KafkaService[Any]:
        if settings.partition is not None:
            raise SettingsError(f"partition {settings.partition}: no such store")
        return cast(KafkaService[Any], FakeTemplate())

    cells = CellHost(build, Settings("dealing", data_dir=tmp_path, partitioned=True))
    cells._starting[3] = asyncio.create_task(cells._start_cell(3))
    await asyncio.wait_for(cells._starting[3], 5)
    assert cells.failed and cells.stopping.is_set()
    assert 3 not in cells._starting and 3 not in cells.cells


async def test_a_process_told_to_stop_before_its_first_assignment_does_not_wait(
    tmp_path: Path,
) -> None:
    cells = host(tmp_path)
    cells.stopping.set()
    await asyncio.wait_for(cells.wait_ready(timeout=120), 1)


def test_a_cell_keeps_a_small_postgres_pool() -> None:
    """Every cell of every service opens its own pool: 12 partitions x 3 services of the
    unpartitioned pool (5 + 10 overflow) would exceed a server's max_connections."""
    settings = Settings.from_env(
        "settlement", {"POSTGRES_HOST": "db", "POSTGRES_POOL_SIZE": "5", "PB_PARTITIONED": "yes"}
    )
    whole = settings.eventsourcing_env()
    cell = settings.for_partition(3).eventsourcing_env()
    assert (whole["POSTGRES_POOL_SIZE"], whole["POSTGRES_MAX_OVERFLOW"]) == ("5", "10")
    assert (cell["POSTGRES_POOL_SIZE"], cell["POSTGRES_MAX_OVERFLOW"]) == ("2", "2")
    assert cell["POSTGRES_SCHEMA"] == "settlement_p3"
