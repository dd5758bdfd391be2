"""Contract messages <-> the shoe's Application and domain events.

Inbound: ``apply_command`` turns ShuffleShoe / DrawCards / CloseShoe into
Application calls inside the runtime's unit of work.

Outbound: ``to_messages`` turns each stored domain event into the messages
published on ``punto-banco.shoe-events``. Note what is NOT published: the
``Shuffled`` event's order and salt stay in the private store until the shoe
closes (ShoeShuffled carries only the commitment); ``ShoeClosed`` reveals them.
One ``CardsDrawn`` event becomes one CardDrawn per card, and a CutCardReached
just before the CardDrawn of the first card behind the cut card.
"""

from __future__ import annotations

import logging
from typing import Any

from contracts import (
    CardDrawn,
    CardsBurned,
    CloseShoe,
    CutCardReached,
    DrawCards,
    Message,
    PositionedCard,
    ShoeClosed,
    ShoeShuffled,
    ShuffleShoe,
)
from services.shared.platform.application import UnitOfWork
from services.shared.platform.messages import envelope
from services.shoe.application import ShoeApplication
from services.shoe.domain import Shoe

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
            uow=uow,
            **ids,
        )
        log.info(
            "table %s: shoe %s shuffled (%d decks)",
            message.table_id,
            message.shoe_id,
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
    else:  # pragma: no cover - the topic admits only the three commands
        raise TypeError(f"the shoe service does not handle {type(message).__name__}")


def to_messages(event: Any) -> list[Message]:
    """The contract messages published for one stored shoe event."""
    common = {
        "table_id": event.table_id,
        "shoe_id": event.shoe_id,
        "causation_id": event.causation_id,
        "correlation_id": event.correlation_id,
    }
    if isinstance(event, Shoe.Shuffled):
        return [
            ShoeShuffled(
                **envelope(event),
                **common,
                decks=event.decks,
                card_count=len(event.order),
                commitment=event.commitment,
                commitment_scheme=event.commitment_scheme,
                cut_card_index=event.cut_card_index,
            )
        ]
    if isinstance(event, Shoe.CardsBurned):
        return [
            CardsBurned(
                **envelope(event),
                **common,
                shown_card=event.shown_card,
                burned=[
                    PositionedCard(position=1 + i, card=card)
                    for i, card in enumerate(event.burned_cards)
                ],
                next_position=event.next_position,
            )
        ]
    if isinstance(event, Shoe.CardsDrawn):
        messages: list[Message] = []
        for i, card in enumerate(event.cards):
            position = event.first_position + i
            if event.cut_card_position is not None and position == max(
                event.cut_card_position, event.first_position
            ):
                messages.append(_cut_card(event, len(messages), common))
            messages.append(
                CardDrawn(
                    **envelope(event, len(messages)),
                    **common,
                    coup_id=event.coup_id,
                    request_id=event.request_id,
                    position=position,
                    card=card,
                )
            )
        if event.cut_card_position is not None and not any(
            isinstance(m, CutCardReached) for m in messages
        ):  # the shoe ran out before reaching the cut card
            messages.append(_cut_card(event, len(messages), common))
        return messages
    if isinstance(event, Shoe.Closed):
        return [
            ShoeClosed(
                **envelope(event),
                **common,
                order=event.order,
                salt=event.salt,
                commitment=event.commitment,
                cards_dealt=event.cards_dealt,
            )
        ]
    return []


def _cut_card(event: Shoe.CardsDrawn, index: int, common: dict[str, Any]) -> CutCardReached:
    return CutCardReached(
        **envelope(event, index),
        **common,
        coup_id=event.coup_id,
        position=event.cut_card_position,
    )
