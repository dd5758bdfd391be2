"""Encrypted golden shoe stores, opened from SQLite files."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID

import pytest

from services.shared.platform.security import FieldDecryptionError
from services.shoe.application import ShoeApplication, ShoeKeyError
from services.shoe.domain import Shoe, shoe_uuid
from tests.unit.compat.golden import SHOE_SECRET, app_env, encrypted_rows, stored

SHUFFLED = Shoe.Shuffled.TOPIC


def _shuffled() -> list[dict[str, str]]:
    return [row for row in encrypted_rows() if row["topic"] == SHUFFLED]


def _restarted(tmp_path: Path, key: str = SHOE_SECRET) -> ShoeApplication:
    env = app_env("shoe", PERSISTENCE_MODULE="eventsourcing.sqlite")
    env["SQLITE_DBNAME"] = str(tmp_path / "shoe.sqlite")
    first = ShoeApplication(env={**env, "PB_SHOE_SECRET_KEY": SHOE_SECRET})
    first.recorder.insert_events([stored(row) for row in encrypted_rows()])
    first.close()
    return ShoeApplication(env={**env, "PB_SHOE_SECRET_KEY": key})


def test_both_key_ids_decrypt_their_shoes_after_a_restart(tmp_path: Path) -> None:
    app = _restarted(tmp_path)
    revealed, in_play = app.get_shoe("t3", "t3.shoe-1"), app.get_shoe("t3", "t3.shoe-2")
    assert revealed is not None and in_play is not None
    assert revealed.verify() and in_play.verify()
    assert revealed.closed and not in_play.closed
    assert in_play.draw("t3.coup-7", "t3.request-7", 4)  # the shoe in play deals on
    kids = [json.loads(row["state"])["encrypted"]["kid"] for row in _shuffled()]
    assert kids == ["golden-shoe-secret-1", "golden-shoe-secret-2"]
    app.close()


def test_the_stored_shuffles_hold_neither_order_nor_salt(tmp_path: Path) -> None:
    app = _restarted(tmp_path)
    for row in _shuffled():
        state = json.loads(row["state"])
        assert (state["order"], state["salt"], state["class_version"]) == (None, None, 2)
        shoe = app.repository.get(UUID(hex=row["originator_id"]))
        assert shoe.salt not in row["state"]
        assert not any(",".join(shoe.order[i : i + 3]) in row["state"] for i in range(50))
    app.close()


def test_a_key_set_without_the_older_key_id_refuses_its_shoe(tmp_path: Path) -> None:
    newer_only = SHOE_SECRET.split(",")[0]
    app = _restarted(tmp_path, newer_only)  # the newest shoe opens: the service starts
    with pytest.raises(FieldDecryptionError, match="golden-shoe-secret-1"):
        app.repository.get(shoe_uuid("t3", "t3.shoe-1"))
    app.close()
    older_only = SHOE_SECRET.split(",")[1]
    (tmp_path / "again").mkdir()
    with pytest.raises(ShoeKeyError, match="golden-shoe-secret-2"):
        _restarted(tmp_path / "again", older_only)  # the newest shoe does not: no start
