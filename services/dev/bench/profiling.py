"""Optional sampling profiles of the services during the largest cell (py-spy).

Set ``PB_BENCH_PYSPY=<folder>``: ``py-spy record`` (``pip install py-spy``, in the dev extras)
samples every service process during the largest cell of each store and writes collapsed
stacks ``<folder>/<store>-<service>.txt``; :func:`top_functions` summarises one and
:func:`step_shares` splits its samples into the steps of a bet (fetch, decode, verify, ...). With
``PB_BENCH_PYSPY_GIL=1`` only the thread holding the GIL is sampled (``--gil``): the
Python work itself, without threads waiting for the GIL, which otherwise look busy.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path


class PySpy:
    """``py-spy record`` of some processes, stopped with SIGINT (py-spy then writes its file)."""

    def __init__(self, folder: Path, prefix: str, pids: Mapping[str, int]) -> None:
        self.outputs: dict[str, Path] = {}
        self._children: list[subprocess.Popen[bytes]] = []
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        folder.mkdir(parents=True, exist_ok=True)
        for name, pid in pids.items():
            output = folder / f"{prefix}-{name}.txt"
            self.outputs[name] = output
            self._children.append(
                subprocess.Popen(
                    [
                        *(exe, "record", "--pid", str(pid), "--rate", "100"),
                        *("--format", "raw", "--output", str(output), "--nonblocking"),
                        *(("--gil",) if os.environ.get("PB_BENCH_PYSPY_GIL") == "1" else ()),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )

    def stop(self) -> None:
        for child in self._children:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGINT)
        for child in self._children:
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(timeout=10)


def profiler_folder() -> Path | None:
    raw = os.environ.get("PB_BENCH_PYSPY", "").strip()
    return Path(raw) if raw else None


def top_functions(collapsed: str, limit: int = 15, own: bool = False) -> list[tuple[str, float]]:
    """(function, share of samples) from py-spy's collapsed stacks: inclusive, or ``own`` time."""
    totals: Counter[str] = Counter()
    samples = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        samples += count
        frames = stack.split(";")
        if own:
            totals[frames[-1]] += count
        else:
            for frame in set(frames):
                totals[frame] += count
    if not samples:
        return []
    return [(frame, count / samples) for frame, count in totals.most_common(limit)]


STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("sign", ("Signer.sign",)),
    ("verify", ("platform/security/",)),
    ("commit", ("group_coordinator.py", "commit_offsets")),
    ("transcode", ("JSONTranscoder", "Mapper.to_stored_event", "Mapper.to_domain_event")),
    ("read back", ("select_notifications", "NotificationLog")),
    (
        "record",
        (
            "eventsourcing/application.py",
            "eventsourcing/persistence.py",
            "eventsourcing/sqlite.py",
            "eventsourcing/postgres.py",
            "sqlite3",
            "psycopg",
            "UnitOfWork.commit",
        ),
    ),
    ("decode", ("decode (contracts/codec.py", "validate_json", "json/decoder.py")),
    ("encode", ("encode (contracts/codec.py", "model_dump_json", "json/encoder.py")),
    (
        "map",
        (
            "platform/relay/records.py",
            "platform/relay/publishing.py",
            "contracts/trusted.py",
            "/messages.py",
        ),
    ),
    ("fetch", ("aiokafka/consumer/",)),
    ("produce", ("aiokafka/producer/",)),
    ("judge", ("services/settlement/", "services/dealing/", "services/shoe/", "shared/rules/")),
    ("consume", ("platform/consumer/",)),
    ("relay", ("platform/relay/",)),
)
"""The steps of a bet, most specific first, each with substrings of py-spy frames
(``function (path:line)``). A stack counts for the first step any of its frames matches: a
JSON encoder under the store's transcoder is transcoding, under the relay's mapping encoding;
an aggregate's ``@event`` method (under ``eventsourcing/domain.py``) is judging, not recording;
a stack no step matches is the event loop, threads and framework glue ("loop and glue")."""

GLUE = "loop and glue"


def step_of(stack: str) -> str:
    """The step a sampled stack (frames joined by ``;``) belongs to."""
    for step, needles in STEPS:
        if any(needle in stack for needle in needles):
            return step
    return GLUE


def step_shares(collapsed: str) -> dict[str, float]:
    """Each step's share of the samples in py-spy's collapsed stacks (steps with none left out)."""
    totals: Counter[str] = Counter()
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if stack and count_text.isdigit():
            totals[step_of(stack)] += int(count_text)
    samples = sum(totals.values())
    return {step: count / samples for step, count in totals.items()} if samples else {}
