"""The operations endpoints (Starlette): /health, /ready, /metrics, /asyncapi, and the checks of
/ready (:class:`ServiceReadiness`: the writer lease, the broker, the store, the partitions, no
partition stopped and no stuck store call). Every request's Host header must be an allowed
host (400 otherwise); GET and HEAD only.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from aiokafka.client import AIOKafkaClient
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from services.shared.platform.consumer.processor import BatchProcessor
from services.shared.platform.kafka import client_options
from services.shared.platform.settings import Settings, check_allowed_hosts
from services.shared.platform.store.application import AppWorker, ServiceApplication
from services.shared.platform.store.lease import WriterLease

log = logging.getLogger(__name__)

READY_TIMEOUT = 3.0
NO_STORE = {"Cache-Control": "no-store"}
ASYNCAPI_PATHS = ("/asyncapi", "/asyncapi.json", "/asyncapi.html")


class Readiness(Protocol):
    """What ``/ready`` asks the running service: each check's name -> None when fine, else why."""

    async def checks(self) -> Mapping[str, str | None]: ...


MetricsText = Callable[[], bytes | Awaitable[bytes]]
"""The Prometheus exposition; a callable that does I/O (e.g. refreshes gauges) is async."""


def ops_app(
    checks: Readiness,
    metrics: MetricsText,
    asyncapi: Callable[[], str],
    *,
    service: str,
    allowed_hosts: Sequence[str],
    ready_timeout: float = READY_TIMEOUT,
) -> Starlette:
    """The operations app of ``service`` (see the module docstring)."""
    hosts = check_allowed_hosts(allowed_hosts)
    if not hosts:
        raise ValueError(f"{service}: no allowed host: every request would be refused")
    started = time.monotonic()
    cache: dict[str, str] = {}

    alive: Callable[[], str | None] | None = getattr(checks, "alive", None)

    async def health(request: Request) -> Response:
        uptime = round(time.monotonic() - started, 1)
        why = alive() if alive is not None else None
        if why is not None:
            body = {"status": "stuck", "service": service, "uptime_s": uptime, "why": why}
            return JSONResponse(body, 503, headers=NO_STORE)
        body = {"status": "alive", "service": service, "uptime_s": uptime}
        return JSONResponse(body, headers=NO_STORE)

    async def ready(request: Request) -> Response:
        results = await _run_checks(checks, ready_timeout)
        ok = all(why is None for why in results.values())
        body = {
            "status": "ready" if ok else "not ready",
            "service": service,
            "checks": {name: why or "ok" for name, why in results.items()},
        }
        return JSONResponse(body, 200 if ok else 503, headers=NO_STORE)

    async def metrics_text(request: Request) -> Response:
        produced = metrics()
        body = await produced if inspect.isawaitable(produced) else produced
        return Response(body, headers={**NO_STORE, "Content-Type": CONTENT_TYPE_LATEST})

    async def document(request: Request) -> Response:
        """The AsyncAPI document, made once in a worker thread: JSON, or a page of it."""
        try:
            if "json" not in cache:
                cache["json"] = await asyncio.to_thread(asyncapi)
        except Exception as error:
            log.exception("%s: the AsyncAPI document failed", service)
            return PlainTextResponse(f"no AsyncAPI document: {error!r}", 500)
        if request.url.path.endswith(".html"):
            return HTMLResponse(asyncapi_page(json.loads(cache["json"])), headers=NO_STORE)
        return Response(cache["json"], media_type="application/json", headers=NO_STORE)

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/ready", ready, methods=["GET"]),
        Route("/metrics", metrics_text, methods=["GET"]),
        *(Route(path, document, methods=["GET"]) for path in ASYNCAPI_PATHS),
    ]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=hosts, www_redirect=False)]
    return Starlette(routes=routes, middleware=middleware)


async def _run_checks(checks: Readiness, timeout: float) -> dict[str, str | None]:
    """The checks' answers; a failure or a time-out of the checks themselves is one more."""
    try:
        return dict(await asyncio.wait_for(checks.checks(), timeout))
    except TimeoutError:
        return {"readiness": f"the checks did not answer within {timeout:g} s"}
    except Exception as error:
        log.warning("readiness checks failed: %r", error)
        return {"readiness": f"the checks failed: {error!r}"}


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


"""Seconds each check may take."""


class RunningService(Protocol):
    """What the checks read of the running service."""

    @property
    def settings(self) -> Settings: ...

    @property
    def app(self) -> ServiceApplication: ...

    @property
    def consumer(self) -> BatchProcessor | None: ...

    @property
    def stopping(self) -> asyncio.Event: ...

    @property
    def lease(self) -> WriterLease: ...

    @property
    def worker(self) -> AppWorker: ...


class ServiceReadiness:
    """The real checks of one running service (see the module docstring)."""

    def __init__(self, service: RunningService) -> None:
        self.service = service
        self._client: AIOKafkaClient | None = None

    def alive(self) -> str | None:
        """Why the process should be restarted (a store call that never returns), else None."""
        return self.service.worker.stuck()

    async def checks(self) -> dict[str, str | None]:
        standby = self.service.lease.standby_reason()
        broker: str | None
        store: str | None
        if standby is not None:  # the store is not opened: nothing else to check yet
            broker, store = await self.broker(), "not opened by a standby"
        else:
            broker, store = await asyncio.gather(self.broker(), self.store())
        consumer = self.service.consumer
        partitions = handling = None
        if consumer is not None and not consumer.ready.is_set():
            partitions = "no Kafka partitions assigned yet"
        if consumer is not None and len(consumer.stops):
            handling = "; ".join(stopped.describe() for stopped in consumer.stops)
        stuck = self.service.worker.stuck()
        if stuck is not None:
            handling = stuck if handling is None else f"{stuck}; {handling}"
        return {
            "writer": standby,
            "broker": broker,
            "store": store,
            "partitions": partitions,
            "handling": handling,
            "running": "stopping" if self.service.stopping.is_set() else None,
        }

    async def broker(self) -> str | None:
        """None if the broker answered, else why not."""
        settings = self.service.settings
        try:
            if self._client is None:
                client = AIOKafkaClient(
                    **client_options(settings),
                    client_id=f"pb-{settings.service}-ready",
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
            return f"Kafka at {settings.kafka_bootstrap_servers}: {error!r}"

    async def store(self) -> str | None:
        """None if the event store answered a query, else why not."""
        try:
            app = self.service.app
            await asyncio.wait_for(
                asyncio.to_thread(app.recorder.max_notification_id), READY_TIMEOUT
            )
            return None
        except Exception as error:
            return f"event store ({self.service.settings.describe_store()}): {error!r}"

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), READY_TIMEOUT)
