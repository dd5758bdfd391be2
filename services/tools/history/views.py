"""The views of tables, shoes, coups and bet books, as the facts the services record give them.

Plain records, filled by :class:`~services.tools.history.project.Projector` from either
feed: the stored rows (:mod:`~services.tools.history.from_store`, complete and sealed) or
the messages on Kafka (:mod:`~services.tools.history.from_messages`, where what Kafka does
not carry is ``None``: a shoe's order before its reveal, a settlement's outcome). Nothing
here is taken from the services' code.

Operators (B2B): a bet is known by (operator, bet id). The views key bets, bettors and
settled or refunded lines by :func:`bet_key`: the bet id itself for the house's (the default
operator: the views of a one-operator deployment are unchanged), ``<operator>/<bet id>`` for
the others'. A coup's settlement is recorded per operator; the views join those parts into
one :class:`Settlement` (or :class:`Refund`) of the coup.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from services.shared.facts.dealing import CoupResolvedFact
from services.shared.facts.settlement import HOUSE, CorrectedLine, RefundLine, SettledLine


def bet_key(operator: str, bet_id: str) -> str:
    """How the views know an operator's bet (or bettor): one to one, since an operator's
    name holds no ``/`` (a house bet id with a ``/`` gets the prefix too)."""
    if operator == HOUSE and "/" not in bet_id:
        return bet_id
    return f"{operator}/{bet_id}"


Limits = dict[str, dict[str, int]]
"""bet type -> {"minimum": ..., "maximum": ...} in minor units."""


class TableSettings(NamedTuple):
    decks: int
    paytable: str
    currency: str
    limits: Limits
    betting_window_ms: int = 0
    cut_card_from_end: int = 0


@dataclass(slots=True)
class TableView:
    table_id: str
    settings: TableSettings
    opened_at: str
    coups: list[str] = field(default_factory=list)
    closed_at: str | None = None
    close_reason: str = ""


class Burn(NamedTuple):
    shown: str
    burned: list[str]
    next_position: int
    notification_id: int


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


class Read(NamedTuple):
    """One read of a studio table's device, as its shoe took it (``ReadTaken``): a card at
    ``position``, a signal or a button (``position`` None), or kept while held (``held``)."""

    seq: int
    what: str
    card: str | None
    button: str | None
    last_seq: int | None
    position: int | None
    held: bool
    waited_ms: int | None
    read_at: str
    notification_id: int


class StudioHold(NamedTuple):
    """A studio shoe held (``Held``): why, and the read that caused it. ``coup_id``: the
    coup being dealt then (the next to ask for cards, when it held between coups)."""

    reason: str
    detail: str
    seq: int | None
    coup_id: str | None
    notification_id: int


class StudioDecision(NamedTuple):
    """A supervisor's decision a studio shoe carried out: ``clear`` (``CoupCleared``: a
    voided coup put aside, the next card at ``position``) or ``correct`` (``CardsAccepted``:
    the coup's ``cards`` not read, taken from ``position`` on); both lift a hold."""

    kind: str
    coup_id: str
    cards: list[str]
    position: int
    notification_id: int


class StudioClosed(NamedTuple):
    """A studio shoe finished (``StudioShoeClosed``): every card read, by position."""

    cards: list[str]
    cards_dealt: int
    at: str
    notification_id: int


@dataclass(slots=True)
class Studio:
    """What only a studio shoe records: its device's reads, its holds, its close (no
    commitment, no reveal: its cards are what the device read)."""

    after_seq: int | None  # the reads taken start after this device sequence number
    reads: list[Read] = field(default_factory=list)
    holds: list[StudioHold] = field(default_factory=list)
    decisions: list[StudioDecision] = field(default_factory=list)
    closed: StudioClosed | None = None
    coup_id: str | None = None  # the coup being dealt (asked for cards, not confirmed)


@dataclass(slots=True)
class ShoeView:
    """A shoe as the shoe service recorded it (``order``/``salt``: None until the reveal
    when read from Kafka, which publishes them only then, and when read from a store that
    keeps them encrypted; only the reveal gives them). A studio table's shoe has ``studio``
    (its reads) and no commitment, order or reveal."""

    table_id: str
    shoe_id: str
    decks: int
    order: list[str] | None
    salt: str | None
    commitment: str
    scheme: str
    cut_card_index: int
    card_count: int
    shuffled_at: str
    notification_id: int
    burn: Burn | None = None
    draws: list[Draw] = field(default_factory=list)
    reveal: Reveal | None = None
    cut_card_position: int | None = None  # where the cut card came out
    studio: Studio | None = None  # a studio table's shoe (no commitment: ``scheme`` empty)

    def handed_out(self) -> list[tuple[int, str]]:
        """(position, card) for every card out of the shoe: shown, burned, drawn."""
        out: list[tuple[int, str]] = []
        if self.burn is not None:
            out.append((0, self.burn.shown))
            out.extend((1 + i, card) for i, card in enumerate(self.burn.burned))
        for draw in self.draws:
            out.extend((draw.first_position + i, card) for i, card in enumerate(draw.cards))
        return out

    @property
    def cards_out(self) -> int:
        """Positions out of the shoe (shown, burned and drawn)."""
        out = 0 if self.burn is None else self.burn.next_position
        for draw in self.draws:
            out = max(out, draw.first_position + len(draw.cards))
        return out


class Dealt(NamedTuple):
    side: str
    card: str
    position: int
    index_in_hand: int
    notification_id: int


class Resolution(NamedTuple):
    fact: CoupResolvedFact
    at: str
    notification_id: int


class Void(NamedTuple):
    supervisor_id: str
    reason: str
    was_resolved: bool
    at: str
    notification_id: int
    authorization: str | None = None
    """The supervisor's signed decision (stored voids; the messages do not carry it)."""
    fact_version: int = 1
    """The stored fact's version: 1 before voids were signed, 2 with a decision."""


class Correction(NamedTuple):
    """A resolved coup's result corrected by a supervisor (``CoupCorrected``)."""

    correction_id: str
    supervisor_id: str
    reason: str
    player_cards: tuple[str, ...]
    banker_cards: tuple[str, ...]
    player_total: int
    banker_total: int
    outcome: str
    at: str
    notification_id: int
    authorization: str | None = None
    """The supervisor's signed decision (stored corrections; the messages do not carry it)."""

    @classmethod
    def of(cls, source: Any, at: str, nid: int, authorization: str | None) -> Correction:
        """From a stored ``CoupCorrectedFact`` or a ``CoupCorrected`` message."""
        return cls(
            str(source.correction_id),
            str(source.supervisor_id),
            str(source.reason),
            tuple(source.player_cards),
            tuple(source.banker_cards),
            int(source.player_total),
            int(source.banker_total),
            str(source.outcome),
            at,
            nid,
            authorization,
        )

    @property
    def cards(self) -> tuple[str, ...]:
        """The corrected cards in dealing order: P, B, P, B, P3, B3."""
        player, banker = self.player_cards, self.banker_cards
        return (player[0], banker[0], player[1], banker[1], *player[2:], *banker[2:])


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
    resolutions: list[Resolution] = field(default_factory=list)  # more than one: a fault
    voids: list[Void] = field(default_factory=list)
    corrections: list[Correction] = field(default_factory=list)  # in the order decided

    @property
    def resolved(self) -> Resolution | None:
        return self.resolutions[0] if self.resolutions else None


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


@dataclass(slots=True)
class Settlement:
    """One settlement of a coup's bets. From Kafka: ``staked``/``paid`` are None until its
    CoupSettled is seen, and the outcome and pairs are never published (None)."""

    outcome: str | None
    player_pair: bool | None
    banker_pair: bool | None
    lines: list[SettledLine]
    staked: int | None
    paid: int | None
    at: str
    notification_id: int
    bets: int | None = None  # as its CoupSettled declares (stored: the lines)
    house_result: int | None = None  # as its CoupSettled declares (stored: staked - paid)
    operators: list[str] = field(default_factory=list)  # whose parts (totals) are in
    pending: set[str] = field(default_factory=set)  # Kafka: lines in, totals not yet


class Refund(NamedTuple):
    supervisor_id: str
    reason: str
    lines: list[RefundLine]
    refunded: int | None  # None: read from Kafka, its CoupRefunded not seen yet
    at: str
    notification_id: int
    operators: tuple[str, ...] = (HOUSE,)  # whose parts are in


@dataclass(slots=True)
class SettlementCorrection:
    """A correction of a settled coup's result as settlement paid it: a line per bet whose
    result or payout changed (``BetCorrected``), every operator's together."""

    correction_id: str
    lines: list[CorrectedLine]
    at: str
    notification_id: int


@dataclass(slots=True)
class BookView:
    """The bets of one coup as settlement recorded them."""

    table_id: str
    coup_id: str
    paytable: str
    currency: str
    limits: Limits
    opened_at: str
    notification_id: int
    closes_at: str = ""  # the coup's betting deadline, as the book recorded it
    closed_at: str | None = None  # when settlement recorded dealing's BettingClosed
    closed_by: str | None = None  # when dealing closed betting (stores that record it)
    marks: dict[str, str] = field(default_factory=dict)  # operator -> its close mark's time
    accepted: dict[str, Accepted] = field(default_factory=dict)
    rejected: dict[str, Rejected] = field(default_factory=dict)
    settlements: list[Settlement] = field(default_factory=list)
    refunds: list[Refund] = field(default_factory=list)
    corrections: list[SettlementCorrection] = field(default_factory=list)
    late: list[str] = field(default_factory=list)  # bets accepted after betting closed
    twice: list[str] = field(default_factory=list)  # bet ids accepted a second time
    # Checked as the bets are read (one pass): the table's terms per bet type, the side
    # (Player/Banker) each bettor backed, the stakes per bet type, and the accepted bets
    # that broke the terms (judged again, with the rules' reason, by the audit's checks).
    bounds: dict[str, tuple[int, int]] = field(default_factory=dict)
    sides: dict[str, str] = field(default_factory=dict)
    staked: dict[str, int] = field(default_factory=dict)
    suspect: list[str] = field(default_factory=list)


@dataclass
class History:
    """Everything read: shoes, tables, coups, bet books and the desk's refusals."""

    shoes: dict[tuple[str, str], ShoeView] = field(default_factory=dict)
    tables: dict[str, TableView] = field(default_factory=dict)
    coups: dict[tuple[str, str], CoupView] = field(default_factory=dict)
    books: dict[tuple[str, str], BookView] = field(default_factory=dict)
    desk_rejections: dict[str, dict[str, Rejected]] = field(default_factory=dict)
    owners: dict[bytes, tuple[str, str | None, str | None]] = field(default_factory=dict)
    """originator id -> (table, shoe, coup) of the aggregate: locates tampered rows."""
    events: dict[str, int] = field(default_factory=dict)  # per store

    def forget_coup(self, table_id: str, coup_id: str) -> None:
        """Drop a coup and its book (a reader that keeps a bounded window)."""
        self.coups.pop((table_id, coup_id), None)
        self.books.pop((table_id, coup_id), None)
        table = self.tables.get(table_id)
        if table is not None and coup_id in table.coups:
            table.coups.remove(coup_id)

    def forget_shoe(self, table_id: str, shoe_id: str) -> None:
        """Drop a shoe (a reader that keeps a bounded window)."""
        self.shoes.pop((table_id, shoe_id), None)
