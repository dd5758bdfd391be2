"""Dealing as a FastStream application: table commands and shoe events in, table events out.

``punto-banco serve dealing`` runs :func:`build_service` on the platform: its one batch
subscriber reads table commands, the shoe's events and settlement's book events; the
outbox relay publishes the store's events (TABLE_EVENTS, its refusals of table commands on
COMMAND_EVENTS, SHOE_COMMANDS for the shoe, and
OpenBook / CloseBook in the table's partition of every operator's bet-commands topic
(``PB_OPERATORS``: each operator's bets are ordered against the marks in their own
partition), where they mark which bets are in time). The consumer applies TABLE_COMMANDS
and SHOE_EVENTS a fetched batch per transaction (the unit of work checkpoints after each
message, so the published order of events is exactly the order they happened, as with one
transaction per message; 100 tables' coups are dealt with one commit per batch) and
settlement's BOOK_EVENTS a batch per transaction (BetsClosed: after BettingClosed a coup's
cards are asked for only once settlement has closed its book; that topic carries nothing
else, so dealing never reads the flood of bets on the bet-events topics), and the betting
clock closes betting windows. The clock keeps no state of its own: it reads the open coups
from the Application each time, so after a restart it re-arms itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import UTC, datetime

from eventsourcing.persistence import Tracking

from contracts import (
    BOOK_EVENTS,
    COMMAND_EVENTS,
    SHOE_COMMANDS,
    SHOE_EVENTS,
    TABLE_COMMANDS,
    TABLE_EVENTS,
    BetsClosed,
    ShoeEvent,
    TableCommand,
    bet_commands_topic,
)
from services.dealing.application import DealingApplication
from services.dealing.messages import to_messages
from services.shared.platform.consumer import BatchHandler, Delivery, Subscription
from services.shared.platform.host import KafkaService, ServiceContext, ServiceDefinition
from services.shared.platform.settings import Settings

CLOCK_POLL_SECONDS = 0.05
"""How often the betting clock looks for new coups (a deadline itself is met on time)."""


async def betting_clock(ctx: ServiceContext[DealingApplication]) -> None:
    """Close each coup's betting when its window ends."""
    app = ctx.app
    while not ctx.stopping.is_set():
        deadlines = await ctx.call(app.betting_deadlines)
        now = datetime.now(UTC)
        if deadlines and deadlines[0].closes_at <= now:
            await ctx.call(app.close_expired_betting, now)
            continue
        wait = CLOCK_POLL_SECONDS
        if deadlines:
            wait = min(wait, max(0.0, (deadlines[0].closes_at - now).total_seconds()))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ctx.stopping.wait(), timeout=wait)


def batch_handler(app: DealingApplication) -> BatchHandler:
    """Table commands or shoe events, a fetched batch per transaction (in handled order)."""

    def handle(deliveries: Sequence[Delivery], tracking: Tracking) -> None:
        app.handle_batch(
            [delivery.message for delivery in deliveries],
            tracking,
            [delivery.origin for delivery in deliveries],
            [delivery.refusal for delivery in deliveries],
        )

    return handle


def book_events_handler(app: DealingApplication) -> BatchHandler:
    """Settlement's book events (BetsClosed), a batch per transaction."""

    def handle(deliveries: Sequence[Delivery], tracking: Tracking) -> None:
        app.handle_bet_events(
            [delivery.message for delivery in deliveries],
            tracking,
            [delivery.origin for delivery in deliveries],
            [delivery.refusal for delivery in deliveries],
        )

    return handle


def _subscriptions(app: DealingApplication) -> Sequence[Subscription]:
    return [
        Subscription(TABLE_COMMANDS, batch_handler(app)),
        Subscription(SHOE_EVENTS, batch_handler(app)),
        Subscription(BOOK_EVENTS, book_events_handler(app)),
    ]


def _application(env: dict[str, str]) -> DealingApplication:
    return DealingApplication(env=env)


def build_service(settings: Settings) -> KafkaService[DealingApplication]:
    """The dealing service: its broker's subscriber and publishers, and what it runs."""
    service = KafkaService(
        ServiceDefinition(
            name="dealing",
            application=_application,
            to_messages=to_messages,
            subscriptions=_subscriptions,
            tasks=[betting_clock],
        ),
        settings,
        description="Dealing: runs the tables, their coups and their betting windows.",
    )

    @service.subscriber(
        TABLE_COMMANDS,
        SHOE_EVENTS,
        BOOK_EVENTS,
        description="Table commands from outside, the shoe's cards (signed by the shoe) and "
        "settlement's BetsClosed (signed by settlement): a fetched batch of a partition is "
        "applied in one transaction.",
    )
    async def dealing_inputs(batch: list[TableCommand | ShoeEvent | BetsClosed]) -> None:
        # The raw records of one fetch (the type says what they carry): see consumer.py.
        await service.consume(batch)

    service.publisher(
        TABLE_EVENTS,
        description="Each table's life: opened, betting opened and closed, the cards dealt, "
        "the coup resolved (its outcome), closed.",
    )
    service.publisher(
        COMMAND_EVENTS,
        description="CommandRejected: a table command refused, and why; for the senders of "
        "table commands (operator, supervisor), not the bettors' gateways.",
    )
    service.publisher(
        SHOE_COMMANDS,
        description="Dealing's requests to the shoe: shuffle, burn, draw the coup's cards.",
    )
    for operator in settings.operators:
        service.publisher(
            bet_commands_topic(operator),
            description=f"OpenBook / CloseBook: where betting on a coup opens and closes, in "
            f"the table's partition of operator {operator}'s bets (sent and acknowledged "
            "before the events that announce them; the same marks on every operator's topic).",
        )
    return service
