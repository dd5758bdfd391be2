"""Settlement as a running service: bets and table events in, bet events out.

``punto-banco serve settlement`` runs :func:`build_service` on the platform:
the consumer applies each fetched batch of one partition (a flood of PlaceBet,
or dealing's events) in ONE transaction with its tracking record, and the
outbox relay publishes BET_EVENTS (one BetSettled per bet of a settled coup).
"""

from __future__ import annotations

from collections.abc import Sequence

from eventsourcing.persistence import Tracking

from contracts import BET_COMMANDS, TABLE_EVENTS
from services.platform import (
    BatchHandler,
    Delivery,
    ServiceDefinition,
    Settings,
    Subscription,
)
from services.settlement.application import SettlementApplication
from services.settlement.messages import to_messages


def batch_handler(app: SettlementApplication) -> BatchHandler:
    def handle(deliveries: Sequence[Delivery], tracking: Tracking) -> None:
        app.handle_batch([delivery.message for delivery in deliveries], tracking)

    return handle


def _subscriptions(app: SettlementApplication) -> Sequence[Subscription]:
    # Dealing's events first: should the platform apply one fetch's partitions in this
    # order, a coup's BettingOpened is applied before the bets that answer it.
    return [
        Subscription(TABLE_EVENTS, batch_handler(app)),
        Subscription(BET_COMMANDS, batch_handler(app)),
    ]


def _application(env: dict[str, str]) -> SettlementApplication:
    return SettlementApplication(env=env)


def build_service(settings: Settings) -> ServiceDefinition[SettlementApplication]:
    """The settlement service on the platform (``settings`` are the service's own)."""
    return ServiceDefinition(
        name="settlement",
        application=_application,
        to_messages=to_messages,
        subscriptions=_subscriptions,
    )
