"""A partitioned service's cells: each partition's own store, offsets, anchors and metrics.

``Settings.for_partition`` is what keeps partition n's state apart from every other's (a
cell judged with another cell's store would mix two partitions' tables); the anchors of two
partitions' stores must never share an event id (the audit matches anchors to stores); the
process's /metrics merges its cells' registries without mixing their samples.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

from services.shared.platform.anchors import anchor_message
from services.shared.platform.consumer import RebalanceListener, subscriber_options
from services.shared.platform.partitioned_ops import merged_registry
from services.shared.platform.sealing import LEDGER_ID, SealLedger
from services.shared.platform.settings import Settings, SettingsError

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
    text = merged_registry(registries).decode()
    assert 'pb_handled_total{cell="0"} 3.0' in text
    assert 'pb_handled_total{cell="2"} 5.0' in text
    assert text.count("# HELP pb_handled_total") == 1
