"""Every stored shape still replays; rows at their current version are re-stored unchanged.

The seal chain hashes each row's stored bytes, so a stored row is never rewritten: the
services must read every golden row (and the hand-made rows of older shapes) forever, and
a row of the current shape must come back out of the mapper byte for byte.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.compat.golden import (
    GOLDEN_SETS,
    SERVICES,
    golden_rows,
    in_memory,
    legacy_rows,
    stored,
)


@pytest.mark.parametrize("prefix", GOLDEN_SETS)
@pytest.mark.parametrize("service", SERVICES)
def test_rows_at_their_current_class_version_round_trip_byte_for_byte(
    service: str, prefix: str
) -> None:
    mapper = in_memory(service).mapper
    checked = upcast = 0
    golden = golden_rows(service, prefix)
    for row in golden + (() if prefix else legacy_rows(service, replays=True)):
        record = stored(row)
        event = mapper.to_domain_event(record)
        version = json.loads(row["state"]).get("class_version", 1)
        if version != getattr(type(event), "class_version", 1):
            upcast += row in golden  # e.g. the shoes shuffled in plain text
            continue  # upcast on the way in (the replay test covers it)
        again = mapper.to_stored_event(event)
        assert (again.originator_id, again.originator_version, again.topic, again.state) == (
            record.originator_id,
            record.originator_version,
            record.topic,
            record.state,
        ), row["topic"]
        checked += 1
    assert checked >= len(golden) - upcast
