"""Background processes: start detached, find again by pid file, stop for good."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import psutil

T = TypeVar("T")


def progress(message: str) -> None:
    """Progress for a person, on stderr (stdout is kept for the shell lines of `infra up`)."""
    print(f"[infra] {message}", file=sys.stderr, flush=True)


def start_detached(
    command: Sequence[str], *, log_file: Path, cwd: Path, env: Mapping[str, str] | None = None
) -> int:
    """Start ``command`` in its own session (it outlives the caller), output appended to
    ``log_file``; returns its pid."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as log, open(os.devnull, "rb") as devnull:
        process = subprocess.Popen(
            list(command),
            stdin=devnull,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
    return process.pid


def running_pid(pid_file: Path, marker: str) -> int | None:
    """The pid recorded in ``pid_file`` if that process still runs and its command line
    contains ``marker`` (so a recycled pid of another program is never ours)."""
    try:
        pid = int(pid_file.read_text().split()[0])
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        if marker in " ".join(proc.cmdline()):
            return pid
    except (OSError, ValueError, IndexError, psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return None


def is_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def stop_process(pid: int, *, timeout: float) -> bool:
    """SIGTERM ``pid`` (and its process group when it leads one), wait ``timeout``
    seconds, then SIGKILL whatever is left. Returns True if it had to kill."""
    try:
        proc = psutil.Process(pid)
        family = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return False
    for member in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(family, timeout=timeout)
    for member in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()
    psutil.wait_procs(alive, timeout=10)
    return bool(alive)


def wait_until(check: Callable[[], object], *, timeout: float, interval: float = 0.25) -> bool:
    """Call ``check()`` until it returns true or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def read_from(path: Path, offset: int = 0) -> str:
    """A log file's text from byte ``offset`` on ("" if it cannot be read)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def tail_text(text: str, lines: int = 15) -> str:
    """The last ``lines`` lines of ``text``, indented, for error messages."""
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


@contextlib.contextmanager
def locked(lock_file: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_file`` (two `infra up` at once take turns)."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` in a thread and event loop of its own (safe from async code too)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
