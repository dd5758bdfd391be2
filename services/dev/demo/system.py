"""The running system as a client sees it: three service processes, a command sender, an event
feed and a ledger. Used by `punto-banco up` and by the end-to-end tests.

Nothing here imports a service: it starts `punto-banco serve X` children and talks to them only
through contracts over Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from contracts import HOUSE, Message
from services.dev.demo.bus import CommandSender, EventFeed, Received, ensure_topics, event_topics
from services.dev.demo.ledger import Ledger
from services.dev.demo.processes import (
    SERVICES,
    ServiceFailed,
    ServiceProcess,
    ServiceSettings,
    prepare_keys,
    service_env,
    stop_all,
)
from services.dev.infra.kafka_clients import ADMIN, AUDITOR
from services.shared.platform.settings import check_operators

M = TypeVar("M", bound=Message)

READY_MARKER = "{name}: serving"
"""What a service logs once it runs (services/shared/platform/host/runner.py)."""


def run_operators(settings: ServiceSettings) -> tuple[str, ...]:
    """The run's operators: ``PB_OPERATORS`` as the services inherit it (the house alone by
    default); each simulated bettor plays through one of them."""
    return check_operators(service_env(settings).get("PB_OPERATORS", ""))


async def secure_run(
    settings: ServiceSettings, operators: Sequence[str] = (HOUSE,), partitions: int = 3
) -> None:
    """The run's topics (every operator's, ``partitions`` each), and on the local
    authenticating broker the operators' gateway principals and the ACL matrix for them (as
    its admin); elsewhere the topics as the run's one login (who must be allowed to)."""
    logins = settings.logins
    if not await logins.secure_run(
        settings.bootstrap, settings.topic_prefix, partitions=partitions, operators=operators
    ):
        await ensure_topics(
            settings.bootstrap,
            settings.topic_prefix,
            partitions=partitions,
            operators=operators,
            auth=logins.auth(ADMIN),
        )


async def end_run(settings: ServiceSettings, operators: Sequence[str] = (HOUSE,)) -> None:
    """Revoke the ACLs :func:`secure_run` granted for a run's own prefix (never the project's
    unprefixed ones, which `infra up` grants)."""
    if settings.topic_prefix:
        await settings.logins.end_run(
            settings.bootstrap, settings.topic_prefix, operators=operators
        )


class SystemTimeout(TimeoutError):
    """Something awaited did not happen in time; the message says what and shows the logs."""


