"""A small HTTP/1.1 server on loopback: the services' probes and metrics, and the dashboard.

Standard library only (asyncio streams): GET and HEAD, one request per
connection, plain responses or server-sent event streams. It binds loopback
addresses only (:func:`ensure_loopback`): these pages are for the operators on
the machine (or a local Prometheus), never for the network.

Each service's endpoints (:func:`service_routes`, started by ``ServiceHost``
when ``settings.http_port`` is not None):

- ``/health``  200 while the process runs (``{"status": "alive"}``);
- ``/ready``   200 when the broker answers a metadata request AND the event store
  answers a query AND the consumer has its partitions AND none of them is stopped
  (``stops.py``: a handler failing on an internal message); else 503 with each check,
  ``handling`` naming each stopped partition, its record and the error;
- ``/metrics`` Prometheus text format (see :mod:`services.shared.platform.metrics`);
- ``/asyncapi`` the service's AsyncAPI 3.0 document (JSON), ``/asyncapi.html`` readable.

Ports (:mod:`services.shared.platform.settings`): ``PB_HTTP_PORT_<SERVICE>`` or
``PB_HTTP_PORT``; defaults shoe 8101, dealing 8102, settlement 8103 (the
dashboard 8100); ``off`` disables it, ``0`` takes any free port. A port already
in use is logged as a warning and the service runs without its HTTP endpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import ipaddress
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

if TYPE_CHECKING:
    from services.shared.platform.runner import ServiceHost

log = logging.getLogger(__name__)

MAX_REQUEST_HEAD = 16 * 1024
READY_TIMEOUT = 3.0

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def ensure_loopback(host: str) -> str:
    """``host`` if it is a loopback address (127.0.0.0/8, ::1, localhost); else ValueError."""
    if host == "localhost":
        return host
    try:
        if ipaddress.ip_address(host).is_loopback:
            return host
    except ValueError:
        pass
    raise ValueError(
        f"HTTP endpoints bind loopback addresses only (127.0.0.1, ::1), not {host!r}; "
        "put a reverse proxy in front to publish them"
    )


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, data: object, status: int = 200) -> Response:
        body = json.dumps(data, indent=1, sort_keys=False, default=str).encode()
        return cls(status, body, "application/json")

    @classmethod
    def text(cls, text: str, status: int = 200) -> Response:
        return cls(status, text.encode())

    @classmethod
    def html(cls, text: str, status: int = 200) -> Response:
        return cls(status, text.encode(), "text/html; charset=utf-8")


@dataclass(frozen=True, slots=True)
class EventStream:
    """A server-sent events response: each item of ``events`` is (event name, data text)."""

    events: AsyncIterator[tuple[str, str]]
    retry_ms: int = 2000


Handler = Callable[[Request], Awaitable[Response | EventStream]]


class HttpServer:
    """Serve ``routes`` (exact paths) on ``host:port`` (loopback; port 0 = any free port)."""

    def __init__(
        self,
        routes: Mapping[str, Handler],
        host: str = "127.0.0.1",
        port: int = 0,
        name: str = "http",
    ) -> None:
        self.routes = dict(routes)
        self.host = ensure_loopback(host)
        self.requested_port = port
        self.name = name
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        if self._server is None or not self._server.sockets:
            raise RuntimeError(f"{self.name}: HTTP server not started")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, self.host, self.requested_port, reuse_address=True
        )
        log.info("%s: HTTP on %s", self.name, self.url)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            await self._handle(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("%s: request failed", self.name)
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        if len(head) > MAX_REQUEST_HEAD:
            await _write(writer, Response.text("request too large", 400), head_only=False)
            return
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, _version = lines[0].split(" ", 2)
        except ValueError:
            await _write(writer, Response.text("bad request line", 400), head_only=False)
            return
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                key, value = line.split(":", 1)
                headers[key.strip().lower()] = value.strip()
        parts = urlsplit(target)
        request = Request(method.upper(), parts.path or "/", dict(parse_qsl(parts.query)), headers)
        if request.method not in ("GET", "HEAD"):
            await _write(writer, Response.text("only GET and HEAD", 405), head_only=False)
            return
        handler = self.routes.get(request.path)
        if handler is None:
            await _write(writer, Response.text(f"no page {request.path}", 404), head_only=False)
            return
        try:
            result = await handler(request)
        except Exception as error:
            log.exception("%s: %s failed", self.name, request.path)
            result = Response.text(f"error: {error!r}", 500)
        if isinstance(result, EventStream):
            await _stream(writer, result)
        else:
            await _write(writer, result, head_only=request.method == "HEAD")


async def _write(writer: asyncio.StreamWriter, response: Response, head_only: bool) -> None:
    reason = _REASONS.get(response.status, "Unknown")
    headers = {
        "Content-Type": response.content_type,
        "Content-Length": str(len(response.body)),
        "Cache-Control": "no-store",
        "Connection": "close",
        **response.headers,
    }
    head = f"HTTP/1.1 {response.status} {reason}\r\n" + "".join(
        f"{key}: {value}\r\n" for key, value in headers.items()
    )
    writer.write(head.encode("latin-1") + b"\r\n")
    if not head_only:
        writer.write(response.body)
    await writer.drain()


async def _stream(writer: asyncio.StreamWriter, stream: EventStream) -> None:
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
        b"Cache-Control: no-store\r\nConnection: close\r\nX-Accel-Buffering: no\r\n\r\n"
        + f"retry: {stream.retry_ms}\n\n".encode()
    )
    await writer.drain()
    async for event, data in stream.events:
        payload = "".join(f"data: {line}\n" for line in data.split("\n"))
        writer.write(f"event: {event}\n{payload}\n".encode())
        await writer.drain()


# ---- the services' endpoints -------------------------------------------------------------


class ReadinessChecks:
    """The real checks behind ``/ready``: Kafka answers a metadata request, the store a query."""

    def __init__(self, host: ServiceHost[Any]) -> None:
        self.host = host
        self._client: Any = None

    async def broker(self) -> str | None:
        """None if the broker answered, else why not."""
        from aiokafka.client import AIOKafkaClient

        try:
            if self._client is None:
                client = AIOKafkaClient(
                    bootstrap_servers=self.host.settings.kafka_bootstrap_servers,
                    client_id=f"pb-{self.host.settings.service}-ready",
                    request_timeout_ms=int(READY_TIMEOUT * 1000),
                )
                await asyncio.wait_for(client.bootstrap(), READY_TIMEOUT)
                self._client = client
            metadata = await asyncio.wait_for(self._client.fetch_all_metadata(), READY_TIMEOUT)
            if not metadata.brokers():
                raise RuntimeError("no broker in the cluster metadata")
            return None
        except Exception as error:
            await self.close()
            return f"Kafka at {self.host.settings.kafka_bootstrap_servers}: {error!r}"

    async def store(self) -> str | None:
        try:
            app = self.host.app
            await asyncio.wait_for(
                asyncio.to_thread(app.recorder.max_notification_id), READY_TIMEOUT
            )
            return None
        except Exception as error:
            return f"event store ({self.host.settings.describe_store()}): {error!r}"

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), READY_TIMEOUT)


def service_routes(host: ServiceHost[Any], readiness: ReadinessChecks) -> dict[str, Handler]:
    """The routes of one service's HTTP endpoint (see the module docstring)."""
    service = host.settings.service
    started = time.time()
    asyncapi_cache: dict[str, str] = {}

    async def health(request: Request) -> Response:
        return Response.json(
            {"status": "alive", "service": service, "uptime_s": round(time.time() - started, 1)}
        )

    async def ready(request: Request) -> Response:
        broker, store = await asyncio.gather(readiness.broker(), readiness.store())
        consumer = host.consumer
        partitions = handling = None
        if consumer is not None and not consumer.ready.is_set():
            partitions = "no Kafka partitions assigned yet"
        if consumer is not None and len(consumer.stops):
            handling = "; ".join(stopped.describe() for stopped in consumer.stops)
        stopping = "stopping" if host.stopping.is_set() else None
        checks = {
            "broker": broker or "ok",
            "store": store or "ok",
            "partitions": partitions or "ok",
            "handling": handling or "ok",
            "running": stopping or "ok",
        }
        ok = not (broker or store or partitions or handling or stopping)
        return Response.json(
            {"status": "ready" if ok else "not ready", "service": service, "checks": checks},
            200 if ok else 503,
        )

    async def metrics(request: Request) -> Response:
        body, content_type = await host.metrics.render(host)
        return Response(200, body, content_type)

    def document() -> str:
        if "json" not in asyncapi_cache:
            asyncapi_cache["json"] = service_asyncapi(
                service, host.settings.kafka_bootstrap_servers, host.settings.topic_prefix
            )
        return asyncapi_cache["json"]

    async def asyncapi(request: Request) -> Response:
        text = await asyncio.to_thread(document)
        return Response(200, text.encode(), "application/json")

    async def asyncapi_html(request: Request) -> Response:
        text = await asyncio.to_thread(document)
        return Response.html(asyncapi_page(json.loads(text)))

    return {
        "/health": health,
        "/ready": ready,
        "/metrics": metrics,
        "/asyncapi": asyncapi,
        "/asyncapi.json": asyncapi,
        "/asyncapi.html": asyncapi_html,
    }


