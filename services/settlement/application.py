"""The settlement Application: bets in, settlements and refunds out.

Entry points take the contract message they handle, with the eventsourcing ``Tracking`` of
the batch it came in: its new events and the tracking record are recorded in ONE
transaction, so a redelivered message has no second effect.

Bets are judged by their place in the table's partition of ``bet-commands``: dealing's
``OpenBook`` opens a coup's book there and ``CloseBook`` closes it, so a ``PlaceBet``
appended before the OpenBook is refused ``NO_SUCH_COUP`` (the id stays free), one appended
after the CloseBook ``BETTING_CLOSED``, and one in between is judged by the book (limits,
currency, opposing bets, and the coup's ``closes_at``). The broker's order decides, the same
way on every replay and after any restart. ``PlaceBet`` is idempotent by ``bet_id`` (see
``bet_index``). When a bet was placed (``placed_at``) is the broker's append time of its
record (the topic uses LogAppendTime), never the client's ``occurred_at``.

Settlement believes cards, not claims: a ``CoupResolved`` is checked with the rules engine
and against the cards the shoe drew for the coup (``CardDrawn`` on shoe-events) before
anything is paid (``claims``, ``verification``); a claim that fails is an incident, and the
coup stays unsettled until a claim that holds (or a void) comes. Settling a coup is one event on
its bet book: every bet of a coup is settled in ONE transaction. A settled coup's result
corrected by a supervisor (``CoupCorrected``, its cards checked by the rules engine) settles
its bets again as differences, one event, once per correction.

Operators (B2B): a bet's operator is the operator of the bet-commands topic it was read from
(``operator`` of :meth:`SettlementApplication.handle_batch`, given by the service), never a
field of the bet; its identity is (operator, bet id). Dealing marks every operator's topic:
a coup's book takes an operator's bets once its OpenBook is read there, refuses them once its
CloseBook is, and closes when every operator of ``PB_OPERATORS`` (as configured when the book
opened) has closed it (``books``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, LRUCache
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError, Tracking

from contracts import (
    HOUSE,
    CardDrawn,
    CloseBook,
    CoupCorrected,
    CoupResolved,
    CoupVoided,
    Message,
    OpenBook,
    PlaceBet,
    TableClosed,
    TableOpened,
)
from services.settlement.bet_ids import change_rows
from services.settlement.bet_index import DUPLICATE, BetAnswer, BetIndex, BetRequest
from services.settlement.bet_index_store import BetIdStore, index_old_answers
from services.settlement.claims import (
    early_card,
    judge_claims,
    on_card_drawn,
    on_coup_corrected,
    on_coup_resolved,
)
from services.settlement.domain import (
    BetBook,
    BetDesk,
    BookStatus,
    FinishedBook,
    TableTerms,
    book_aggregate_id,
    desk_aggregate_id,
    terms_aggregate_id,
)
from services.shared.platform.consumer import Refusal
from services.shared.platform.settings import (
    DEFAULT_BROKER_CLOCK_SKEW,
    DEFAULT_MAX_BETS_PER_COUP,
    check_clock_skew,
    check_max_bets,
    check_operators,
)
from services.shared.platform.store import (
    BET_IDS,
    Origin,
    ServiceApplication,
    UnitOfWork,
    create_side_tables,
    refuse_fact,
)
from services.shared.rules.validation import parse_amount

A = TypeVar("A", bound=Aggregate)

FINISHED = (BookStatus.SETTLED, BookStatus.VOIDED)
"""A book in these states takes no more bets: it is not kept in memory."""
FINISHED_KEPT = 10_000
"""Finished books whose :class:`FinishedBook` is kept (about 300 bytes each): a bet naming
one of them is answered without reading the book; one naming an older one reads it once."""


class SettlementApplication(ServiceApplication):
    """Bet books per coup (see the module docstring)."""

    name = "settlement"
    # Bet books are large: the cached aggregate is used as is (no deep copy per
    # command); a unit of work that fails evicts what it touched instead.
    env: ClassVar[dict[str, str]] = {
        **ServiceApplication.env,
        "DEEPCOPY_FROM_AGGREGATE_CACHE": "n",
    }
    # A table's desk lives as long as the table: snapshot it now and then.
    snapshotting_intervals: ClassVar[dict[type[Any], int]] = {BetDesk: 500}

    def __init__(
        self,
        env: dict[str, str] | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        super().__init__(env)
        self._clock = clock or _utc_now  # "now" for a message handed over without a time
        # whose CloseBook a new book waits for (PB_OPERATORS, in settlement's environment)
        self.operators = check_operators(self.env.get("PB_OPERATORS") or HOUSE)
        # the most bets a coup's book accepts (PB_MAX_BETS_PER_COUP): BOOK_FULL beyond
        self.max_bets_per_coup = check_max_bets(
            self.env.get("PB_MAX_BETS_PER_COUP") or DEFAULT_MAX_BETS_PER_COUP
        )
        # the most of one operator (PB_MAX_BETS_PER_OPERATOR; by default an equal share, so
        # that no operator's bets take another's place)
        per_operator = self.env.get("PB_MAX_BETS_PER_OPERATOR")
        self.max_bets_per_operator = (
            check_max_bets(per_operator)
            if per_operator
            else max(1, self.max_bets_per_coup // len(self.operators))
        )
        # how far two brokers' append times may disagree (PB_BROKER_CLOCK_SKEW): a card
        # appended up to this much before its coup's close mark is still the shoe's
        self.clock_skew = timedelta(
            seconds=check_clock_skew(
                self.env.get("PB_BROKER_CLOCK_SKEW") or DEFAULT_BROKER_CLOCK_SKEW
            )
        )
        # bet ids' answers: a table in the store (read on demand), written with the answers
        create_side_tables(self.factory, self.recorder, [BET_IDS])
        self.bet_ids = BetIdStore(self.recorder)
        self.bet_index = BetIndex(self.bet_ids)
        self._finished: LRUCache[UUID, FinishedBook] = LRUCache(FINISHED_KEPT)
        index_old_answers(self)  # once per store written by an older settlement

    # -- units of work that keep the cache and the bet index clean ----------------------
    @contextmanager
    def unit_of_work(self, tracking: Tracking | None = None) -> Iterator[UnitOfWork]:
        uow = UnitOfWork(self, tracking)
        self.bet_index.begin()
        try:
            yield uow
            for aggregate in uow.aggregates():
                if isinstance(aggregate, BetBook | BetDesk):
                    aggregate.flush()  # a book's answers, a desk's refusals: one event each
            changes = self.bet_index.changes()
            uow.add_rows(change_rows(changes))
            uow.commit()
        except BaseException:
            uow.forget()  # it may hold its drafts
            self.bet_index.rollback()
            raise
        self.bet_index.commit(changes)
        self._drop_finished_books(uow)

    def _drop_finished_books(self, uow: UnitOfWork) -> None:
        """A settled or voided book leaves the aggregate cache: memory holds the bets of open
        coups only; what a bet naming it needs is kept instead (:class:`FinishedBook`: a
        late message about a finished coup other than a bet reads its book from the store)."""
        for aggregate in uow.aggregates():
            finished = aggregate.finished() if isinstance(aggregate, BetBook) else None
            if finished is not None:
                self._finished.put(finished.id, finished)
        uow.forget(lambda a: isinstance(a, BetBook) and a.status in FINISHED)

    # -- entry points ----------------------------------------------------------------
    def handle(
        self,
        message: Message,
        tracking: Tracking | None = None,
        placed_at: datetime | None = None,
        origin: Origin | None = None,
        operator: str = HOUSE,
    ) -> BetAnswer | None:
        """Apply one message in its own transaction; a PlaceBet's answer.

        ``placed_at``: when the message's record was appended (a PlaceBet: when it was
        placed; a CloseBook: when betting closed); default now. ``operator``: whose
        bet-commands topic it was read from.
        """
        if tracking is not None and self.process_recorder.has_tracking_id(
            tracking.application_name, tracking.notification_id
        ):
            return None  # already processed: no second effect
        try:
            with self.unit_of_work(tracking) as uow:
                return self.apply(uow, message, placed_at, origin, operator)
        except IntegrityError:
            if tracking is None or not self.process_recorder.has_tracking_id(
                tracking.application_name, tracking.notification_id
            ):
                raise
            return None  # this position was recorded meanwhile: the first delivery won

    def handle_batch(
        self,
        messages: Sequence[Message],
        tracking: Tracking | None,
        placed_at: Sequence[datetime | None] | None = None,
        origins: Sequence[Origin | None] | None = None,
        operator: str = HOUSE,
        refusals: Sequence[Refusal | None] | None = None,
    ) -> None:
        """Apply messages of one partition, in order, in ONE transaction with ``tracking``.

        ``placed_at[i]``: when ``messages[i]``'s record was appended; default: now, once for
        the whole batch (the time it was received). ``origins[i]``: where it was read.
        ``operator``: whose bet-commands topic the partition is of (the bets' operator).
        ``refusals[i]``: why the consumer refused ``messages[i]`` (``Delivery.refusal``).
        """
        for extra in (placed_at, origins, refusals):
            if extra is not None and len(extra) != len(messages):
                raise ValueError("placed_at, origins and refusals need one entry per message")
        received = self._clock()
        with self.unit_of_work(tracking) as uow:
            self.bet_index.prefetch(  # the batch's bet ids: one read of the store
                (operator, m.bet_id) for m in messages if isinstance(m, PlaceBet)
            )
            for index, message in enumerate(messages):
                placed = None if placed_at is None else placed_at[index]
                origin = None if origins is None else origins[index]
                refusal = None if refusals is None else refusals[index]
                self.apply(uow, message, placed or received, origin, operator, refusal)

    def place_bet(
        self, command: PlaceBet, placed_at: datetime | None = None, operator: str = HOUSE
    ) -> BetAnswer:
        answer = self.handle(command, placed_at=placed_at, operator=operator)
        assert answer is not None
        return answer

    def apply(
        self,
        uow: UnitOfWork,
        message: Message,
        placed_at: datetime | None = None,
        origin: Origin | None = None,
        operator: str = HOUSE,
        refusal: Refusal | None = None,
    ) -> BetAnswer | None:
        """Apply one message inside ``uow`` (a batch shares one unit of work); ``operator``:
        whose bet-commands topic it was read from; ``refusal``: why the consumer refused it
        (a bet is answered with it, a fact is an incident: nothing else changes)."""
        when = placed_at or self._clock()
        if when.tzinfo is None:
            raise ValueError(f"placed_at must be timezone-aware, got {when!r}")
        if isinstance(message, PlaceBet):
            return self._place_bet(uow, message, when, operator, refusal)
        if refusal is not None:
            refuse_fact(uow, self.name, message, refusal.code, refusal.message, origin)
            return None
        if isinstance(message, OpenBook):
            self._on_open_book(uow, message, when, operator)
            return None
        if isinstance(message, CloseBook):
            self._on_close_book(uow, message, when, operator)
            return None
        if isinstance(message, CardDrawn):
            on_card_drawn(uow, message, when, origin, self.clock_skew)  # the shoe's cards
            return None
        if isinstance(message, CoupResolved):
            on_coup_resolved(uow, message, origin)  # dealing's claim, judged by the cards
            return None
        if isinstance(message, CoupCorrected):
            on_coup_corrected(uow, message, origin)  # a supervisor's, judged by its cards
            return None
        handler = self._handlers.get(type(message))
        if handler is not None:
            handler(self, uow, message, when, origin)
        return None

    # -- queries -------------------------------------------------------------------
    def bet_answer(self, bet_id: str, operator: str = HOUSE) -> BetAnswer | None:
        """The answer recorded for an operator's bet id (None: never answered, or free)."""
        return self.bet_index.answer(operator, bet_id)

    def get_book(self, table_id: str, coup_id: str) -> BetBook | None:
        """The coup's bet book as recorded (read only: it may be the cached object)."""
        return self._peek(book_aggregate_id(table_id, coup_id), BetBook)

    def get_terms(self, table_id: str) -> TableTerms | None:
        return self._peek(terms_aggregate_id(table_id), TableTerms)

    def _peek(self, aggregate_id: UUID, kind: type[A]) -> A | None:
        try:
            found: Aggregate = self.repository.get(aggregate_id, deepcopy_from_cache=False)
        except AggregateNotFoundError:
            return None
        return found if isinstance(found, kind) else None

    # -- bets ----------------------------------------------------------------------
    def _place_bet(
        self,
        uow: UnitOfWork,
        command: PlaceBet,
        placed_at: datetime,
        operator: str,
        refusal: Refusal | None = None,
    ) -> BetAnswer:
        """Judge a bet, or answer the consumer's ``refusal`` of it: a misplaced record on its
        table's desk only (nothing else is recorded: its id stays free, the table's book is
        untouched), a bet the contract refuses like any refused bet (a resend or a reused id
        is answered as such)."""
        request = BetRequest(
            command.table_id,
            command.coup_id,
            command.bet_id,
            command.bettor_id,
            command.bet_type,
            str(command.amount),
            command.currency,
            placed_at,  # never command.occurred_at: the client writes that
            parse_amount(command.amount) if refusal is None else None,  # the one parse
            operator,  # the topic's, never a field of the bet
        )
        if refusal is not None and refusal.misplaced:
            return self._refuse(uow, None, request, refusal.code, refusal.message, index=False)
        previous = self.bet_index.get(operator, request.bet_id)
        book = self._book(uow, request.table_id, request.coup_id)
        if book is not None and not book.opened_for(operator):
            book = None  # not open for this operator's bets yet: its OpenBook is still to come
        if previous is not None:
            if previous.key == request.key:
                return previous.answer._replace(repeated=True)
            return self._refuse(
                uow,
                book,
                request,
                DUPLICATE,
                f"bet id {request.bet_id} was already used for another bet; "
                "use a new bet id for a new bet",
            )
        if refusal is not None:
            return self._refuse(uow, None, request, refusal.code, refusal.message)
        if isinstance(book, BetBook) and book.status is BookStatus.BETTING:
            return self._judge(uow, book, request)
        terms = uow.get(terms_aggregate_id(request.table_id), TableTerms)
        if terms is not None and terms.closed:
            return self._refuse(
                uow, book, request, "TABLE_CLOSED", f"table {request.table_id} is closed"
            )
        if isinstance(book, FinishedBook):
            why = book.refusal()
            return self._refuse(uow, book, request, why.reason.value, why.message)
        if book is not None:
            return self._judge(uow, book, request)  # too late: the book says why
        if terms is None:
            return self._refuse(
                uow, None, request, "NO_SUCH_TABLE", f"there is no table {request.table_id}"
            )
        return self._refuse(
            uow,
            None,
            request,
            "NO_SUCH_COUP",
            f"table {request.table_id} has no coup {request.coup_id} open for bets "
            "(bet on the coup_id of the latest BettingOpened; a bet that overtook it may be "
            "sent again with the same bet id)",
        )

    def _book(self, uow: UnitOfWork, table_id: str, coup_id: str) -> BetBook | FinishedBook | None:
        """The coup's book for judging a bet; a finished one as its :class:`FinishedBook`,
        which answers without the book being read (unless this unit holds it already)."""
        book_id = book_aggregate_id(table_id, coup_id)
        if not uow.holds(book_id):
            with suppress(KeyError):
                return self._finished.get(book_id)
        book = uow.get(book_id, BetBook)
        return None if book is None else book.finished() or book

    def _judge(self, uow: UnitOfWork, book: BetBook, request: BetRequest) -> BetAnswer:
        """Accept the bet into ``book`` or refuse it with the first rule it breaks."""
        rejection = book.check(
            request.bettor_id,
            request.bet_type,
            request.stake,
            request.amount,
            request.currency,
            request.placed_at or self._clock(),
            request.operator,
            max_bets=self.max_bets_per_coup,
            max_operator_bets=self.max_bets_per_operator,
        )
        if rejection is not None:
            return self._refuse(uow, book, request, rejection.reason.value, rejection.message)
        assert request.stake is not None  # check refuses an invalid amount
        book.draft_accept(
            request.bet_id,
            request.bettor_id,
            request.bet_type,
            request.stake,
            request.currency,
            request.placed_at,
            request.operator,
        )
        answer = BetAnswer(request.bet_id, True)
        self.bet_index.record(request, answer)
        return answer

    def _refuse(
        self,
        uow: UnitOfWork,
        book: BetBook | FinishedBook | None,
        request: BetRequest,
        code: str,
        message: str,
        *,
        index: bool = True,
    ) -> BetAnswer:
        """Record the refusal in the coup's open book, else on the table's desk (no book, or
        a finished one: it takes nothing more, so a late bet never makes it longer) and, with
        ``index``, in the bet index (a binding refusal takes the bet id)."""
        fields = {**request.fields(), "reason_code": code, "message": message}
        if isinstance(book, BetBook):
            book.draft_reject(
                request.bet_id,
                request.bettor_id,
                request.bet_type,
                request.amount,
                request.currency,
                code,
                message,
                request.placed_at,
                request.operator,
            )
        else:
            self._desk(uow, request.table_id).reject(**fields, placed_at=request.placed_at)
        answer = BetAnswer(request.bet_id, False, code, message)
        if index:
            self.bet_index.record(request, answer)
        return answer

    def _desk(self, uow: UnitOfWork, table_id: str) -> BetDesk:
        desk = uow.get(desk_aggregate_id(table_id), BetDesk)
        if desk is None:
            desk = BetDesk(table_id=table_id)
            uow.add(desk)
        return desk

    def _refuse_held(self, uow: UnitOfWork, table_id: str, code: str, message: str) -> None:
        """Refuse the bets an older version of settlement held for a coup not yet open."""
        desk = uow.get(desk_aggregate_id(table_id), BetDesk)
        if desk is None or not desk.held:
            return
        for line in desk.release_all():
            self._refuse(uow, None, BetRequest.held(table_id, line), code, message)

    # -- dealing's marks in the bets' partition -------------------------------------
    def _on_open_book(
        self, uow: UnitOfWork, message: OpenBook, appended: datetime, operator: str
    ) -> None:
        book = uow.get(book_aggregate_id(message.table_id, message.coup_id), BetBook)
        if book is not None:  # another operator's mark, or a republished one (no change)
            book.open_for(operator)
        else:
            uow.add(
                BetBook(
                    table_id=message.table_id,
                    coup_id=message.coup_id,
                    paytable=message.paytable,
                    limits={
                        str(bet_type): {"minimum": limit.minimum, "maximum": limit.maximum}
                        for bet_type, limit in sorted(message.limits.items())
                    },
                    currency=message.currency,
                    closes_at=message.closes_at,
                    coup_number=message.coup_number,
                    shoe_id=message.shoe_id,
                    operator=operator,
                    operators=list(dict.fromkeys((*self.operators, operator))),
                )
            )
        self._refuse_held(
            uow,
            message.table_id,
            "NO_SUCH_COUP",
            f"no coup was open for this bet when it arrived (coup {message.coup_id} opened later)",
        )

    def _on_close_book(
        self, uow: UnitOfWork, message: CloseBook, appended: datetime, operator: str
    ) -> None:
        book = uow.get(book_aggregate_id(message.table_id, message.coup_id), BetBook)
        # every bet of the operator after its mark is too late; the last mark closes the book
        if book is not None and book.close_mark(operator, appended):
            early = book.early_cards(self.clock_skew)  # read before the mark, appended before
            for position in early:
                early_card(uow, book, position, book.drawn[position][0], None)
            if early:
                book.refuse_cards(early)
            judge_claims(uow, book)  # a claim read before the mark (settlement lagging)

    # -- dealing's and the shoe's events --------------------------------------------
    def _on_table_opened(
        self, uow: UnitOfWork, event: TableOpened, _: datetime, origin: Origin | None
    ) -> None:
        limits: dict[str, dict[str, int]] = {
            str(bet_type): {"minimum": limit.minimum, "maximum": limit.maximum}
            for bet_type, limit in sorted(event.limits.items())
        }
        terms = uow.get(terms_aggregate_id(event.table_id), TableTerms)
        if terms is None:
            uow.add(
                TableTerms(
                    table_id=event.table_id,
                    paytable=event.paytable,
                    limits=limits,
                    currency=event.currency,
                )
            )
        elif terms.closed or not terms.same_terms(event.paytable, limits, event.currency):
            terms.change(paytable=event.paytable, limits=limits, currency=event.currency)

    def _on_table_closed(
        self, uow: UnitOfWork, event: TableClosed, _: datetime, origin: Origin | None
    ) -> None:
        terms = uow.get(terms_aggregate_id(event.table_id), TableTerms)
        if terms is not None and not terms.closed:
            terms.close()
        self._refuse_held(uow, event.table_id, "TABLE_CLOSED", f"table {event.table_id} is closed")

    def _on_coup_voided(
        self, uow: UnitOfWork, event: CoupVoided, _: datetime, origin: Origin | None
    ) -> None:
        book = uow.get(book_aggregate_id(event.table_id, event.coup_id), BetBook)
        if book is not None and book.status is not BookStatus.VOIDED:
            book.refund(event.supervisor_id, event.reason)

    _handlers: ClassVar[
        dict[type[Message], Callable[[Any, UnitOfWork, Any, datetime, Origin | None], None]]
    ] = {
        TableOpened: _on_table_opened,
        TableClosed: _on_table_closed,
        CoupVoided: _on_coup_voided,
    }
    """Message type -> what settlement does with it (others of its topics: nothing)."""


def _utc_now() -> datetime:
    return datetime.now(UTC)
