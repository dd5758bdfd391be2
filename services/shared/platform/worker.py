"""One thread that runs every call touching a service's Application, in order.

eventsourcing is synchronous, so async code calls it through a worker thread
(like ``asyncio.to_thread``). Using ONE dedicated thread for all handlers and
timers of a service serialises their writes: two handlers never race on the
same aggregate version, and a timer's command sees every handled message.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class AppWorker:
    """Run blocking Application calls one at a time off the event loop."""

    def __init__(self, name: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-app")

    async def call(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=False)
