"""The seal chain itself: covering, chaining, no seal of a seal, helpers."""

from __future__ import annotations

import base64
import json
from uuid import uuid4

from contracts import CloseBetting
from services.shared.platform.store.sealing import (
    SEALED_TOPIC,
    ZERO_DIGEST,
    id_runs,
    pack_fingerprints,
    row_hash,
    seal_store,
)
from services.tools.audit.seals import expand_runs, unpack_fingerprints
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
