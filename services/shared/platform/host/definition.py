"""What a service tells the platform about itself, and what its timers get while it runs.

:class:`ServiceDefinition`: how to build its Application, how its stored events become
published messages, which topics it handles and how, and its timers. A service's ``tasks``
(dealing's betting clock) and the platform's own (the sealer, ``sealing.py``) are coroutines
``task(ctx)`` started once the service runs (``service_app.py``), given a
:class:`ServiceContext`, and expected to return soon after ``ctx.stopping`` is set.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from services.shared.platform.consumer.deliveries import Subscription
from services.shared.platform.relay.relay_records import EventMapper
from services.shared.platform.settings import Settings
from services.shared.platform.store.application import ServiceApplication
from services.shared.platform.store.worker import AppWorker

TApp = TypeVar("TApp", bound=ServiceApplication)


@dataclass
class ServiceContext(Generic[TApp]):
    """What a running service's timers and tasks get."""

    app: TApp
    settings: Settings
    worker: AppWorker
    stopping: asyncio.Event

    async def call(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run a blocking Application call in the service's worker thread."""
        return await self.worker.call(fn, *args, **kwargs)


Task = Callable[[ServiceContext[Any]], Awaitable[None]]
"""A coroutine run alongside the service (a timer); returns once ``ctx.stopping`` is set."""


@dataclass(frozen=True)
class ServiceDefinition(Generic[TApp]):
    """What the platform runs of a service.

    - ``application``: builds the service's Application from the eventsourcing env
      (``lambda env: ShoeApplication(env=env)``).
    - ``to_messages``: stored domain event -> contract messages the relay publishes
      (topic from ``contracts.topic_for``, key = table id); None: publishes nothing.
    - ``subscriptions``: given the Application, the topics it consumes and their handlers
      (the order is the order each fetch's partitions are applied in).
    - ``tasks``: coroutines run alongside (timers, e.g. closing betting windows);
      each gets a :class:`ServiceContext` and should return when ``ctx.stopping`` is set.
    """

    name: str
    application: Callable[[dict[str, str]], TApp]
    to_messages: EventMapper | None = None
    subscriptions: Callable[[TApp], Sequence[Subscription]] = field(default=lambda app: ())
    tasks: Sequence[Task] = ()
