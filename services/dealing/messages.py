"""Dealing's stored domain events -> the contract messages the relay publishes.

Each published fact becomes its contract by field name (see
``services.shared.platform.relay.publishing``); the table below says which contract each
event class makes. Internal bookkeeping events (a coup started on the table, the shuffle
noted...) publish nothing. A message's ``event_id`` is derived from the stored event's
originator id and version, so a message republished after a crash has the same id.
"""

from __future__ import annotations

from functools import singledispatch

from contracts import (
    AcceptCards,
    BettingClosed,
    BettingOpened,
    CardDealt,
    ClearCoup,
    CloseBook,
    CloseShoe,
    CommandRejected,
    CoupCorrected,
    CoupResolved,
    CoupVoided,
    DrawCards,
    Message,
    OpenBook,
    ShuffleShoe,
    TableClosed,
    TableOpened,
)
from services.dealing.domain import CommandRejections, Coup, Table
from services.shared.platform.relay import attr, one, publish_one, shaped


@singledispatch
def to_messages(event: object) -> list[Message]:
    """The contract messages to publish for one stored domain event (often none)."""
    return []


to_messages.register(Table.Opened, one(TableOpened))
to_messages.register(Table.Reopened, one(TableOpened))
to_messages.register(Table.ShoeRequested, one(ShuffleShoe))
to_messages.register(Table.ShoeFinished, one(CloseShoe))
to_messages.register(Table.StudioCoupCleared, one(ClearCoup))
to_messages.register(Table.StudioCoupCorrected, one(AcceptCards))
to_messages.register(Table.Closed, one(TableClosed))
to_messages.register(Coup.CardsRequested, one(DrawCards))
to_messages.register(Coup.CardDealt, one(CardDealt))
to_messages.register(Coup.Resolved, one(CoupResolved))
to_messages.register(Coup.Voided, one(CoupVoided))
to_messages.register(Coup.Corrected, one(CoupCorrected))
to_messages.register(
    CommandRejections.CommandRejected, one(CommandRejected, causation_id=attr("command_id"))
)


@to_messages.register(Coup.BettingOpened)
@shaped(BettingOpened, OpenBook)
def _betting_opened(event: Coup.BettingOpened) -> list[Message]:
    """BettingOpened, and OpenBook for the bets' partition (the relay sends bet-commands
    records first: the mark is there before any bettor can read the coup's id)."""
    opened = publish_one(BettingOpened, event)
    if event.terms is None:  # recorded before OpenBook existed
        return [opened]
    terms = event.terms
    book = publish_one(
        OpenBook,
        event,
        1,
        paytable=terms["paytable"],
        limits=terms["limits"],
        currency=terms["currency"],
    )
    return [opened, book]


@to_messages.register(Coup.BettingClosed)
@shaped(BettingClosed, CloseBook)
def _betting_closed(event: Coup.BettingClosed) -> list[Message]:
    return [publish_one(BettingClosed, event), publish_one(CloseBook, event, 1)]