def service_asyncapi(
    service: str, bootstrap_servers: str = "127.0.0.1:9092", topic_prefix: str = ""
) -> str:
    """The AsyncAPI document of one service's topics (all services' for ``"system"``)."""
    from services.shared.platform.asyncapi import SYSTEM, asyncapi_json

    system = SYSTEM if service == "system" else {service: SYSTEM[service]}
    return asyncapi_json(bootstrap_servers, topic_prefix, system=system)


def asyncapi_page(document: Mapping[str, Any]) -> str:
    """A self-contained, readable HTML rendering of an AsyncAPI 3.0 document (no scripts)."""
    info = document.get("info", {})
    esc = html.escape
    parts = [
        "<!doctype html><meta charset=utf-8>",
        f"<title>{esc(str(info.get('title', 'AsyncAPI')))}</title>",
        "<style>body{font:15px/1.45 system-ui,sans-serif;max-width:70em;margin:2em auto;"
        "padding:0 1em}pre{background:#f4f4f4;padding:.6em;overflow:auto;font-size:12px}"
        "h2{border-bottom:1px solid #ccc}code{background:#f4f4f4}</style>",
        f"<h1>{esc(str(info.get('title', '')))} {esc(str(info.get('version', '')))}</h1>",
        f"<p>{esc(str(info.get('description', '')))}</p>",
        "<h2>Operations</h2><ul>",
    ]
    for name, operation in sorted(document.get("operations", {}).items()):
        channel = str(operation.get("channel", {}).get("$ref", "")).rsplit("/", 1)[-1]
        parts.append(
            f"<li><b>{esc(str(operation.get('action', '')))}</b> "
            f"<code>{esc(channel)}</code> — {esc(str(operation.get('summary', name)))}</li>"
        )
    parts.append("</ul><h2>Channels</h2>")
    for name, channel in sorted(document.get("channels", {}).items()):
        messages = ", ".join(sorted(channel.get("messages", {})))
        parts.append(
            f"<h3><code>{esc(str(channel.get('address', name)))}</code></h3>"
            f"<p>{esc(str(channel.get('description', '')))}</p><p>Messages: {esc(messages)}</p>"
        )
    parts.append("<h2>Message schemas</h2>")
    schemas = document.get("components", {}).get("schemas", {})
    for name, schema in sorted(schemas.items()):
        parts.append(
            f"<details><summary><code>{esc(name)}</code></summary>"
            f"<pre>{esc(json.dumps(schema, indent=2))}</pre></details>"
        )
    return "".join(parts)
