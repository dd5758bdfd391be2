"""``punto-banco up`` warns when the SQLite stores of its data folder were written against
another Kafka (or topic prefix): a partitioned run's stores (``<service>-p<N>.sqlite``) count
as much as a service's one store (real Kafka: the check reads the cluster's id)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.dev.demo.orchestrator import check_store_matches_kafka
from tests import kafka_logins

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("store", ["settlement.sqlite", "settlement-p2.sqlite"])
async def test_stores_written_under_another_topic_prefix_are_warned_about(
    kafka_bootstrap: str, tmp_path: Path, store: str
) -> None:
    logins = kafka_logins.logins()
    first = await check_store_matches_kafka(tmp_path, kafka_bootstrap, "run-a.", {}, logins)
    assert first is None  # no store yet
    (tmp_path / store).write_bytes(b"")
    again = await check_store_matches_kafka(tmp_path, kafka_bootstrap, "run-a.", {}, logins)
    assert again is None  # the same Kafka and prefix
    other = await check_store_matches_kafka(tmp_path, kafka_bootstrap, "run-b.", {}, logins)
    assert other is not None and "written with another Kafka" in other
