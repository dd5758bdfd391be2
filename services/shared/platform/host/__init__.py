"""The host: a service as a process (its FastStream app, timers, HTTP endpoints, metrics).

A service's ``service.py`` builds a :class:`KafkaService` from its :class:`ServiceDefinition`
and declares its one batch subscriber and its publishers on it; :func:`serve` runs it until
SIGTERM; ``async with`` it runs inside a running event loop (tests, ``punto-banco up``). The
process answers /health, /ready, /metrics and /asyncapi (:class:`AsgiServer` under uvicorn).
"""

from services.shared.platform.host.endpoints import ops_app
from services.shared.platform.host.faststream import (
    BUSY_COLLECTION,
    GC_THRESHOLDS,
    KafkaService,
    asyncapi_json,
)
from services.shared.platform.host.runner import AsgiServer, Started, serve
from services.shared.platform.host.service import ServiceContext, ServiceDefinition
