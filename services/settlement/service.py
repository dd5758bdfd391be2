"""Settlement as a FastStream application: bets and table events in, bet events out.

``punto-banco serve settlement`` runs :func:`build_service` on the platform: its one
batch subscriber reads the shoe's cards, dealing's table events and the bets, and applies
each fetched batch of one partition (a flood of PlaceBet with dealing's OpenBook / CloseBook
marks among them, dealing's table events, or the shoe's cards) in ONE transaction with its
tracking record, and the outbox relay publishes BET_EVENTS (one BetSettled per bet of a
settled coup) and BOOK_EVENTS.

A record's time (a bet's ``placed_at``, a CloseBook's closing time) is the broker's
append time (``Delivery.appended_at``: the bet-commands topic is created with
``message.timestamp.type=LogAppendTime``); a record with a producer timestamp
(CreateTime, e.g. a topic created elsewhere and not altered) counts from when
settlement received it. The client's ``occurred_at`` is never used.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from eventsourcing.persistence import Tracking

from contracts import (
    BET_COMMANDS,
    BET_EVENTS,
    BOOK_EVENTS,
    SHOE_EVENTS,
    TABLE_EVENTS,
    BetCommand,
    ShoeEvent,
    TableEvent,
)
from services.settlement.application import SettlementApplication
from services.settlement.messages import to_messages
from services.shared.platform import (
    BatchHandler,
    Delivery,
    KafkaService,
    ServiceDefinition,
    Settings,
    Subscription,
)
from services.shared.platform.incidents import Origin


def batch_handler(app: SettlementApplication) -> BatchHandler:
    def handle(deliveries: Sequence[Delivery], tracking: Tracking) -> None:
        received = datetime.now(UTC)
        app.handle_batch(
            [delivery.message for delivery in deliveries],
            tracking,
            [placed_at(delivery, received) for delivery in deliveries],
            [Origin(d.topic, d.partition, d.offset) for d in deliveries],
        )

    return handle


def placed_at(delivery: Delivery, received: datetime) -> datetime:
    """When a record was appended (a bet placed): the broker's time, else when received."""
    return delivery.appended_at or received


def _subscriptions(app: SettlementApplication) -> Sequence[Subscription]:
    # The platform applies one fetch's partitions in this order: the shoe's cards before
    # dealing's claim of a result (a claim whose cards are not in yet waits for them).
    return [
        Subscription(SHOE_EVENTS, batch_handler(app)),
        Subscription(TABLE_EVENTS, batch_handler(app)),
        Subscription(BET_COMMANDS, batch_handler(app)),
    ]


def _application(env: dict[str, str]) -> SettlementApplication:
    return SettlementApplication(env=env)


def build_service(settings: Settings) -> KafkaService[SettlementApplication]:
    """The settlement service: its broker's subscriber and publishers, and what it runs."""
    service = KafkaService(
        ServiceDefinition(
            name="settlement",
            application=_application,
            to_messages=to_messages,
            subscriptions=_subscriptions,
        ),
        settings,
        description="Settlement: takes the bets, and settles each coup's book.",
    )

    @service.subscriber(
        SHOE_EVENTS,
        TABLE_EVENTS,
        BET_COMMANDS,
        description="The shoe's cards, dealing's table events (both signed) and the bets "
        "with dealing's signed OpenBook / CloseBook marks among them: a fetched batch of a "
        "partition is applied in one transaction.",
    )
    async def settlement_inputs(batch: list[ShoeEvent | TableEvent | BetCommand]) -> None:
        # The raw records of one fetch (the type says what they carry): see consumer.py.
        await service.consume(batch)

    service.publisher(
        BET_EVENTS,
        description="Each bet accepted or rejected, and settled (one BetSettled per bet of a "
        "settled coup, then CoupSettled).",
    )
    service.publisher(
        BOOK_EVENTS,
        description="BetsClosed: a coup's book is closed, its cards may be dealt.",
    )
    return service
