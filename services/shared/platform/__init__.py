"""Shared runtime of the punto-banco services: each service is a FastStream application.

A service's ``service.py`` builds a :class:`KafkaService` (``service_app.py``) from its
:class:`ServiceDefinition` (``definition.py``), declares its one batch subscriber and its
publishers on it; :func:`serve` (``runner.py``) runs it. Underneath: the event store and its
units of work (``application.py``), the batch processor applying each fetch exactly once
(``consumer.py``, ``batch_processor.py``), the outbox relay (``relay.py``), settings,
keys and signatures, tamper-evident seals, metrics and the operations endpoints.
"""

from services.shared.platform.consumer.consumer import (
    BatchHandler,
    Delivery,
    Subscription,
    per_message,
    with_unit_of_work,
)
from services.shared.platform.host.definition import ServiceContext, ServiceDefinition
from services.shared.platform.host.runner import ServiceHost, run_service, serve
from services.shared.platform.host.service_app import KafkaService
from services.shared.platform.relay.messages import envelope
from services.shared.platform.relay.relay import EventMapper, OutboxRelay
from services.shared.platform.settings import Settings, SettingsError
from services.shared.platform.store.application import ServiceApplication, UnitOfWork
from services.shared.platform.store.sealing import seal_store

__all__ = [
    "BatchHandler",
    "Delivery",
    "EventMapper",
    "KafkaService",
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
