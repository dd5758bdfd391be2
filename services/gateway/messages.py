"""The gateway's stored events -> the contract messages its relay publishes.

A bet that goes to settlement (``Bet.Placed``) is one ``PlaceBet`` on the operator's
bet-commands topic, keyed by its table id (``contracts.topics_for``); its ``event_id`` derives
from the stored event, so a PlaceBet republished after a crash is the same message (and
settlement answers a resend of a bet id with its first answer). Nothing else is published but
what the platform adds (incidents, seal anchors).
"""

from __future__ import annotations

from functools import singledispatch

from contracts import Message, PlaceBet
from services.gateway.domain import Bet
from services.shared.platform.relay import one


@singledispatch
def to_messages(event: object) -> list[Message]:
    """The contract messages to publish for one stored domain event (often none)."""
    return []


to_messages.register(Bet.Placed, one(PlaceBet))
