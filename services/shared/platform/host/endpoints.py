"""The operations endpoints (Starlette): /health, /ready, /metrics, /asyncapi. /ready asks a
:class:`Readiness` (a service's: ``service.py``; a partitioned process's: ``cells``). Every
request's Host header must be an allowed host (400 otherwise); GET and HEAD only.
"""

from __future__ import annotations

import asyncio
import html
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from services.shared.platform.settings import check_allowed_hosts

log = logging.getLogger(__name__)

READY_TIMEOUT = 3.0
"""Seconds /ready's checks may take (and each of a service's checks)."""
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
        body = {"status": "alive", "service": service, "uptime_s": uptime}
        if why is not None:
            body |= {"status": "stuck", "why": why}
        return JSONResponse(body, 200 if why is None else 503, headers=NO_STORE)

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
