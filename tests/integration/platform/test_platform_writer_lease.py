"""The writer lease of SQLite stores: file locks held by real processes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from services.shared.platform.store.lease import FileLease


async def test_a_second_lease_waits_naming_the_holder_and_takes_over_on_release(
    tmp_path: Path,
) -> None:
    store = tmp_path / "settlement.sqlite"
    first, second = FileLease(store), FileLease(store)
    assert await first.acquire(asyncio.Event(), poll=0.01)
    assert not await second._try()
    assert second.holder == f"pid {os.getpid()} on {os.uname().nodename}"
    assert second.standby_reason() == (
        f"standby: sqlite {store} is written by another instance ({second.holder})"
    )
    waiting = asyncio.create_task(second.acquire(asyncio.Event(), poll=0.01))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    await first.release()
    assert await asyncio.wait_for(waiting, 10)
    assert second.standby_reason() is None and second.fence_env() == {}
    assert (store.parent / "settlement.sqlite.writer").stat().st_mode & 0o777 == 0o600
    await second.release()


async def test_a_standby_told_to_stop_gives_up_without_the_lease(tmp_path: Path) -> None:
    store = tmp_path / "shoe.sqlite"
    first, second = FileLease(store), FileLease(store)
    assert await first.acquire(asyncio.Event(), poll=0.01)
    stopping = asyncio.Event()
    waiting = asyncio.create_task(second.acquire(stopping, poll=0.01))
    await asyncio.sleep(0.05)
    stopping.set()
    assert await asyncio.wait_for(waiting, 10) is False
    assert not second.held
    await first.release()


async def test_a_holder_killed_with_sigkill_leaves_the_lease_free(tmp_path: Path) -> None:
    store = tmp_path / "dealing.sqlite"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import asyncio, sys\n"
            "from pathlib import Path\n"
            "from services.shared.platform.store.lease import FileLease\n"
            "lease = FileLease(Path(sys.argv[1]))\n"
            "assert asyncio.run(lease.acquire(asyncio.Event()))\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n",
            str(store),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[3],
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        lease = FileLease(store)
        assert not await lease._try()
        assert lease.holder == f"pid {holder.pid} on {os.uname().nodename}"
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        assert await asyncio.wait_for(lease.acquire(asyncio.Event(), poll=0.01), 10)
        await lease.release()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=10)


async def test_partitioned_processes_share_the_store_lease_and_exclude_an_unpartitioned_writer(
    tmp_path: Path,
) -> None:
    """A partitioned process holds the unpartitioned store's lease shared: two partitioned
    processes run together, an unpartitioned writer waits for both to go, and a partitioned
    process waits for an unpartitioned writer (the two modes would judge the same records
    in two stores: every bet settled twice)."""
    store = tmp_path / "settlement.sqlite"
    first, second = FileLease(store, shared=True), FileLease(store, shared=True)
    assert await first.acquire(asyncio.Event(), poll=0.01)
    assert await second.acquire(asyncio.Event(), poll=0.01)  # shared: both hold it
    unpartitioned = FileLease(store)
    assert not await unpartitioned._try()
    me = f"pid {os.getpid()} on {os.uname().nodename}"
    assert unpartitioned.holder == f"partitioned processes, the last to join {me}"
    waiting = asyncio.create_task(unpartitioned.acquire(asyncio.Event(), poll=0.01))
    await first.release()
    await asyncio.sleep(0.1)
    assert not waiting.done()  # one partitioned process still runs
    await second.release()
    assert await asyncio.wait_for(waiting, 10)
    late = FileLease(store, shared=True)
    assert not await late._try()  # the unpartitioned writer holds it
    assert late.holder == me
    assert late.standby_reason() is not None
    await unpartitioned.release()
    assert await late._try()
    await late.release()
