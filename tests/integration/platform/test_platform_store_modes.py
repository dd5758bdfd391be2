"""SQLite stores are private to their owner: folder 0700, database (and WAL) files 0600."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from services.shared.platform.settings import Settings
from services.shared.platform.store import open_application
from services.shoe.application import ShoeApplication
from tests.signing_keys import key_env

SECRET = {"PB_SHOE_SECRET_KEY_FILE": key_env()["PB_SHOE_SECRET_KEY_FILE"]}
"""The session's shoe secret key (kept out of the data folder whose mode is checked)."""


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> object:
    previous = os.umask(0o022)  # the usual default: files 0644, folders 0755
    yield
    os.umask(previous)


def test_a_new_store_is_created_owner_only(tmp_path: Path, open_umask: object) -> None:
    settings = Settings.from_env("shoe", env={"PB_DATA_DIR": str(tmp_path / "var"), **SECRET})
    app = open_application(lambda env: ShoeApplication(env=env), settings)
    try:
        app.shuffle_shoe("t1", "s1", 1, 16)  # something written: the WAL exists too
        assert mode(settings.data_dir) == 0o700
        assert mode(settings.sqlite_path) == 0o600
        wal = settings.sqlite_path.with_name(settings.sqlite_path.name + "-wal")
        if wal.exists():
            assert mode(wal) == 0o600
    finally:
        app.close()


def test_an_existing_store_others_could_read_is_made_owner_only(
    tmp_path: Path, open_umask: object
) -> None:
    folder = tmp_path / "var"
    folder.mkdir(mode=0o755)  # an existing data folder keeps its mode (the servers live there)
    store = folder / "shoe.sqlite"
    store.touch(mode=0o644)
    settings = Settings.from_env("shoe", env={"PB_DATA_DIR": str(folder), **SECRET})
    open_application(lambda env: ShoeApplication(env=env), settings).close()
    assert (mode(folder), mode(store)) == (0o755, 0o600)
