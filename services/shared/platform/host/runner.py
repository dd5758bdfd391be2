"""Running a service: :func:`serve`, the process entry point (until SIGTERM or a crashed task;
the log line ``<service>: serving`` is what ``up`` and the bench wait for). The FastStream ASGI
app (the operations endpoints) is served by uvicorn (:class:`AsgiServer`, bound first: a busy
port is a warning, the service runs without its endpoints).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Iterator
from typing import Literal, Protocol, Self

import uvicorn
from starlette.types import ASGIApp

from services.shared.platform.logs import configure_logging
from services.shared.platform.settings import Settings
from services.shared.platform.store.lease import StoppedAsStandby

log = logging.getLogger(__name__)

Lifespan = Literal["auto", "on", "off"]


class Started:
    """``async with``: started on entry (stopped again if that fails), stopped on exit."""

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


class _EmbeddedServer(uvicorn.Server):
    """uvicorn's server without its signal handlers: the embedding process owns SIGINT/SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port); OSError if taken."""
    infos = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE | socket.AI_NUMERICSERV
    )
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    family, _type, _proto, _name, address = infos[0]
    dualstack = family == socket.AF_INET6 and host == "::" and socket.has_dualstack_ipv6()
    return socket.create_server(address, family=family, backlog=128, dualstack_ipv6=dualstack)


class AsgiServer(Started):
    """``app`` served by uvicorn on ``host:port`` until :meth:`stop`; ``url`` once started."""

    graceful_timeout = 3  # seconds open responses get to finish once stopping
    stop_timeout = 30.0  # seconds of stopping in all before what is left is cancelled

    def __init__(
        self,
        app: ASGIApp,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        name: str = "http",
        lifespan: Lifespan = "auto",
    ) -> None:
        self.app = app
        self.host = host
        self.requested_port = port
        self.name = name
        self.lifespan: Lifespan = lifespan
        self._socket: socket.socket | None = None
        self._server: _EmbeddedServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._port: int | None = None

    @property
    def port(self) -> int:
        """The port listened on (the one taken when 0 was asked), also after :meth:`stop`."""
        if self._port is None:
            raise RuntimeError(f"{self.name}: HTTP server not started")
        return self._port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        """Bind (OSError when the port is taken), then serve; returns once uvicorn listens."""
        self._socket = bind(self.host, self.requested_port)
        self._port = int(self._socket.getsockname()[1])
        config = uvicorn.Config(
            self.app,
            lifespan=self.lifespan,
            log_config=None,  # the process configured logging (logs.py)
            log_level="warning",
            access_log=False,
            server_header=False,
            ws="none",
            timeout_graceful_shutdown=self.graceful_timeout,
        )
        server = self._server = _EmbeddedServer(config)
        self._task = asyncio.create_task(
            self._serve(server, self._socket), name=f"{self.name}-http"
        )
        while not server.started:
            if self._task.done():
                await self._task  # raises what stopped it
                raise RuntimeError(f"{self.name}: the HTTP server stopped while starting")
            await asyncio.sleep(0.01)
        log.info("%s: HTTP on %s", self.name, self.url)

    async def _serve(self, server: _EmbeddedServer, sock: socket.socket) -> None:
        try:
            await server.serve(sockets=[sock])
        except SystemExit:  # uvicorn exits when the app's lifespan startup fails
            raise RuntimeError(
                f"{self.name}: the HTTP app failed to start (see the log above)"
            ) from None

    async def stop(self) -> None:
        """Stop listening, let open responses finish (``graceful_timeout``), run the app's
        lifespan shutdown; after ``stop_timeout`` in all, cancel what is left."""
        server, task, sock = self._server, self._task, self._socket
        self._server = self._task = None
        if server is not None and task is not None:
            server.should_exit = True
            try:
                await asyncio.wait_for(asyncio.shield(task), self.stop_timeout)
            except TimeoutError:
                server.force_exit = True
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            except Exception:
                log.exception("%s: HTTP server failed", self.name)
        if sock is not None:
            sock.close()


async def start_endpoints(app: ASGIApp, settings: Settings) -> AsgiServer | None:
    """The process's operations endpoints (``app``) on ``PB_HTTP_PORT``; None when no port
    is set or the port is busy (a warning: the process runs without its endpoints)."""
    if settings.http_port is None:
        return None
    server = AsgiServer(
        app,
        settings.http_host,
        settings.http_port,
        name=settings.service,
        lifespan="off",  # a service's lifespan runs in KafkaService.start, HTTP or not
    )
    try:
        await server.start()
    except OSError as error:
        log.warning(
            "%s: no HTTP endpoints (%s:%s: %s); set PB_HTTP_PORT_%s to a free port",
            settings.service,
            settings.http_host,
            settings.http_port,
            error,
            settings.service.upper(),
        )
        await server.stop()
        return None
    return server


class Host(Protocol):
    """What :func:`run_host` runs: a service (``faststream.KafkaService``), or a partitioned
    process (``cells.CellHost``)."""

    @property
    def name(self) -> str: ...

    @property
    def stopping(self) -> asyncio.Event: ...

    @property
    def failed(self) -> bool: ...

    async def start(self) -> None: ...

    async def wait_ready(self, timeout: float) -> None: ...

    async def stop(self) -> None: ...


async def run_host(host: Host, ready_timeout: float) -> int:
    """Run ``host`` until SIGTERM/SIGINT (or a crashed task); returns the process exit code
    (0 also when it stopped as a standby, before it ever wrote)."""
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):  # where the loop can have signal handlers
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, host.stopping.set)
    try:
        try:
            await host.start()
        except StoppedAsStandby as stopped:
            log.info("%s", stopped)
            return 0
        if not host.stopping.is_set():  # else stopped while starting (a standby, a crash)
            try:
                await host.wait_ready(ready_timeout)
            except TimeoutError as error:
                log.warning("%s; serving anyway", error)
            # The line below is what `punto-banco up` waits for: keep its wording.
            log.info("%s: serving", host.name)
            await host.stopping.wait()
    finally:
        await host.stop()
    return 1 if host.failed else 0


def serve(service: Host, settings: Settings) -> int:
    """Process entry point of a service (its ``KafkaService``)."""
    configure_logging(settings)
    return asyncio.run(run_host(service, ready_timeout=60))
