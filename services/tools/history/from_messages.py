"""Contract messages (Kafka) -> the Projector: the same views as the stored rows give.

Kafka carries the same facts as the stores, cut finer and knowing less: one message per
bet or card (gathered here into the views' batches: a draw, a book's answers, its open
settlement), a shoe's order only when it closes, a settlement without its outcome. A book
is opened by dealing's OpenBook, with the coup's terms; a reader that does not follow the
bets' topic gets it made on its coup's first bet message, with the terms its table had when
the coup opened. A message seen again (the same ``event_id``: a relay may republish after a crash)
changes nothing; ``redeliveries`` counts them. ``notification_id`` in the views is the
message's arrival number.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from functools import singledispatchmethod
from typing import Any
from uuid import UUID

from contracts import (
    BetAccepted,
    BetCorrected,
    BetLimitSpec,
    BetRefunded,
    BetRejected,
    BetsClosed,
    BetSettled,
    BettingClosed,
    BettingOpened,
    CardDealt,
    CardDrawn,
    CardsBurned,
    CoupCorrected,
    CoupRefunded,
    CoupResolved,
    CoupSettled,
    CoupVoided,
    CutCardReached,
    Message,
    OpenBook,
    ShoeClosed,
    ShoeShuffled,
    StudioShoeClosed,
    StudioShoeOpened,
    TableClosed,
    TableOpened,
)
from services.shared.facts.base import fact_from, line_from
from services.shared.facts.dealing import (
    BettingOpenedFact,
    CardDealtFact,
    CoupResolvedFact,
    CoupVoidedFact,
    TableOpenedFact,
    TableReopenedFact,
)
from services.shared.facts.settlement import (
    HOUSE,
    AnswerLine,
    BookOpenedFact,
    CorrectedLine,
    RefundLine,
    SettledLine,
)
from services.shared.facts.shoe import (
    CardsBurnedFact,
    ShoeRevealedFact,
    StudioShoeClosedFact,
    StudioShoeOpenedFact,
)
from services.tools.history.project import Projector
from services.tools.history.views import BookView, History, Limits, Rejected, Void, bet_key


class EventIds:
    """The event ids seen; the oldest forgotten beyond ``limit`` (None: all kept)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self._ids: OrderedDict[UUID, None] = OrderedDict()

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, event_id: UUID) -> None:
        self._ids[event_id] = None
        if self.limit is not None and len(self._ids) > self.limit:
            self._ids.popitem(last=False)


def _limits(limits: Mapping[Any, BetLimitSpec]) -> Limits:
    return {str(name): {"minimum": s.minimum, "maximum": s.maximum} for name, s in limits.items()}


