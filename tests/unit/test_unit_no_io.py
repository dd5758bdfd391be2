"""The unit tier's guard (tests/unit/conftest.py) refuses I/O before it happens and lets through
what is no I/O: in-memory SQLite, eventsourcing's POPO store, files under the temporary folder."""

from __future__ import annotations

import contextlib
import fcntl
import socket
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from tests.unit.conftest import UnitTestIO, _no_io
from tests.unit.platform.fakes import CounterApp, popo_env


def _connect() -> None:
    with socket.socket() as sock:
        sock.connect(("127.0.0.1", 9))


def _bind() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))


def _lock(tmp: Path) -> None:
    with (tmp / "lock").open("w") as file:
        fcntl.flock(file, fcntl.LOCK_EX)


IO: dict[str, Callable[[Path], object]] = {
    "connected a socket": lambda _: _connect(),
    "bound a socket": lambda _: _bind(),
    "started a process": lambda _: subprocess.run(["true"], check=True),
    "opened the SQLite file": lambda tmp: sqlite3.connect(tmp / "events.sqlite"),
    "connected to PostgreSQL": lambda _: psycopg.connect("host=127.0.0.1 dbname=none"),
    "took a file lock": _lock,
    "for writing": lambda _: Path(__file__).with_name("written.txt").open("w"),
}


@pytest.mark.parametrize("what", IO)
def test_each_kind_of_io_is_refused_naming_it(
    what: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    seen: list[str] = []
    with _no_io(request.config, seen), pytest.raises(UnitTestIO, match=what):
        IO[what](tmp_path)
    assert seen and "tests/integration/<area>/" in seen[0]


def test_io_the_code_swallows_is_still_seen(request: pytest.FixtureRequest) -> None:
    seen: list[str] = []
    with _no_io(request.config, seen), contextlib.suppress(Exception):  # as code under test may
        _connect()
    assert seen, "the guard must fail the test even when the error is caught"


def test_memory_and_the_temporary_folder_are_allowed(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    seen: list[str] = []
    with _no_io(request.config, seen):
        sqlite3.connect(":memory:").close()
        sqlite3.connect("file:x?mode=memory&cache=shared", uri=True).close()
        (tmp_path / "note.txt").write_text("ok")
        CounterApp(env=popo_env()).close()
    assert not seen
