"""Contract messages <-> the shoe's Application and domain events.

Inbound: ``apply_command`` turns ShuffleShoe / DrawCards / CloseShoe into
Application calls inside the runtime's unit of work.

Outbound: ``to_messages`` turns each stored domain event into the messages
published on ``punto-banco.shoe-events``, by field name (see
``services.shared.platform.relay.publishing``). Note what is NOT published: the
``Shuffled`` event's order and salt stay in the private store, encrypted, until the
shoe closes (ShoeShuffled carries only the commitment); ``ShoeClosed`` reveals them.
One ``CardsDrawn`` event becomes one CardDrawn per card, and a CutCardReached
just before the CardDrawn of the first card behind the cut card.
"""

from __future__ import annotations

import logging
from functools import singledispatch

from contracts import (
    AcceptCards,
    CardDrawn,
    CardsBurned,
    ClearCoup,
    CloseShoe,
    CutCardReached,
    DrawCards,
    Message,
    PositionedCard,
    ShoeClosed,
    ShoeShuffled,
    ShuffleShoe,
    StudioRead,
    StudioShoeClosed,
    StudioShoeOpened,
)
from services.shared.platform.consumer import Delivery
from services.shared.platform.relay import one, publish_one, shaped
from services.shared.platform.store import Evidence, UnitOfWork
from services.shoe.application import ShoeApplication
from services.shoe.domain import Shoe
from services.shoe.studio import StudioShoe

log = logging.getLogger(__name__)


def apply_command(app: ShoeApplication, uow: UnitOfWork, message: Message) -> None:
    """Carry out one shoe command (``message`` from ``punto-banco.shoe-commands``)."""
    ids = {"causation_id": message.event_id, "correlation_id": message.correlation_id}
    if isinstance(message, ShuffleShoe):
        app.shuffle_shoe(
            message.table_id,
            message.shoe_id,
            message.decks,
            message.cut_card_from_end,
            card_source=message.card_source,
            uow=uow,
            **ids,
        )
        log.info(
            "table %s: shoe %s %s (%d decks)",
            message.table_id,
            message.shoe_id,
            "opened for the studio's device" if message.card_source == "studio" else "shuffled",
            message.decks,
        )
    elif isinstance(message, DrawCards):
        fresh = app.draw_cards(
            message.table_id,
            message.shoe_id,
            message.coup_id,
            message.request_id,
            message.count,
            uow=uow,
            **ids,
        )
        log.debug(
            "table %s coup %s: %s %d cards from shoe %s (request %s)",
            message.table_id,
            message.coup_id,
            "drew" if fresh else "already drew",
            message.count,
            message.shoe_id,
            message.request_id,
        )
    elif isinstance(message, CloseShoe):
        if app.close_shoe(message.table_id, message.shoe_id, uow=uow, **ids):
            log.info("table %s: shoe %s closed and revealed", message.table_id, message.shoe_id)
    elif isinstance(message, ClearCoup):
        if app.clear_coup(
            message.table_id, message.shoe_id, message.coup_id, message.reason, uow=uow, **ids
        ):
            log.info(
                "table %s: coup %s voided, its cards put aside in shoe %s",
                message.table_id,
                message.coup_id,
                message.shoe_id,
            )
    elif isinstance(message, AcceptCards):
        if app.accept_cards(
            message.table_id,
            message.shoe_id,
            message.coup_id,
            message.cards,
            message.reason,
            uow=uow,
            **ids,
        ):
            log.info(
                "table %s: coup %s corrected by a supervisor: shoe %s deals on",
                message.table_id,
                message.coup_id,
                message.shoe_id,
            )
    else:  # pragma: no cover - the topics admit only these
        raise TypeError(f"the shoe service does not handle {type(message).__name__}")


def apply_read(app: ShoeApplication, uow: UnitOfWork, delivery: Delivery) -> None:
    """Take one ``StudioRead`` (from ``punto-banco.studio-reads``, signed by the bridge)."""
    read = delivery.message
    if not isinstance(read, StudioRead):  # pragma: no cover - the topic admits only reads
        raise TypeError(f"the shoe service does not handle {type(read).__name__} as a read")
    app.take_read(read, uow=uow, evidence=Evidence.of(read, delivery.origin))


@singledispatch
def to_messages(event: object) -> list[Message]:
    """The contract messages published for one stored shoe event (none for others)."""
    return []


def _burned(event: Shoe.CardsBurned) -> list[PositionedCard]:
    return [PositionedCard(position=1 + i, card=card) for i, card in enumerate(event.burned_cards)]


to_messages.register(Shoe.Shuffled, one(ShoeShuffled))
to_messages.register(Shoe.CardsBurned, one(CardsBurned, burned=_burned))
to_messages.register(Shoe.Closed, one(ShoeClosed))
to_messages.register(StudioShoe.Opened, one(StudioShoeOpened))
to_messages.register(StudioShoe.CardsBurned, one(CardsBurned, burned=_burned))
to_messages.register(StudioShoe.Closed, one(StudioShoeClosed))


@to_messages.register(Shoe.CardsDrawn)
@to_messages.register(StudioShoe.CardsDrawn)
@shaped(CardDrawn, CutCardReached)
def _cards_drawn(event: Shoe.CardsDrawn) -> list[Message]:
    """One CardDrawn per card; CutCardReached just before the first card behind the cut
    card (or after the last, when the shoe ran out before it)."""
    messages: list[Message] = []
    cut = event.cut_card_position
    for i, card in enumerate(event.cards):
        position = event.first_position + i
        if cut is not None and position == max(cut, event.first_position):
            messages.append(publish_one(CutCardReached, event, len(messages), position=cut))
        messages.append(publish_one(CardDrawn, event, len(messages), position=position, card=card))
    if cut is not None and not any(isinstance(m, CutCardReached) for m in messages):
        messages.append(publish_one(CutCardReached, event, len(messages), position=cut))
    return messages
