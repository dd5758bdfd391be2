"""Retired facts still found in old stores: read by the read side, written by no service.

Their fields are those the readers use; the rows may hold more.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from services.shared.facts.base import Fact


@dataclass(frozen=True)
class BookBetAcceptedFact(Fact):
    """One accepted bet per event (an early bet book): read as a one-line BetsAnswered."""

    STORED_TOPIC: ClassVar[str] = "services.settlement.books:BetBook.BetAccepted"
    bet_id: str
    bettor_id: str
    bet_type: str
    amount: int | str
    currency: str


@dataclass(frozen=True)
class BookBetRejectedFact(Fact):
    """One refused bet per event (an early bet book)."""

    STORED_TOPIC: ClassVar[str] = "services.settlement.books:BetBook.BetRejected"
    bet_id: str
    bettor_id: str
    bet_type: str
    amount: int | str
    reason_code: str
    message: str


@dataclass(frozen=True)
class DeskBetHeldFact(Fact):
    """One bet held for a coup not open yet (before held bets were recorded as BetsHeld
    lines; settlement still replays it)."""

    STORED_TOPIC: ClassVar[str] = "services.settlement.desk:BetDesk.BetHeld"
    table_id: str
    coup_id: str
    bet_id: str
    bettor_id: str
    bet_type: str
    amount: str
    currency: str
    placed_at: datetime


LEGACY_FACTS: tuple[type[Fact], ...] = (BookBetAcceptedFact, BookBetRejectedFact, DeskBetHeldFact)
