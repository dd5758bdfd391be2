"""One thread that runs every call touching a service's Application, in order.

eventsourcing is synchronous, so async code calls it through a worker thread
(like ``asyncio.to_thread``). Using ONE dedicated thread for all handlers and
timers of a service serialises their writes: two handlers never race on the
same aggregate version, and a timer's command sees every handled message.

A call that never returns (a store write blocked for good: seen once under load, the
database waiting for the rest of a pipelined insert that the driver never sent) would stop
the service silently: nothing fails, nothing moves. So the worker knows what it runs and
since when (:meth:`AppWorker.stuck`), and :func:`watch_worker` logs it; ``/ready`` and
``/health`` report it (``readiness.py``, ``endpoints.py``), so an orchestrator's liveness
probe restarts the process. A restart is safe: the blocked transaction never committed, and
tracking makes the redelivered messages take effect exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

log = logging.getLogger(__name__)

STUCK_SECONDS = 120.0
"""A call running longer than this is stuck: the longest unit of work (a coup of 10,000 bets
settled in one transaction) takes well under a second, a start-up longer (not watched)."""
WATCH_SECONDS = 5.0


class AppWorker:
    """Run blocking Application calls one at a time off the event loop."""

    def __init__(
        self,
        name: str,
        stuck_after: float = STUCK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.stuck_after = stuck_after
        self.watching = False  # set once the service serves: start-up calls may be long
        self._clock = clock
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-app")
        self._running: tuple[str, float] | None = None  # what runs now, and since when

    async def call(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, functools.partial(self._run, fn, *args, **kwargs)
        )

    def _run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        self._running = (getattr(fn, "__qualname__", repr(fn)), self._clock())
        try:
            return fn(*args, **kwargs)
        finally:
            self._running = None

    def stuck(self) -> str | None:
        """Why the worker is stuck (a watched call has run too long), else None."""
        running = self._running
        if not self.watching or running is None:
            return None
        what, since = running
        seconds = self._clock() - since
        if seconds <= self.stuck_after:
            return None
        return (
            f"{self.name}: the store call {what} has run for {seconds:.0f} s "
            f"(more than {self.stuck_after:.0f} s): stuck; restart the process"
        )

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=False)


async def watch_worker(worker: AppWorker, stopping: asyncio.Event) -> None:
    """Log (once per episode) a worker that is stuck, and when it moves again."""
    reported = False
    while not stopping.is_set():
        why = worker.stuck()
        if why is not None and not reported:
            log.error("%s", why)
            reported = True
        elif why is None and reported:
            log.warning("%s: the stuck store call has returned", worker.name)
            reported = False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), WATCH_SECONDS)
