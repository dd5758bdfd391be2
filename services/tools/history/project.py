"""The facts -> the views: one method per fact, whichever feed read it.

The :class:`Projector` fills a :class:`~services.tools.history.views.History` from the fact
records of :mod:`services.shared.facts`. Both feeds call it: the stored rows (one fact per
row; a batch such as BetsAnswered answers many bets at once) and the messages on Kafka (one
bet or one card per message, gathered into the same batches by ``card_drawn`` and the
``*_line`` methods). The shoes' and the tables' facts are here, the bet books' in
:mod:`~services.tools.history.books`.
"""

from __future__ import annotations

from typing import Any

from services.shared.facts.dealing import (
    BettingOpenedFact,
    CardDealtFact,
    CoupResolvedFact,
    CoupVoidedFact,
    TableOpenedFact,
    TableReopenedFact,
)
from services.shared.facts.shoe import (
    CardsAcceptedFact,
    CardsBurnedFact,
    CardsDrawnFact,
    CoupClearedFact,
    DrawRequestedFact,
    ReadTakenFact,
    ShoeHeldFact,
    ShoeRevealedFact,
    StudioShoeClosedFact,
    StudioShoeOpenedFact,
)
from services.tools.history.books import BookProjector, moment
from services.tools.history.views import (
    Burn,
    Correction,
    CoupView,
    Dealt,
    Draw,
    History,
    Read,
    Resolution,
    Reveal,
    ShoeView,
    Studio,
    StudioClosed,
    StudioDecision,
    StudioHold,
    TableSettings,
    TableView,
    Void,
)

_UNKNOWN_TERMS = TableSettings(0, "", "", {})
"""A table known only from messages about it (Kafka read from the middle of a run)."""


def settings(fact: TableOpenedFact | TableReopenedFact) -> TableSettings:
    return TableSettings(
        int(fact.decks),
        str(fact.paytable),
        str(fact.currency),
        fact.limits,
        int(fact.betting_window_ms),
        int(fact.cut_card_from_end),
    )


