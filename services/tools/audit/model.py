"""The history the auditor rebuilds from the three stores: shoes, tables, coups, bet books.

Plain records, filled by :mod:`services.tools.audit.decode` from the stored events'
own fields; nothing here is taken from the services' code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple


class Draw(NamedTuple):
    coup_id: str
    request_id: str
    first_position: int
    cards: list[str]
    notification_id: int


class Reveal(NamedTuple):
    order: list[str]
    salt: str
    commitment: str
    cards_dealt: int
    at: str
    notification_id: int


@dataclass(slots=True)
class ShoeView:
    """A shoe as the shoe service recorded it."""

    table_id: str
    shoe_id: str
    decks: int
    order: list[str]
    salt: str
    commitment: str
    scheme: str
    cut_card_index: int
    shuffled_at: str
    notification_id: int
    burn: tuple[str, list[str], int, int] | None = None  # shown, burned, next position, nid
    draws: list[Draw] = field(default_factory=list)
    reveal: Reveal | None = None


class TableSettings(NamedTuple):
    decks: int
    paytable: str
    currency: str
    limits: dict[str, dict[str, int]]


class Dealt(NamedTuple):
    side: str
    card: str
    position: int
    index_in_hand: int
    notification_id: int


class Void(NamedTuple):
    supervisor_id: str
    reason: str
    was_resolved: bool
    at: str
    notification_id: int


@dataclass(slots=True)
class CoupView:
    """A coup as dealing recorded it."""

    table_id: str
    coup_id: str
    coup_number: int
    shoe_id: str
    opened_at: str
    closes_at: str
    settings: TableSettings | None
    notification_id: int
    betting_closed_at: str | None = None
    dealt: list[Dealt] = field(default_factory=list)
    resolved: dict[str, Any] | None = None
    resolved_at: str | None = None
    resolved_nid: int | None = None
    voids: list[Void] = field(default_factory=list)


@dataclass(slots=True)
class TableView:
    table_id: str
    settings: TableSettings
    opened_at: str
    coups: list[str] = field(default_factory=list)
    closed_at: str | None = None
    close_reason: str = ""


class Accepted(NamedTuple):
    bettor_id: str
    bet_type: str
    amount: int
    currency: str
    at: str
    notification_id: int
    placed_at: str | None = None  # when the bet was placed (stores that record it)


class Rejected(NamedTuple):
    bettor_id: str
    bet_type: str
    amount: str
    reason_code: str
    message: str
    at: str
    notification_id: int


class Settlement(NamedTuple):
    outcome: str
    player_pair: bool
    banker_pair: bool
    lines: list[list[Any]]  # [bet_id, bettor_id, bet_type, result, stake, payout, returned]
    staked: int
    paid: int
    at: str
    notification_id: int


class Refund(NamedTuple):
    supervisor_id: str
    reason: str
    lines: list[list[Any]]  # [bet_id, bettor_id, stake, adjustment]
    refunded: int
    at: str
    notification_id: int


@dataclass(slots=True)
class BookView:
    """The bets of one coup as settlement recorded them."""

    table_id: str
    coup_id: str
    paytable: str
    currency: str
    limits: dict[str, dict[str, int]]
    opened_at: str
    notification_id: int
    closes_at: str = ""  # the coup's betting deadline, as the book recorded it
    closed_at: str | None = None  # when settlement recorded dealing's BettingClosed
    closed_by: str | None = None  # when dealing closed betting (stores that record it)
    accepted: dict[str, Accepted] = field(default_factory=dict)
    rejected: dict[str, Rejected] = field(default_factory=dict)
    settlements: list[Settlement] = field(default_factory=list)
    refunds: list[Refund] = field(default_factory=list)
    late: list[str] = field(default_factory=list)  # bets accepted after betting closed
    twice: list[str] = field(default_factory=list)  # bet ids accepted a second time
    # Checked as the bets are read (one pass): the table's terms per bet type, the side
    # (Player/Banker) each bettor backed, the stakes per bet type, and the accepted bets
    # that broke the terms (judged again, with the rules' reason, by the checks).
    bounds: dict[str, tuple[int, int]] = field(default_factory=dict)
    sides: dict[str, str] = field(default_factory=dict)
    staked: dict[str, int] = field(default_factory=dict)
    suspect: list[str] = field(default_factory=list)


@dataclass
class History:
    """Everything read from the three stores."""

    shoes: dict[tuple[str, str], ShoeView] = field(default_factory=dict)
    tables: dict[str, TableView] = field(default_factory=dict)
    coups: dict[tuple[str, str], CoupView] = field(default_factory=dict)
    books: dict[tuple[str, str], BookView] = field(default_factory=dict)
    desk_rejections: dict[str, dict[str, Rejected]] = field(default_factory=dict)
    owners: dict[bytes, tuple[str, str | None, str | None]] = field(default_factory=dict)
    """originator id -> (table, shoe, coup) of the aggregate: locates tampered rows."""
    events: dict[str, int] = field(default_factory=dict)  # per store
