"""Dealing's stored facts: tables (``services.dealing.tables``), coups (``.coups``) and
refused table commands (``.rejections``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar
from uuid import UUID

from services.shared.facts.base import Fact

Limits = dict[str, dict[str, int]]
"""Per bet type name: {"minimum": int, "maximum": int} in minor units."""


@dataclass(frozen=True)
class TableOpenedFact(Fact):
    """A table opened with its settings (``TableOpened``; limits as ``BetLimitSpec``; version 1
    knew no ``card_source``)."""

    STORED_TOPIC: ClassVar[str] = "services.dealing.tables:Table.Opened"
    class_version: ClassVar[int] = 2
    table_id: str
    decks: int
    paytable: str
    limits: Limits
    currency: str
    betting_window_ms: int
    cut_card_from_end: int
    card_source: str

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["card_source"] = "rng"  # opened before studio tables


@dataclass(frozen=True)
class TableReopenedFact(Fact):
    """A closed table opened again, maybe with other settings (also ``TableOpened``)."""

    STORED_TOPIC: ClassVar[str] = "services.dealing.tables:Table.Reopened"
    class_version: ClassVar[int] = 2
    table_id: str
    decks: int
    paytable: str
    limits: Limits
    currency: str
    betting_window_ms: int
    cut_card_from_end: int
    card_source: str

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["card_source"] = "rng"  # opened before studio tables


@dataclass(frozen=True)
class TableClosedFact(Fact):
    """``TableClosed``."""

    STORED_TOPIC: ClassVar[str] = "services.dealing.tables:Table.Closed"
    table_id: str
    reason: str


@dataclass(frozen=True)
class ShoeRequestedFact(Fact):
    """A new shoe asked of the shoe service (the command ``ShuffleShoe``)."""

    STORED_TOPIC: ClassVar[str] = "services.dealing.tables:Table.ShoeRequested"
    class_version: ClassVar[int] = 2
    table_id: str
    shoe_id: str
    decks: int
    cut_card_from_end: int
    card_source: str

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["card_source"] = "rng"  # asked before studio tables


@dataclass(frozen=True)
class StudioCoupClearedFact(Fact):
    """A studio table's coup voided: its shoe is told to put its cards aside (``ClearCoup``)."""

    STORED_TOPIC: ClassVar[str] = "services.dealing.tables:Table.StudioCoupCleared"
    table_id: str
    shoe_id: str
    coup_id: str
    reason: str


@dataclass(frozen=True)
class StudioCoupCorrectedFact(Fact):
    """A held studio coup's cards as a supervisor decided them (``CorrectCoup``): its shoe is
    told to deal them (``AcceptCards``)."""

    STORED_TOPIC: ClassVar[str] = "services.dealing.tables:Table.StudioCoupCorrected"
    table_id: str
    shoe_id: str
    coup_id: str
    cards: list[str]
    reason: str


@dataclass(frozen=True)
class ShoeFinishedFact(Fact):
    """The shoe is done with (the command ``CloseShoe``: the shoe service reveals it)."""

    STORED_TOPIC: ClassVar[str] = "services.dealing.tables:Table.ShoeFinished"
    table_id: str
    shoe_id: str


@dataclass(frozen=True)
class BettingOpenedFact(Fact):
    """A coup starts: ``BettingOpened``, and ``OpenBook`` (its ``terms``: paytable, limits,
    currency) in the bets' partition. ``first_position``: the lowest shoe position its first
    card may have. Version 1 (before OpenBook) knew neither."""

    STORED_TOPIC: ClassVar[str] = "services.dealing.coups:Coup.BettingOpened"
    class_version: ClassVar[int] = 2
    table_id: str
    coup_id: str
    coup_number: int
    shoe_id: str
    closes_at: datetime
    last_of_shoe: bool
    terms: dict[str, Any] | None
    first_position: int | None

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state.update(terms=None, first_position=None)  # recorded before they were kept