class MessageFeed:
    """Messages into ``history`` (``remember``: how many event ids to keep for spotting
    redeliveries; None keeps them all, for a reader of one run)."""

    def __init__(self, history: History, remember: int | None = None) -> None:
        self.history = history
        self.project = Projector(history, lenient=True)
        self.seen = EventIds(remember)
        self.redeliveries = 0
        self.sequence = 0

    def apply(self, message: Message) -> bool:
        """Take one message in; False when it was seen already (a redelivery)."""
        if message.event_id in self.seen:
            self.redeliveries += 1
            return False
        self.seen.add(message.event_id)
        self.sequence += 1
        self._apply(message, message.occurred_at.isoformat(), self.sequence)
        return True

    def book(self, table_id: str, coup_id: str, at: str = "", nid: int = 0) -> BookView:
        """The coup's book, made on its first bet message with the terms its table had when
        the coup opened (or has now, if the coup was not seen open)."""
        history = self.history
        book = history.books.get((table_id, coup_id))
        if book is None:
            coup = history.coups.get((table_id, coup_id))
            table = history.tables.get(table_id)
            terms = coup.settings if coup is not None and coup.settings is not None else None
            if terms is None and table is not None:
                terms = table.settings
            book = history.books[(table_id, coup_id)] = BookView(
                table_id=table_id,
                coup_id=coup_id,
                paytable="" if terms is None else terms.paytable,
                currency="" if terms is None else terms.currency,
                limits={} if terms is None else terms.limits,
                opened_at=coup.opened_at if coup is not None and coup.opened_at else at,
                notification_id=nid,
                closes_at="" if coup is None else coup.closes_at,
            )
            book.bounds = {
                name: (int(limit["minimum"]), int(limit["maximum"]))
                for name, limit in book.limits.items()
            }
        return book

    def _void(self, table_id: str, coup_id: str) -> Void | None:
        coup = self.history.coups.get((table_id, coup_id))
        return coup.voids[0] if coup is not None and coup.voids else None

    @singledispatchmethod
    def _apply(self, message: Message, at: str, nid: int) -> None:
        """Messages the views do not keep (commands, dead letters, incidents...)."""

    # -- tables ---------------------------------------------------------------------------
    @_apply.register
    def _table_opened(self, m: TableOpened, at: str, nid: int) -> None:
        limits = _limits(m.limits)
        known = self.history.tables.get(m.table_id)
        if known is not None and known.opened_at:
            self.project.table_reopened(fact_from(TableReopenedFact, m, limits=limits))
        else:
            self.project.table_opened(fact_from(TableOpenedFact, m, limits=limits), at)

    @_apply.register
    def _table_closed(self, m: TableClosed, at: str, nid: int) -> None:
        self.project.table_closed(m.table_id, m.reason, at)

    # -- shoes ----------------------------------------------------------------------------
    @_apply.register
    def _shoe_shuffled(self, m: ShoeShuffled, at: str, nid: int) -> None:
        self.project.shoe_shuffled(
            m.table_id,
            m.shoe_id,
            decks=m.decks,
            commitment=m.commitment,
            scheme=m.commitment_scheme,
            cut_card_index=m.cut_card_index,
            card_count=m.card_count,
            order=None,
            salt=None,
            at=at,
            nid=nid,
        )

    @_apply.register
    def _cards_burned(self, m: CardsBurned, at: str, nid: int) -> None:
        burned = [p.card for p in sorted(m.burned, key=lambda p: p.position)]
        self.project.cards_burned(fact_from(CardsBurnedFact, m, burned_cards=burned), nid)

    @_apply.register
    def _card_drawn(self, m: CardDrawn, at: str, nid: int) -> None:
        self.project.card_drawn(
            m.table_id, m.shoe_id, m.coup_id, m.request_id, m.position, m.card, nid
        )

    @_apply.register
    def _cut_card_reached(self, m: CutCardReached, at: str, nid: int) -> None:
        self.project.cut_card_reached(m.table_id, m.shoe_id, m.position)

    @_apply.register
    def _shoe_closed(self, m: ShoeClosed, at: str, nid: int) -> None:
        self.project.shoe_revealed(fact_from(ShoeRevealedFact, m), at, nid)

    @_apply.register
    def _studio_shoe_opened(self, m: StudioShoeOpened, at: str, nid: int) -> None:
        self.project.studio_shoe_opened(fact_from(StudioShoeOpenedFact, m, after_seq=None), at, nid)

    @_apply.register
    def _studio_shoe_closed(self, m: StudioShoeClosed, at: str, nid: int) -> None:
        self.project.studio_shoe_closed(fact_from(StudioShoeClosedFact, m), at, nid)

    # -- coups ----------------------------------------------------------------------------
    @_apply.register
    def _betting_opened(self, m: BettingOpened, at: str, nid: int) -> None:
        fact = fact_from(BettingOpenedFact, m, terms=None, first_position=None)
        self.project.betting_opened(fact, at, nid)

    @_apply.register
    def _betting_closed(self, m: BettingClosed, at: str, nid: int) -> None:
        self.project.betting_closed(m.table_id, m.coup_id, at)

    @_apply.register
    def _card_dealt(self, m: CardDealt, at: str, nid: int) -> None:
        self.project.card_dealt(fact_from(CardDealtFact, m), nid)

    @_apply.register
    def _coup_resolved(self, m: CoupResolved, at: str, nid: int) -> None:
        self.project.coup_resolved(fact_from(CoupResolvedFact, m), at, nid)

    @_apply.register
    def _coup_voided(self, m: CoupVoided, at: str, nid: int) -> None:
        self.project.coup_voided(fact_from(CoupVoidedFact, m, authorization=None), at, nid)

    # -- bets -----------------------------------------------------------------------------
    @_apply.register
    def _open_book(self, m: OpenBook, at: str, nid: int) -> None:
        """Dealing's mark opening a coup's book, with its terms (on the bets' topic: read
        only by those who follow it)."""
        fact = fact_from(
            BookOpenedFact, m, limits=_limits(m.limits), operator=HOUSE, operators=[HOUSE]
        )  # the operators are settlement's to know: the views need them not
        self.project.book_opened(fact, at, nid)

    @_apply.register
    def _bet_accepted(self, m: BetAccepted, at: str, nid: int) -> None:
        line = AnswerLine(m.bet_id, m.bettor_id, m.bet_type, m.amount, m.currency, None, "")
        placed = None if m.placed_at is None else m.placed_at.isoformat()
        book = self.book(m.table_id, m.coup_id, at, nid)
        self.project.bets_answered(book, [line], [placed], at, nid, m.operator)

    @_apply.register
    def _bet_rejected(self, m: BetRejected, at: str, nid: int) -> None:
        """Into the coup's book when its coup or book is known (settlement refused it in the
        book), else the desk's (no such table or coup)."""
        key = (m.table_id, m.coup_id)
        if key in self.history.books or key in self.history.coups:
            line = AnswerLine(
                m.bet_id, m.bettor_id, m.bet_type, m.amount, m.currency, m.reason_code, m.message
            )
            placed = None if m.placed_at is None else m.placed_at.isoformat()
            book = self.book(*key, at, nid)
            self.project.bets_answered(book, [line], [placed], at, nid, m.operator)
        else:
            rejected = Rejected(
                m.bettor_id, m.bet_type, m.amount, m.reason_code, m.message, at, nid
            )
            self.project.desk_rejected(m.table_id, bet_key(m.operator, m.bet_id), rejected)

    @_apply.register
    def _bets_closed(self, m: BetsClosed, at: str, nid: int) -> None:
        self.project.book_closed(self.book(m.table_id, m.coup_id, at, nid), at, None)

    @_apply.register
    def _bet_settled(self, m: BetSettled, at: str, nid: int) -> None:
        book = self.book(m.table_id, m.coup_id, at, nid)
        self.project.settled_line(book, line_from(SettledLine, m), at, nid, m.operator)

    @_apply.register
    def _coup_settled(self, m: CoupSettled, at: str, nid: int) -> None:
        book = self.book(m.table_id, m.coup_id, at, nid)
        totals = (m.bets, m.staked, m.paid, m.house_result)
        self.project.settlement_totals(book, *totals, at, nid, m.operator)

    @_apply.register
    def _bet_refunded(self, m: BetRefunded, at: str, nid: int) -> None:
        book = self.book(m.table_id, m.coup_id, at, nid)
        line = RefundLine(m.bet_id, m.bettor_id, m.stake, m.adjustment)
        void = self._void(m.table_id, m.coup_id)
        self.project.refund_line(book, line, void, at, nid, m.operator)

    @_apply.register
    def _coup_corrected(self, m: CoupCorrected, at: str, nid: int) -> None:
        self.project.coup_corrected(m, at, nid, None)  # the decision is not published

    @_apply.register
    def _bet_corrected(self, m: BetCorrected, at: str, nid: int) -> None:
        book = self.book(m.table_id, m.coup_id, at, nid)
        line = line_from(CorrectedLine, m)
        self.project.settlement_corrected(book, str(m.correction_id), [line], at, nid, m.operator)

    @_apply.register
    def _coup_refunded(self, m: CoupRefunded, at: str, nid: int) -> None:
        book = self.book(m.table_id, m.coup_id, at, nid)
        void = self._void(m.table_id, m.coup_id)
        self.project.refund_total(book, m.refunded, void, at, nid, m.operator)
