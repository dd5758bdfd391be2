"""Settlement's stored facts: bet books (``services.settlement.books``), refused bets with no
book (``.desk``), and the line records of their batch fields.

A line record is a ``NamedTuple`` stored as a JSON array in its field order: never reorder
its fields, only append (readers accept older, shorter lines and keep longer ones whole).

Operators (B2B): a bet is one operator's (the operator of the bet-commands topic it came by,
``contracts.topics``), and its identity is (operator, bet id). The facts about bets name their
``operator`` (one fact per operator: the lines of a fact are that operator's bets); facts
recorded before operators existed are the house's (``HOUSE``, by their upcasters).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, NamedTuple
from uuid import UUID

from services.shared.facts.base import Fact

HOUSE = "house"
"""The default operator (``contracts.HOUSE``): whose every fact recorded before operators is."""

Limits = dict[str, dict[str, int]]
"""Per bet type name: {"minimum": int, "maximum": int} in minor units."""


class AnswerLine(NamedTuple):
    """One answered bet: accepted when ``reason_code`` is None (``amount`` is then the stake,
    an int: one ``BetAccepted``), else refused (``amount`` as received, text: one
    ``BetRejected``)."""

    bet_id: str
    bettor_id: str
    bet_type: str  # contracts.BetTypeName when accepted; as received when refused
    amount: int | str
    currency: str
    reason_code: str | None  # contracts.RejectionCode
    message: str


class SettledLine(NamedTuple):
    """One bet of a coup's settlement: one ``BetSettled`` (with the event's table, coup and
    currency)."""

    bet_id: str
    bettor_id: str
    bet_type: str  # contracts.BetTypeName
    result: str  # contracts.BetResultName
    stake: int
    payout: int
    returned: int


class RefundLine(NamedTuple):
    """One bet of a voided coup: one ``BetRefunded`` (``refunded`` is the stake;
    ``adjustment`` is relative to what the bet was paid already)."""

    bet_id: str
    bettor_id: str
    stake: int
    adjustment: int


class CorrectedLine(NamedTuple):
    """One bet whose result or payout a correction changed: one ``BetCorrected``
    (``difference``: the corrected amount returned minus the one returned until now)."""

    bet_id: str
    bettor_id: str
    bet_type: str  # contracts.BetTypeName
    stake: int
    previous_result: str  # contracts.BetResultName
    previous_payout: int
    result: str
    payout: int
    difference: int


class DrawnCard(NamedTuple):
    """A card the shoe drew for a coup, as settlement read it (internal, not published)."""

    position: int
    card: str
    appended: str | None  # ISO 8601: when the broker appended its record (None: unknown)


class HeldLine(NamedTuple):
    """A bet held for a coup not open yet (earlier versions of settlement; internal)."""

    coup_id: str
    bet_id: str
    bettor_id: str
    bet_type: str
    amount: str  # as received
    currency: str
    placed_at: str  # ISO 8601: when the broker appended the PlaceBet


@dataclass(frozen=True)
class BookOpenedFact(Fact):
    """Dealing's OpenBook applied: betting on the coup starts, with these terms. Version 1
    (opened from BettingOpened) knew neither ``coup_number`` nor ``shoe_id``."""

    STORED_TOPIC: ClassVar[str] = "services.settlement.books:BetBook.Opened"
    class_version: ClassVar[int] = 3
    table_id: str
    coup_id: str
    paytable: str
    limits: Limits
    currency: str
    closes_at: datetime
    coup_number: int | None
    shoe_id: str | None
    operator: str  # whose OpenBook opened the book (the others': BookOpenedFor)
    operators: list[str]  # whose CloseBook the book waits for before it closes

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state.update(coup_number=None, shoe_id=None)  # opened from BettingOpened, before

    @staticmethod
    def upcast_v2_v3(state: dict[str, Any]) -> None:
        state.update(operator=HOUSE, operators=[HOUSE])  # before operators: the house alone


@dataclass(frozen=True)
class BookClosedFact(Fact):
    """Dealing closed betting at ``closed_at`` (its CloseBook's append time). Published as
    ``BetsClosed`` (the accepted ``bets`` and their ``staked`` total), which lets dealing
    deal; version 1 knew no time, version 2 nothing to publish."""

    STORED_TOPIC: ClassVar[str] = "services.settlement.books:BetBook.BettingClosed"
    class_version: ClassVar[int] = 3
    closed_at: datetime | None
    table_id: str | None
    coup_id: str | None
    bets: int
    staked: int
    currency: str | None

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["closed_at"] = None  # recorded before the time was kept: closed for all

    @staticmethod
    def upcast_v2_v3(state: dict[str, Any]) -> None:
        # Recorded before BetsClosed existed: nothing to publish for it.
        state.update(table_id=None, coup_id=None, bets=0, staked=0, currency=None)


@dataclass(frozen=True)
class OperatorClosedFact(Fact):
    """An operator's CloseBook read at ``closed_at`` (its append time) while the book waits
    for other operators' marks: that operator's later bets are too late. The last operator's
    mark closes the book (:class:`BookClosedFact`). Not published (the audit reads it)."""

    STORED_TOPIC: ClassVar[str] = "services.settlement.books:BetBook.OperatorClosed"
    operator: str
    closed_at: datetime


@dataclass(frozen=True)
class BetsAnsweredFact(Fact):
    """The answers to the bets of one transaction (a line each); ``placed_at[i]`` (ISO 8601
    or None) is when line i's bet was placed. Version 1 did not keep it."""

    STORED_TOPIC: ClassVar[str] = "services.settlement.books:BetBook.BetsAnswered"
    class_version: ClassVar[int] = 3
    table_id: str
    coup_id: str
    lines: list[AnswerLine]
    placed_at: list[str | None]
    operator: str  # whose bets the lines are (version 2: the house's)

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["placed_at"] = [None] * len(state["lines"])  # recorded before it was kept

    @staticmethod
    def upcast_v2_v3(state: dict[str, Any]) -> None:
        state["operator"] = HOUSE


@dataclass(frozen=True)
class CoupSettledFact(Fact):
    """Every accepted bet of a coup settled: ``BetSettled`` per line, then ``CoupSettled``
    (``staked``, ``paid`` and the house's result)."""

    STORED_TOPIC: ClassVar[str] = "services.settlement.books:BetBook.CoupSettled"
    class_version: ClassVar[int] = 2
    table_id: str
    coup_id: str
    outcome: str  # contracts.OutcomeName
    player_pair: bool
    banker_pair: bool
    lines: list[SettledLine]
    staked: int
    paid: int
    currency: str
    operator: str  # one fact per operator of the book: its bets (version 1: the house's)

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["operator"] = HOUSE


@dataclass(frozen=True)
class CoupRefundedFact(Fact):
    """Every accepted bet of a voided coup refunded: ``BetRefunded`` per line, then
    ``CoupRefunded``."""

    STORED_TOPIC: ClassVar[str] = "services.settlement.books:BetBook.CoupRefunded"
    class_version: ClassVar[int] = 2
    table_id: str
    coup_id: str
    supervisor_id: str
    reason: str
    lines: list[RefundLine]
    refunded: int
    currency: str
    operator: str  # one fact per operator of the book: its bets (version 1: the house's)

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["operator"] = HOUSE


@dataclass(frozen=True)
class SettlementCorrectedFact(Fact):
    """A settled coup's result corrected (dealing's ``CoupCorrected``): its bets settled again
    on the corrected result, one line per bet whose result or payout changed
    (``BetCorrected`` each, then ``CoupSettlementCorrected``); ``outcome`` and the pairs are
    the corrected result's, ``staked`` and ``paid`` the coup's totals after the correction."""

    STORED_TOPIC: ClassVar[str] = "services.settlement.books:BetBook.SettlementCorrected"
    class_version: ClassVar[int] = 1
    table_id: str
    coup_id: str
    correction_id: UUID
    outcome: str  # contracts.OutcomeName
    player_pair: bool
    banker_pair: bool
    lines: list[CorrectedLine]
    difference: int
    staked: int
    paid: int
    currency: str
    operator: str  # one fact per operator of the book: its bets


@dataclass(frozen=True)
class DeskRefusedFact(BetsAnsweredFact):
    """The refusals of one transaction that have no open book to record them, for one coup id
    and operator, on the table's desk: no such table or coup, or a coup settled or voided (a
    finished book takes nothing more, so a late bet never makes it longer). ``BetRejected``
    per line, as :class:`BetsAnsweredFact`'s lines."""

    STORED_TOPIC: ClassVar[str] = "services.settlement.desk:BetDesk.BetsRefused"
    class_version: ClassVar[int] = 1


@dataclass(frozen=True)
class DeskRejectedFact(Fact):
    """A bet refused with no book to record it (no such table or coup): ``BetRejected``.
    Recorded one per bet before :class:`DeskRefusedFact`; still read. Version 1 did not keep
    ``placed_at``."""

    STORED_TOPIC: ClassVar[str] = "services.settlement.desk:BetDesk.BetRejected"
    class_version: ClassVar[int] = 3
    table_id: str
    coup_id: str
    bet_id: str
    bettor_id: str
    bet_type: str
    amount: str
    currency: str
    reason_code: str
    message: str
    placed_at: datetime | None
    operator: str  # whose bet (version 2: the house's)

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["placed_at"] = None  # recorded before the time was kept

    @staticmethod
    def upcast_v2_v3(state: dict[str, Any]) -> None:
        state["operator"] = HOUSE


BOOK_FACTS: tuple[type[Fact], ...] = (
    BookOpenedFact,
    BookClosedFact,
    BetsAnsweredFact,
    CoupSettledFact,
    CoupRefundedFact,
    SettlementCorrectedFact,
)
"""The published facts of the bet books (one aggregate per coup)."""

SETTLEMENT_FACTS: tuple[type[Fact], ...] = (
    *BOOK_FACTS,
    OperatorClosedFact,
    DeskRefusedFact,
    DeskRejectedFact,
)
