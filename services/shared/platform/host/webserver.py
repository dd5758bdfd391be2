"""Serve an ASGI app (Starlette) with uvicorn inside the running event loop.

The services' operations endpoints (``endpoints.ops_app``) and the dashboard use it. The
process (``punto-banco serve``, ``up``, the tests) owns the event loop and the signals, so
uvicorn here installs no signal handlers and leaves logging alone; the listening socket is bound
here first, so a busy port is an ``OSError`` the caller handles (uvicorn itself would exit the
process). ``host`` is any address (``PB_HTTP_HOST``): ``0.0.0.0`` or ``::`` serve every interface.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from types import TracebackType
from typing import Literal

import uvicorn
from starlette.types import ASGIApp

log = logging.getLogger(__name__)

Lifespan = Literal["auto", "on", "off"]


class _EmbeddedServer(uvicorn.Server):
    """uvicorn's server without its signal handlers: the embedding process owns SIGINT/SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port); OSError if taken.

    A name (``localhost``) binds its first IPv4 address if it has one, else its first address.
    """
    infos = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE | socket.AI_NUMERICSERV
    )
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    family, _type, _proto, _name, address = infos[0]
    dualstack = family == socket.AF_INET6 and host == "::" and socket.has_dualstack_ipv6()
    return socket.create_server(address, family=family, backlog=128, dualstack_ipv6=dualstack)


class AsgiServer:
    """``app`` served by uvicorn on ``host:port`` until :meth:`stop`; ``url`` once started."""

    def __init__(
        self,
        app: ASGIApp,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        name: str = "http",
        lifespan: Lifespan = "auto",
        graceful_timeout: int = 3,
        stop_timeout: float = 30.0,
    ) -> None:
        self.app = app
        self.host = host
        self.requested_port = port
        self.name = name
        self.lifespan: Lifespan = lifespan
        self.graceful_timeout = graceful_timeout
        self.stop_timeout = stop_timeout
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

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

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

    async def __aenter__(self) -> AsgiServer:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()
