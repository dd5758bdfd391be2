"""Shared runtime of the punto-banco services: settings, store, outbox relay, consumer, runner.

See /tmp/pb/PLATFORM.md (and each module's docstring) for the API a service builds on.
"""

from services.shared.platform.application import ServiceApplication, UnitOfWork
from services.shared.platform.consumer import (
    BatchHandler,
    Delivery,
    Subscription,
    per_message,
    with_unit_of_work,
)
from services.shared.platform.messages import envelope
from services.shared.platform.relay import EventMapper, OutboxRelay
from services.shared.platform.runner import (
    ServiceContext,
    ServiceDefinition,
    ServiceHost,
    run_service,
    serve,
)
from services.shared.platform.sealing import seal_store
from services.shared.platform.settings import Settings, SettingsError

__all__ = [
    "BatchHandler",
    "Delivery",
    "EventMapper",
    "OutboxRelay",
    "ServiceApplication",
    "ServiceContext",
    "ServiceDefinition",
    "ServiceHost",
    "Settings",
    "SettingsError",
    "Subscription",
    "UnitOfWork",
    "envelope",
    "per_message",
    "run_service",
    "seal_store",
    "serve",
    "with_unit_of_work",
]