@dataclass(frozen=True)
class BettingClosedFact(Fact):
    """Betting on a coup closed: ``BettingClosed``, and ``CloseBook`` in the bets' partition."""

    STORED_TOPIC: ClassVar[str] = "services.dealing.coups:Coup.BettingClosed"
    table_id: str
    coup_id: str


@dataclass(frozen=True)
class CardsRequestedFact(Fact):
    """Cards asked of the shoe (the command ``DrawCards``)."""

    STORED_TOPIC: ClassVar[str] = "services.dealing.coups:Coup.CardsRequested"
    table_id: str
    coup_id: str
    shoe_id: str
    request_id: str
    count: int


@dataclass(frozen=True)
class CardDealtFact(Fact):
    """A card given to a side (``CardDealt``; ``side`` is ``contracts.SideName``)."""

    STORED_TOPIC: ClassVar[str] = "services.dealing.coups:Coup.CardDealt"
    table_id: str
    coup_id: str
    shoe_id: str
    side: str
    card: str
    position: int
    card_index_in_hand: int


@dataclass(frozen=True)
class CoupResolvedFact(Fact):
    """A coup's result as dealing recorded it (``CoupResolved``; ``outcome`` is
    ``contracts.OutcomeName``)."""

    STORED_TOPIC: ClassVar[str] = "services.dealing.coups:Coup.Resolved"
    table_id: str
    coup_id: str
    coup_number: int
    shoe_id: str
    player_cards: list[str]
    banker_cards: list[str]
    player_total: int
    banker_total: int
    outcome: str
    natural: bool
    player_pair: bool
    banker_pair: bool


@dataclass(frozen=True)
class CoupVoidedFact(Fact):
    """A supervisor voided a coup (``CoupVoided``). ``authorization``: the supervisor's signed
    decision dealing verified (``VoidCoup.authorization``, kept for the audit, not published);
    ``supervisor_id`` is its subject. Version 1 (voids before decisions were signed) had none."""

    STORED_TOPIC: ClassVar[str] = "services.dealing.coups:Coup.Voided"
    class_version: ClassVar[int] = 2
    table_id: str
    coup_id: str
    supervisor_id: str
    reason: str
    was_resolved: bool
    authorization: str | None

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["authorization"] = None  # recorded before voids were signed


@dataclass(frozen=True)
class CoupCorrectedFact(Fact):
    """A supervisor corrected a resolved coup's result (``CorrectResult``, published as
    ``CoupCorrected``): its cards, totals and outcome from now on. ``correction_id``: the
    command's id (its decision's ``jti``); ``authorization``: the signed decision dealing
    verified, kept for the audit, not published."""

    STORED_TOPIC: ClassVar[str] = "services.dealing.coups:Coup.Corrected"
    class_version: ClassVar[int] = 1
    table_id: str
    coup_id: str
    correction_id: UUID
    coup_number: int
    shoe_id: str
    player_cards: list[str]
    banker_cards: list[str]
    player_total: int
    banker_total: int
    outcome: str
    natural: bool
    player_pair: bool
    banker_pair: bool
    supervisor_id: str
    reason: str
    authorization: str


@dataclass(frozen=True)
class CommandRejectedFact(Fact):
    """A table command refused (``CommandRejected``, its ``causation_id`` the command's id)."""

    STORED_TOPIC: ClassVar[str] = "services.dealing.rejections:CommandRejections.CommandRejected"
    table_id: str
    command_id: UUID
    command_type: str
    reason_code: str
    message: str


DEALING_FACTS: tuple[type[Fact], ...] = (
    TableOpenedFact,
    TableReopenedFact,
    TableClosedFact,
    ShoeRequestedFact,
    ShoeFinishedFact,
    StudioCoupClearedFact,
    StudioCoupCorrectedFact,
    BettingOpenedFact,
    BettingClosedFact,
    CardsRequestedFact,
    CardDealtFact,
    CoupResolvedFact,
    CoupVoidedFact,
    CoupCorrectedFact,
    CommandRejectedFact,
)
