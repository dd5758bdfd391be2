"""The unit tier does no I/O: a unit test that connects or binds a socket, starts a process,
opens an SQLite file, connects to PostgreSQL, takes a file lock or writes a file outside the
temporary folder fails, naming what it did (its place is tests/integration/<area>/).

Allowed: in-memory SQLite (``:memory:``, ``mode=memory``), eventsourcing's POPO store, reading
files, and writing under the temporary folder (``tmp_path``), Hypothesis's example database or
``__pycache__`` (an import's bytecode), never the project's own tree.
The guard wraps each test's setup, call and teardown; what it refuses raises at once and fails
the test even when the code under test swallows the error.
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import io
import os
import socket
import sqlite3
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

SERVER_FIXTURES = ("kafka_bootstrap", "postgres_env", "postgres_dsn", "_postgres_server_env")
WRITE_MODES = frozenset("wax+")
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


class UnitTestIO(AssertionError):
    """A unit test did I/O the unit tier forbids."""


@dataclass(frozen=True)
class _Writable:
    """Where a unit test may write: the temporary folder (``tmp_path``) and Hypothesis's
    database, never the project's own tree (even when the project lies in the temporary
    folder, as a clone in /tmp does)."""

    temporary: str
    hypothesis: str
    project: str

    def refuses(self, path: Any) -> bool:
        if isinstance(path, int):  # an already open descriptor
            return False
        real = os.path.realpath(os.fspath(path))
        if os.path.basename(os.path.dirname(real)) == "__pycache__":  # an import's bytecode
            return False
        under = (real + os.sep).startswith
        if under(self.hypothesis):
            return False
        return under(self.project) or not under(self.temporary)


def _writable(config: pytest.Config) -> _Writable:
    def folder(path: str | os.PathLike[str]) -> str:
        return os.path.realpath(path) + os.sep

    root = config.rootpath
    return _Writable(folder(tempfile.gettempdir()), folder(root / ".hypothesis"), folder(root))


def _in_memory(database: Any, uri: bool) -> bool:
    name = os.fspath(database) if not isinstance(database, str) else database
    name = name.decode() if isinstance(name, bytes) else name
    return name in ("", ":memory:") or (uri and (":memory:" in name or "mode=memory" in name))


@contextlib.contextmanager
def _no_io(config: pytest.Config, seen: list[str]) -> Iterator[None]:
    writable = _writable(config)

    def refuse(what: str) -> UnitTestIO:
        message = (
            f"tests/unit does no I/O, but this test {what}: "
            "move it to tests/integration/<area>/ (tests/unit/conftest.py)"
        )
        seen.append(message)
        return UnitTestIO(message)

    def forbid(what: str) -> Callable[..., Any]:
        def guard(*args: Any, **kwargs: Any) -> Any:
            raise refuse(what)

        return guard

    real_open, real_os_open, real_sqlite = builtins.open, os.open, sqlite3.connect

    def guarded_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if WRITE_MODES & set(mode) and writable.refuses(file):
            raise refuse(f"opened {file} for writing ({mode!r}) outside the temporary folder")
        return real_open(file, mode, *args, **kwargs)

    def guarded_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & WRITE_FLAGS and writable.refuses(path):
            raise refuse(f"os.open-ed {path} for writing outside the temporary folder")
        return real_os_open(path, flags, *args, **kwargs)

    def guarded_sqlite(database: Any, *args: Any, **kwargs: Any) -> Any:
        if not _in_memory(database, bool(kwargs.get("uri"))):
            raise refuse(f"opened the SQLite file {database} (use ':memory:')")
        return real_sqlite(database, *args, **kwargs)

    patches: list[tuple[Any, str, Any]] = [
        (builtins, "open", guarded_open),
        (io, "open", guarded_open),
        (os, "open", guarded_os_open),
        (sqlite3, "connect", guarded_sqlite),
        (socket.socket, "connect", forbid("connected a socket")),
        (socket.socket, "connect_ex", forbid("connected a socket")),
        (socket.socket, "bind", forbid("bound a socket")),
        (subprocess.Popen, "__init__", forbid("started a process (subprocess)")),
        (os, "system", forbid("started a process (os.system)")),
        (os, "fork", forbid("forked a process")),
        (os, "posix_spawn", forbid("started a process (posix_spawn)")),
        (os, "posix_spawnp", forbid("started a process (posix_spawnp)")),
        (fcntl, "flock", forbid("took a file lock (flock)")),
        (fcntl, "lockf", forbid("took a file lock (lockf)")),
        (psycopg, "connect", forbid("connected to PostgreSQL")),
        (psycopg.Connection, "connect", forbid("connected to PostgreSQL")),
        (psycopg.AsyncConnection, "connect", forbid("connected to PostgreSQL")),
    ]
    with pytest.MonkeyPatch.context() as patch:
        for owner, name, value in patches:
            patch.setattr(owner, name, value)
        yield


def _guarded(item: pytest.Item) -> Iterator[None]:
    seen: list[str] = []
    with _no_io(item.config, seen):
        result = yield
    if seen:
        raise UnitTestIO(seen[0])
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    servers = [name for name in SERVER_FIXTURES if name in getattr(item, "fixturenames", ())]
    if servers:
        raise UnitTestIO(
            f"tests/unit does no I/O, but this test asks for {', '.join(servers)}: "
            "move it to tests/integration/<area>/ (tests/unit/conftest.py)"
        )
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if nextitem is None:  # the session's last test: its teardown ends every session fixture,
        return (yield)  # an integration test's database too (`pytest tests -k relay`)
    return (yield from _guarded(item))