class Projector(BookProjector):
    """Facts into ``history``. ``lenient``: a fact naming a shoe or coup not seen yet makes
    a placeholder view (Kafka read from the middle of a run); otherwise it raises KeyError,
    as a stored fact naming nothing known is unreadable."""

    def __init__(self, history: History, *, lenient: bool = False) -> None:
        self.history = history
        self.lenient = lenient

    # -- shoe ----------------------------------------------------------------------------
    def shoe_shuffled(
        self,
        table_id: str,
        shoe_id: str,
        *,
        decks: int,
        commitment: str,
        scheme: str,
        cut_card_index: int,
        card_count: int,
        order: list[str] | None,
        salt: str | None,
        at: str,
        nid: int,
    ) -> ShoeView:
        """A shuffle (ShoeShuffledFact; Kafka publishes it without the order and salt)."""
        known = self.history.shoes.get((table_id, shoe_id)) if self.lenient else None
        if known is not None and not known.scheme:  # a placeholder: its cards came first
            known.decks, known.commitment, known.scheme = decks, commitment, scheme
            known.cut_card_index, known.card_count = cut_card_index, card_count
            known.shuffled_at, known.notification_id = at, nid
            return known
        shoe = ShoeView(
            table_id=table_id,
            shoe_id=shoe_id,
            decks=decks,
            order=order,
            salt=salt,
            commitment=commitment,
            scheme=scheme,
            cut_card_index=cut_card_index,
            card_count=card_count,
            shuffled_at=at,
            notification_id=nid,
        )
        self.history.shoes[(table_id, shoe_id)] = shoe
        return shoe

    def shoe(self, table_id: str, shoe_id: str) -> ShoeView:
        shoe = self.history.shoes.get((table_id, shoe_id))
        if shoe is None:
            if not self.lenient:
                raise KeyError((table_id, shoe_id))
            shoe = self.shoe_shuffled(
                table_id,
                shoe_id,
                decks=0,
                commitment="",
                scheme="",
                cut_card_index=0,
                card_count=0,
                order=None,
                salt=None,
                at="",
                nid=0,
            )
        return shoe

    def cards_burned(self, fact: CardsBurnedFact, nid: int) -> None:
        self.shoe(fact.table_id, fact.shoe_id).burn = Burn(
            fact.shown_card, list(fact.burned_cards), fact.next_position, nid
        )

    def cards_drawn(self, fact: CardsDrawnFact, nid: int) -> None:
        shoe = self.shoe(fact.table_id, fact.shoe_id)
        shoe.draws.append(
            Draw(fact.coup_id, fact.request_id, int(fact.first_position), fact.cards, nid)
        )
        if fact.cut_card_position is not None:
            shoe.cut_card_position = fact.cut_card_position

    def card_drawn(
        self,
        table_id: str,
        shoe_id: str,
        coup_id: str,
        request_id: str,
        position: int,
        card: str,
        nid: int,
    ) -> None:
        """One card of a draw (Kafka): it extends the shoe's last draw when that answered the
        same request and ends just before ``position``."""
        shoe = self.shoe(table_id, shoe_id)
        last = shoe.draws[-1] if shoe.draws else None
        if (
            last is not None
            and last.request_id == request_id
            and last.coup_id == coup_id
            and last.first_position + len(last.cards) == position
        ):
            last.cards.append(card)
        else:
            shoe.draws.append(Draw(coup_id, request_id, position, [card], nid))

    def cut_card_reached(self, table_id: str, shoe_id: str, position: int) -> None:
        self.shoe(table_id, shoe_id).cut_card_position = position

    def shoe_revealed(self, fact: ShoeRevealedFact, at: str, nid: int) -> None:
        self.shoe(fact.table_id, fact.shoe_id).reveal = Reveal(
            list(fact.order), fact.salt, fact.commitment, int(fact.cards_dealt), at, nid
        )

    # -- studio shoes ----------------------------------------------------------------------
    def studio_shoe_opened(self, fact: StudioShoeOpenedFact, at: str, nid: int) -> ShoeView:
        """A studio table's shoe: no commitment (``scheme`` empty), its cards are read."""
        studio = Studio(None if fact.after_seq is None else int(fact.after_seq))
        known = self.history.shoes.get((fact.table_id, fact.shoe_id)) if self.lenient else None
        if known is not None and not known.shuffled_at:  # a placeholder: its cards came first
            known.decks, known.card_count = int(fact.decks), int(fact.card_count)
            known.shuffled_at, known.notification_id = at, nid
            known.studio = known.studio or studio
            return known
        shoe = ShoeView(
            table_id=fact.table_id,
            shoe_id=fact.shoe_id,
            decks=int(fact.decks),
            order=None,
            salt=None,
            commitment="",
            scheme="",
            cut_card_index=0,
            card_count=int(fact.card_count),
            shuffled_at=at,
            notification_id=nid,
            studio=studio,
        )
        self.history.shoes[(fact.table_id, fact.shoe_id)] = shoe
        return shoe

    def studio(self, table_id: str, shoe_id: str) -> Studio:
        """The studio part of a shoe (lenient: a placeholder's is made)."""
        shoe = self.shoe(table_id, shoe_id)
        if shoe.studio is None:
            if not self.lenient:
                raise KeyError(f"shoe {shoe_id!r} of table {table_id!r} is not a studio shoe")
            shoe.studio = Studio(None)
        return shoe.studio

    def read_taken(self, fact: ReadTakenFact, nid: int) -> None:
        studio = self.studio(fact.table_id, fact.shoe_id)
        studio.reads.append(
            Read(
                int(fact.seq),
                str(fact.what),
                fact.card,
                fact.button,
                fact.last_seq,
                fact.position,
                bool(fact.held),
                fact.waited_ms,
                moment(fact.read_at),
                nid,
            )
        )
        if fact.button == "CONFIRM" and not fact.held:
            studio.coup_id = None  # the coup is confirmed: a hold now is the next one's

    def draw_requested(self, fact: DrawRequestedFact) -> None:
        """Dealing asked for cards for a coup: it is being dealt (and a hold raised since
        the last coup was confirmed is this coup's)."""
        studio = self.studio(fact.table_id, fact.shoe_id)
        studio.coup_id = fact.coup_id
        studio.holds = [
            hold if hold.coup_id is not None else hold._replace(coup_id=fact.coup_id)
            for hold in studio.holds
        ]

    def shoe_held(self, fact: ShoeHeldFact, nid: int) -> None:
        studio = self.studio(fact.table_id, fact.shoe_id)
        studio.holds.append(
            StudioHold(str(fact.reason), str(fact.detail), fact.seq, studio.coup_id, nid)
        )

    def studio_decision(self, fact: CoupClearedFact | CardsAcceptedFact, nid: int) -> None:
        if isinstance(fact, CoupClearedFact):
            decision = StudioDecision("clear", fact.coup_id, [], int(fact.next_position), nid)
        else:
            cards, first = list(fact.cards), int(fact.first_position)
            decision = StudioDecision("correct", fact.coup_id, cards, first, nid)
        self.studio(fact.table_id, fact.shoe_id).decisions.append(decision)

    def studio_shoe_closed(self, fact: StudioShoeClosedFact, at: str, nid: int) -> None:
        self.studio(fact.table_id, fact.shoe_id).closed = StudioClosed(
            list(fact.cards), int(fact.cards_dealt), at, nid
        )

    # -- dealing -------------------------------------------------------------------------
    def table_opened(self, fact: TableOpenedFact, at: str) -> TableView:
        known = self.history.tables.get(fact.table_id) if self.lenient else None
        if known is not None and not known.opened_at:  # a placeholder: its messages came first
            known.settings, known.opened_at = settings(fact), at
            return known
        table = self.history.tables[fact.table_id] = TableView(fact.table_id, settings(fact), at)
        return table

    def table(self, table_id: str) -> TableView:
        table = self.history.tables.get(table_id)
        if table is None:
            if not self.lenient:
                raise KeyError(table_id)
            table = self.history.tables[table_id] = TableView(table_id, _UNKNOWN_TERMS, "")
        return table

    def table_reopened(self, fact: TableReopenedFact) -> None:
        table = self.table(fact.table_id)
        table.settings = settings(fact)
        table.closed_at = None

    def table_closed(self, table_id: str, reason: str, at: str) -> None:
        table = self.table(table_id)
        table.closed_at = at
        table.close_reason = reason

    def betting_opened(self, fact: BettingOpenedFact, at: str, nid: int) -> CoupView:
        return self._open_coup(
            fact.table_id,
            fact.coup_id,
            int(fact.coup_number),
            fact.shoe_id,
            moment(fact.closes_at),
            at,
            nid,
        )

    def _open_coup(
        self,
        table_id: str,
        coup_id: str,
        number: int,
        shoe_id: str,
        closes_at: str,
        at: str,
        nid: int,
    ) -> CoupView:
        table = self.history.tables.get(table_id)
        known = self.history.coups.get((table_id, coup_id)) if self.lenient else None
        if known is not None and not known.opened_at:  # a placeholder: its messages came first
            known.coup_number, known.shoe_id, known.opened_at = number, shoe_id, at
            known.closes_at, known.notification_id = closes_at, nid
            known.settings = known.settings or (None if table is None else table.settings)
            return known
        coup = self.history.coups[(table_id, coup_id)] = CoupView(
            table_id=table_id,
            coup_id=coup_id,
            coup_number=number,
            shoe_id=shoe_id,
            opened_at=at,
            closes_at=closes_at,
            settings=None if table is None else table.settings,
            notification_id=nid,
        )
        if table is not None:
            table.coups.append(coup_id)
        return coup

    def coup(self, table_id: str, coup_id: str, shoe_id: str = "", number: int = 0) -> CoupView:
        coup = self.history.coups.get((table_id, coup_id))
        if coup is None:
            if not self.lenient:
                raise KeyError((table_id, coup_id))
            coup = self._open_coup(table_id, coup_id, number, shoe_id, "", "", 0)
        return coup

    def betting_closed(self, table_id: str, coup_id: str, at: str) -> None:
        self.coup(table_id, coup_id).betting_closed_at = at

    def card_dealt(self, fact: CardDealtFact, nid: int) -> None:
        self.coup(fact.table_id, fact.coup_id, fact.shoe_id).dealt.append(
            Dealt(fact.side, fact.card, int(fact.position), int(fact.card_index_in_hand), nid)
        )

    def coup_resolved(self, fact: CoupResolvedFact, at: str, nid: int) -> None:
        coup = self.coup(fact.table_id, fact.coup_id, fact.shoe_id, fact.coup_number)
        coup.resolutions.append(Resolution(fact, at, nid))

    def coup_corrected(self, source: Any, at: str, nid: int, authorization: str | None) -> None:
        """A ``CoupCorrectedFact`` (``authorization``: its decision) or a ``CoupCorrected``
        message (None)."""
        coup = self.coup(source.table_id, source.coup_id)
        coup.corrections.append(Correction.of(source, at, nid, authorization))

    def coup_voided(self, fact: CoupVoidedFact, at: str, nid: int, version: int = 1) -> None:
        """``version``: the stored fact's (a message's: 1, it carries no decision)."""
        authorization = fact.authorization
        self.coup(fact.table_id, fact.coup_id).voids.append(
            Void(
                str(fact.supervisor_id),
                str(fact.reason),
                bool(fact.was_resolved),
                at,
                nid,
                None if authorization is None else str(authorization),
                version,
            )
        )
