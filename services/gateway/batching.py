"""Group commit: what arrives while one store transaction runs goes into the next one.

The API's concurrent bets and the wallet's answers each need a store transaction; one each would
cost a commit (an fsync) per bet. :class:`Batcher` hands everything submitted meanwhile to ONE
call of a batch function (``GatewayApplication.requests``, ``record_calls``), at most
:data:`MAX_BATCH` at a time, and gives each submitter its own result (or exception).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

MAX_BATCH = 500


class Batcher(Generic[T, R]):
    """Runs ``run(items)`` for the items submitted, in batches, one batch at a time."""

    def __init__(self, run: Callable[[Sequence[T]], Awaitable[Sequence[R | Exception]]]) -> None:
        self.run = run
        self._queue: list[tuple[T, asyncio.Future[R]]] = []
        self._draining: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        if self._draining is None or self._draining.done():
            self._draining = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            try:
                results = await self.run([item for item, _ in batch])
            except Exception as error:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(error)
                continue
            for (_, future), result in zip(batch, results, strict=True):
                if future.done():
                    continue
                if isinstance(result, Exception):
                    future.set_exception(result)
                else:
                    future.set_result(result)
