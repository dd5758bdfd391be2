"""What the demo's ledger keeps per bet, coup and shoe (plain mutable records)."""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from contracts import (
    BetAccepted,
    BetRefunded,
    BetRejected,
    BetSettled,
    CoupRefunded,
    CoupResolved,
    CoupSettled,
    CoupVoided,
    ShoeClosed,
    TableOpened,
)
from services.dev.demo.bettors import PlannedBet


@dataclass
class BetState:
    bet_id: str
    planned: list[PlannedBet] = field(default_factory=list)
    accepted: BetAccepted | None = None
    first_answer: str | None = None  # "ACCEPTED" or a rejection code
    rejections: dict[UUID, BetRejected] = field(default_factory=dict)
    settlements: dict[UUID, BetSettled] = field(default_factory=dict)
    refunds: dict[UUID, BetRefunded] = field(default_factory=dict)


@dataclass
class CoupState:
    table_id: str
    coup_id: str
    coup_number: int | None = None
    shoe_id: str | None = None
    terms: TableOpened | None = None  # the table's terms when the coup opened
    betting_closed: bool = False
    resolved: CoupResolved | None = None
    resolutions: dict[UUID, CoupResolved] = field(default_factory=dict)
    voided: CoupVoided | None = None
    settled: dict[UUID, CoupSettled] = field(default_factory=dict)
    refunded: dict[UUID, CoupRefunded] = field(default_factory=dict)
    bet_ids: list[str] = field(default_factory=list)


@dataclass
class ShoeState:
    shoe_id: str
    table_id: str
    card_count: int = 0
    cut_card_index: int | None = None
    commitment: str = ""
    cards: dict[int, str] = field(default_factory=dict)  # position -> card (drawn and burned)
    drawn: int = 0
    closed: ShoeClosed | None = None