class LocalSystem:
    """Start, watch, kill, restart and stop the services of one run; follow their events.

    ``accept`` filters what the ledger sees (e.g. only this run's tables); ``follow`` names more
    topics to read than the events (e.g. the incidents).
    """

    def __init__(
        self,
        settings: ServiceSettings,
        log_dir: Path,
        services: Iterable[str] = SERVICES,
        ledger: Ledger | None = None,
        accept: Callable[[Message], bool] | None = None,
        follow: Sequence[str] = (),
    ) -> None:
        self.settings = settings
        self.services = {
            name: ServiceProcess(name, service_env(settings, service=name), log_dir / f"{name}.log")
            for name in services
        }
        self.ledger = ledger if ledger is not None else Ledger()
        self.accept = accept
        self.operators = run_operators(settings)
        logins = settings.logins
        self.sender = CommandSender(
            settings.bootstrap, settings.topic_prefix, operators=self.operators, logins=logins
        )
        # The ledger reads every event topic, as the auditor may.
        self.feed = EventFeed(
            settings.bootstrap,
            settings.topic_prefix,
            (*event_topics(self.operators), *follow),
            auth=logins.auth(AUDITOR),
        )
        self.reactors: list[Callable[[Message], Awaitable[None]]] = []
        """Called with every decoded message, after the ledger saw it (e.g. the table driver)."""
        self.history: list[Received] = []
        self.undecodable = 0
        self._started = False

    # ---- life cycle ----------------------------------------------------------------------

    async def start(self, ready_timeout: float = 90.0) -> None:
        """Create the topics and the run's keys, start every service, wait until each serves,
        start following."""
        self._started = True
        await asyncio.to_thread(prepare_keys, self.settings, tuple(self.services))
        await secure_run(self.settings, self.operators)
        await self.feed.start(from_beginning=False)
        await self.sender.start()
        for child in self.services.values():
            child.start()
        await self.wait_ready(self.services, ready_timeout)

    async def stop(self, timeout: float = 20.0) -> list[str]:
        """Stop the services (SIGTERM, wait, SIGKILL) and the Kafka clients; returns the names
        of services that had to be killed."""
        killed = await asyncio.to_thread(stop_all, self.services.values(), timeout)
        for closing in (
            self.sender.stop(),
            self.feed.stop(),
            end_run(self.settings, self.operators),
        ):
            with contextlib.suppress(Exception):  # best effort while shutting down
                await asyncio.wait_for(closing, 20)
        return killed

    async def __aenter__(self) -> LocalSystem:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def wait_ready(self, names: Iterable[str], timeout: float) -> None:
        children = [self.services[name] for name in names]
        deadline = time.monotonic() + timeout
        for child in children:
            marker = READY_MARKER.format(name=child.name)
            while marker not in child.log_text_since_start():
                if not child.running():
                    raise ServiceFailed(
                        f"service {child.name} exited with code {child.exit_code()} while "
                        f"starting; end of {child.log_path}:\n{child.log_tail()}"
                    )
                if time.monotonic() > deadline:
                    raise SystemTimeout(
                        f"service {child.name} did not log {marker!r} within {timeout:.0f} s; "
                        f"end of {child.log_path}:\n{child.log_tail()}"
                    )
                await asyncio.sleep(0.1)

    def kill(self, name: str) -> None:
        """SIGKILL a service (a crash)."""
        self.services[name].kill()

    async def restart(self, name: str, ready_timeout: float = 90.0) -> None:
        child = self.services[name]
        if child.running():
            child.kill()
        child.start()
        await self.wait_ready([name], ready_timeout)

    def check_alive(self) -> None:
        """Raise ServiceFailed if a service died on its own."""
        for child in self.services.values():
            if child.process is not None and not child.running():
                raise ServiceFailed(
                    f"service {child.name} exited with code {child.exit_code()}; "
                    f"end of {child.log_path}:\n{child.log_tail()}"
                )

    # ---- following -------------------------------------------------------------------------

    async def pump(self, timeout_ms: int = 100) -> list[Received]:
        """Read what arrived, feed the ledger, keep it in ``history``; returns the new records."""
        received = await self.feed.poll(timeout_ms=timeout_ms)
        for record in received:
            self.history.append(record)
            if record.message is None:
                self.undecodable += 1
                continue
            if self.accept is None or self.accept(record.message):
                self.ledger.observe(record.message)
            for react in self.reactors:
                await react(record.message)
        return received

    async def until(
        self,
        condition: Callable[[], object],
        timeout: float,
        what: str,
        watch: bool = True,
    ) -> None:
        """Pump until ``condition()`` is true; SystemTimeout naming ``what`` after ``timeout`` s.
        With ``watch``, a service dying on its own fails at once."""
        deadline = time.monotonic() + timeout
        while not condition():
            if watch:
                self.check_alive()
            if time.monotonic() > deadline:
                raise SystemTimeout(f"timed out after {timeout:.0f} s waiting for {what}")
            await self.pump()

    def seen(self, kind: type[M]) -> list[M]:
        """Every decoded message of ``kind`` seen so far (redeliveries included)."""
        return [r.message for r in self.history if isinstance(r.message, kind)]

    def log_tails(self, lines: int = 15) -> str:
        return "\n".join(
            f"--- {child.name} ({child.log_path}):\n{child.log_tail(lines)}"
            for child in self.services.values()
        )
