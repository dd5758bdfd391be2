"""The seal chain itself: covering, chaining, no seal of a seal, helpers."""

from __future__ import annotations

import base64
import json
from uuid import uuid4

import pytest

from contracts import CloseBetting
from services.shared.facts.settlement import CoupSettledFact
from services.shared.platform.store.sealing import (
    SEALED_TOPIC,
    ZERO_DIGEST,
    id_runs,
    pack_fingerprints,
    row_hash,
    seal_store,
)
from services.tools.audit.auditor import read_history
from services.tools.audit.memory_stores import ListStore
from services.tools.audit.seals import expand_runs, unpack_fingerprints
from services.tools.audit.stores import Row
from tests.unit.audit.helpers import play_history


def test_id_runs_round_trip() -> None:
    ids = [1, 2, 3, 7, 9, 10]
    assert id_runs(ids) == [[1, 3], [7, 7], [9, 10]]
    assert expand_runs(id_runs(ids)) == ids


def test_fingerprints_round_trip() -> None:
    hashes = [row_hash(uuid4(), n, "t", b"{}") for n in range(1, 5)]
    packed = base64.b64decode(pack_fingerprints(hashes))
    assert unpack_fingerprints(packed) == [h[:8] for h in hashes]


def test_sealing_again_without_new_events_records_nothing() -> None:
    played = play_history(coups=2, tables=1)
    app = played.system.dealing
    before = app.recorder.max_notification_id()
    assert seal_store(app, "dealing") == 0
    assert app.recorder.max_notification_id() == before


def test_seals_chain_and_cover_every_row_once() -> None:
    played = play_history(coups=3, tables=1, seal=False)
    app = played.system.dealing
    first_end = app.recorder.max_notification_id()
    assert seal_store(app, "dealing") == first_end
    coup_id = played.system.current_coup("t1")
    assert coup_id is not None
    played.system.command(CloseBetting(table_id="t1", coup_id=coup_id))
    assert seal_store(app, "dealing") > 0
    seals = [
        json.loads(n.state)
        for n in app.recorder.select_notifications(1, 100_000)
        if n.topic == SEALED_TOPIC
    ]
    assert [(s["from_id"], s["previous_digest"]) for s in seals] == [
        (0, ZERO_DIGEST),
        (first_end, seals[0]["digest"]),
    ]
    covered = expand_runs(seals[0]["ids"]) + expand_runs(seals[1]["ids"])
    assert covered == list(range(1, seals[1]["to_id"] + 1))


def test_a_seal_or_row_changed_to_numbers_python_cannot_hold_is_a_finding_not_a_crash() -> None:
    """Rows an attacker wrote into a store: state nested past the recursion limit, a seal's
    id as 1e400 (OverflowError) or runs of 10**12 ids (hours to expand). Each is reported
    unreadable, at once; the audit goes on."""
    origin = uuid4().bytes
    seal = {"from_id": 0, "to_id": 1, "count": 1, "ids": [[1, 1]], "fingerprints": ""}
    seal |= {"digest": "0" * 64, "previous_digest": "0" * 64}
    states = {
        CoupSettledFact.STORED_TOPIC: b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}",
        SEALED_TOPIC: json.dumps(seal).replace('"from_id": 0', '"from_id": 1e400').encode(),
    }
    rows = [Row(1, origin, 1, topic, state) for topic, state in states.items()]
    rows.append(
        Row(1, origin, 1, SEALED_TOPIC, json.dumps({**seal, "ids": [[1, 10**12]]}).encode())
    )
    for row in rows:
        _, findings, _ = read_history({"settlement": ListStore("settlement", [row])})
        assert "unreadable_event" in {finding.code for finding in findings}
    with pytest.raises(ValueError, match="count"):
        expand_runs([[1, 10**12]], 1)
