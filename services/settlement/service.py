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

Operators (B2B): settlement reads every configured operator's bet-commands topic
(``PB_OPERATORS``; ``contracts.bet_commands_topic``) and a bet's operator is the topic it was
read from; its answers and settlement go to that operator's bet-events topic.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from eventsourcing.persistence import Tracking

from contracts import (
    BOOK_EVENTS,
    HOUSE,
    SHOE_EVENTS,
    TABLE_EVENTS,
    BetCommand,
    PlaceBet,
    ShoeEvent,
    TableEvent,
    bet_commands_topic,
    bet_events_topic,
    topic_operator,
)
from services.settlement.application import SettlementApplication
from services.settlement.messages import to_messages
from services.shared.platform.consumer import BatchHandler, Delivery, Subscription
from services.shared.platform.host import KafkaService, ServiceDefinition
from services.shared.platform.settings import Settings


def batch_handler(app: SettlementApplication, operator: str = HOUSE) -> BatchHandler:
    """A subscription's handler; ``operator``: whose bet-commands topic it reads."""

    def handle(deliveries: Sequence[Delivery], tracking: Tracking) -> None:
        received = datetime.now(UTC)
        app.handle_batch(
            [delivery.message for delivery in deliveries],
            tracking,
            [placed_at(delivery, received) for delivery in deliveries],
            # where each was read: a fact's is its incidents' evidence, a bet needs none
            [None if type(d.message) is PlaceBet else d.origin for d in deliveries],
            operator,
            [delivery.refusal for delivery in deliveries],
        )

    return handle


def placed_at(delivery: Delivery, received: datetime) -> datetime:
    """When a record was appended (a bet placed): the broker's time, else when received."""
    return delivery.appended_at or received


def _subscriptions(
    app: SettlementApplication, operators: Sequence[str] = (HOUSE,)
) -> Sequence[Subscription]:
    # The platform applies one fetch's partitions in this order: the shoe's cards before
    # dealing's claim of a result (a claim whose cards are not in yet waits for them).
    return [
        Subscription(SHOE_EVENTS, batch_handler(app)),
        Subscription(TABLE_EVENTS, batch_handler(app)),
        *(
            Subscription(topic, batch_handler(app, _operator(topic)))
            for topic in _bet_commands(operators)
        ),
    ]


def _bet_commands(operators: Sequence[str]) -> list[str]:
    return [bet_commands_topic(operator) for operator in operators]


def _operator(topic: str) -> str:
    found = topic_operator(topic)
    assert found is not None, topic
    return found[1]


def _application(env: dict[str, str]) -> SettlementApplication:
    return SettlementApplication(env=env)


def build_service(settings: Settings) -> KafkaService[SettlementApplication]:
    """The settlement service: its broker's subscriber and publishers, and what it runs."""
    service = KafkaService(
        ServiceDefinition(
            name="settlement",
            application=_application,
            to_messages=to_messages,
            subscriptions=lambda app: _subscriptions(app, settings.operators),
        ),
        settings,
        description="Settlement: takes the bets, and settles each coup's book.",
    )

    @service.subscriber(
        SHOE_EVENTS,
        TABLE_EVENTS,
        *_bet_commands(settings.operators),
        description="The shoe's cards, dealing's table events (both signed) and each "
        "operator's bets with dealing's signed OpenBook / CloseBook marks among them: a "
        "fetched batch of a partition is applied in one transaction.",
    )
    async def settlement_inputs(batch: list[ShoeEvent | TableEvent | BetCommand]) -> None:
        # The raw records of one fetch (the type says what they carry): see consumer.py.
        await service.consume(batch)

    for operator in settings.operators:
        service.publisher(
            bet_events_topic(operator),
            description=f"Each bet of operator {operator} accepted or rejected, and settled "
            "(one BetSettled per bet of a settled coup, then the operator's CoupSettled).",
        )
    service.publisher(
        BOOK_EVENTS,
        description="BetsClosed: a coup's book is closed, its cards may be dealt.",
    )
    return service
