"""The settlement Application: bets in, settlements and refunds out.

Entry points take the contract message they handle. Messages from dealing come
with the eventsourcing ``Tracking`` of the message, recorded in the same
transaction as the events they cause (a redelivery has no second effect).
``PlaceBet`` is idempotent by ``bet_id`` (see ``bet_index``): a resend gets
the original answer and records nothing. A bet naming a coup not opened yet
(of an open table) is held and judged when the table's next coup opens, since
bets and dealing's events arrive on different topics. Settling a coup is one
event on the coup's bet book, so every bet of a coup is settled in ONE
transaction.

When a bet was placed (``placed_at``) is given by the caller: the service passes
the Kafka broker's append time of the PlaceBet (the bet-commands topic has
``message.timestamp.type=LogAppendTime``), or the time it received the bet when
the record carries no broker time. Without one, the time the bet is handled
(this application's clock) is used. ``PlaceBet.occurred_at`` is written by the
client and is never used to judge a bet (see ``BetBook.closed_for``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError, Tracking

from contracts import (
    BettingClosed,
    BettingOpened,
    CoupResolved,
    CoupVoided,
    Message,
    PlaceBet,
    TableClosed,
    TableOpened,
)
from services.platform.application import ServiceApplication, UnitOfWork
from services.rules.validation import parse_amount
from services.settlement.bet_index import DUPLICATE, BetAnswer, BetIndex, BetRequest
from services.settlement.bet_index_store import load_bet_index
from services.settlement.desk import held_line
from services.settlement.domain import (
    BetBook,
    BetDesk,
    BookStatus,
    CoupFacts,
    TableTerms,
    book_aggregate_id,
    desk_aggregate_id,
    terms_aggregate_id,
)

A = TypeVar("A", bound=Aggregate)


class SettlementApplication(ServiceApplication):
    """Bet books per coup (see the module docstring)."""

    name = "settlement"
    # Bet books are large: the cached aggregate is used as is (no deep copy per
    # command); a unit of work that fails evicts what it touched instead.
    env: ClassVar[dict[str, str]] = {
        "AGGREGATE_CACHE_MAXSIZE": "1000",
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
        self._clock = clock or _utc_now  # "now" for a bet handed over without placed_at
        self._index = BetIndex()
        # books with answers, desks with held bets, to record in this unit (flush)
        self._drafted: dict[UUID, BetBook | BetDesk] = {}
        load_bet_index(self._index, self.recorder, self.mapper)

    # -- units of work that keep the cache and the bet index clean ----------------------
    @contextmanager
    def unit_of_work(self, tracking: Tracking | None = None) -> Iterator[UnitOfWork]:
        uow = UnitOfWork(self, tracking)
        self._index.begin()
        self._drafted = {}
        try:
            yield uow
            for drafted in self._drafted.values():
                drafted.flush()  # one BetsAnswered (BetsHeld) event per book (desk) per unit
            uow.commit()
        except BaseException:
            self._forget(uow)
            self._index.rollback()
            raise
        self._index.commit()

    def _forget(self, uow: UnitOfWork) -> None:
        cache = self.repository.cache
        touched: dict[Any, Any] = getattr(uow, "_aggregates", {})
        if cache is not None:
            for aggregate_id in touched:
                with suppress(KeyError):
                    cache.get(aggregate_id, evict=True)

    # -- entry points ----------------------------------------------------------------
    def handle(
        self,
        message: Message,
        tracking: Tracking | None = None,
        placed_at: datetime | None = None,
    ) -> BetAnswer | None:
        """Apply one message in its own transaction; a PlaceBet's answer.

        ``placed_at``: when a PlaceBet was placed (the broker's append time); default now.
        """
        if tracking is not None and self.process_recorder.has_tracking_id(
            tracking.application_name, tracking.notification_id
        ):
            return None  # already processed: no second effect
        try:
            with self.unit_of_work(tracking) as uow:
                return self.apply(uow, message, placed_at)
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
    ) -> None:
        """Apply messages of one partition, in order, in ONE transaction with ``tracking``.

        ``placed_at[i]``: when ``messages[i]`` (a PlaceBet) was placed; default: now,
        once for the whole batch (the time it was received).
        """
        if placed_at is not None and len(placed_at) != len(messages):
            raise ValueError("placed_at needs one time per message")
        received = self._clock()
        with self.unit_of_work(tracking) as uow:
            for index, message in enumerate(messages):
                placed = None if placed_at is None else placed_at[index]
                self.apply(uow, message, placed or received)

    def place_bet(self, command: PlaceBet, placed_at: datetime | None = None) -> BetAnswer:
        answer = self.handle(command, placed_at=placed_at)
        assert answer is not None
        return answer

    def apply(
        self, uow: UnitOfWork, message: Message, placed_at: datetime | None = None
    ) -> BetAnswer | None:
        """Apply one message inside ``uow`` (a batch shares one unit of work)."""
        if isinstance(message, PlaceBet):
            placed = placed_at or self._clock()
            if placed.tzinfo is None:
                raise ValueError(f"placed_at must be timezone-aware, got {placed!r}")
            return self._place_bet(uow, message, placed)
        handler = self._table_event_handlers.get(type(message).__name__)
        if handler is not None:
            handler(self, uow, message)
        return None

    # -- queries -------------------------------------------------------------------
    def bet_answer(self, bet_id: str) -> BetAnswer | None:
        """The answer recorded for a bet id (None: never answered, or free again)."""
        return self._index.answer(bet_id)

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
    def _place_bet(self, uow: UnitOfWork, command: PlaceBet, placed_at: datetime) -> BetAnswer:
        request = BetRequest(
            command.table_id,
            command.coup_id,
            command.bet_id,
            command.bettor_id,
            command.bet_type,
            str(command.amount),
            command.currency,
            placed_at,  # never command.occurred_at: the client writes that
        )
        previous = self._index.get(request.bet_id)
        if previous is not None:
            if previous.key == request.key:
                return replace(previous.answer, repeated=True)
            book = uow.get(book_aggregate_id(request.table_id, request.coup_id), BetBook)
            return self._refuse(
                uow,
                book,
                request,
                DUPLICATE,
                f"bet id {request.bet_id} was already used for another bet; "
                "use a new bet id for a new bet",
            )
        terms = uow.get(terms_aggregate_id(request.table_id), TableTerms)
        if terms is None:
            return self._refuse(
                uow, None, request, "NO_SUCH_TABLE", f"there is no table {request.table_id}"
            )
        book = uow.get(book_aggregate_id(request.table_id, request.coup_id), BetBook)
        if terms.closed:
            return self._refuse(
                uow, book, request, "TABLE_CLOSED", f"table {request.table_id} is closed"
            )
        if book is None:
            # Most likely the coup's BettingOpened is on its way: judge the bet then.
            desk = self._desk(uow, request.table_id)
            desk.draft_hold(
                held_line(
                    request.coup_id,
                    request.bet_id,
                    request.bettor_id,
                    request.bet_type,
                    request.amount,
                    request.currency,
                    placed_at,
                )
            )
            self._drafted[desk.id] = desk
            answer = BetAnswer(request.bet_id, False, held=True)
            self._index.record(request, answer)
            return answer
        return self._judge(uow, book, request)

    def _judge(self, uow: UnitOfWork, book: BetBook, request: BetRequest) -> BetAnswer:
        """Accept the bet into ``book`` or refuse it with the first rule it breaks."""
        rejection = book.check(
            request.bettor_id,
            request.bet_type,
            request.amount,
            request.currency,
            request.placed_at or self._clock(),
        )
        if rejection is not None:
            return self._refuse(uow, book, request, rejection.reason.value, rejection.message)
        amount = parse_amount(request.amount)
        assert amount is not None
        book.draft_accept(
            request.bet_id,
            request.bettor_id,
            request.bet_type,
            amount,
            request.currency,
            request.placed_at,
        )
        self._drafted[book.id] = book
        answer = BetAnswer(request.bet_id, True)
        self._index.record(request, answer)
        return answer

    def _refuse(
        self,
        uow: UnitOfWork,
        book: BetBook | None,
        request: BetRequest,
        code: str,
        message: str,
    ) -> BetAnswer:
        fields = {**request.fields(), "reason_code": code, "message": message}
        if book is not None:
            book.draft_reject(
                request.bet_id,
                request.bettor_id,
                request.bet_type,
                request.amount,
                request.currency,
                code,
                message,
                request.placed_at,
            )
            self._drafted[book.id] = book
        else:
            self._desk(uow, request.table_id).reject(**fields, placed_at=request.placed_at)
        answer = BetAnswer(request.bet_id, False, code, message)
        self._index.record(request, answer)
        return answer

    def _desk(self, uow: UnitOfWork, table_id: str) -> BetDesk:
        desk = uow.get(desk_aggregate_id(table_id), BetDesk)
        if desk is None:
            desk = BetDesk(table_id=table_id)
            uow.add(desk)
        return desk

    def _release_held(
        self, uow: UnitOfWork, table_id: str, book: BetBook | None, code: str, message: str
    ) -> None:
        """Judge the table's held bets: those for ``book``'s coup by it, the others refused."""
        desk = uow.get(desk_aggregate_id(table_id), BetDesk)
        if desk is None or not desk.held:
            return
        for line in desk.release_all():
            request = BetRequest.held(table_id, line)
            if book is not None and request.coup_id == book.coup_id:
                self._judge(uow, book, request)
            else:
                self._refuse(uow, None, request, code, message.format(coup_id=request.coup_id))

    # -- dealing's events ------------------------------------------------------------
    def _on_table_opened(self, uow: UnitOfWork, event: TableOpened) -> None:
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

    def _on_table_closed(self, uow: UnitOfWork, event: TableClosed) -> None:
        terms = uow.get(terms_aggregate_id(event.table_id), TableTerms)
        if terms is not None and not terms.closed:
            terms.close()
        self._release_held(
            uow, event.table_id, None, "TABLE_CLOSED", f"table {event.table_id} is closed"
        )

    def _on_betting_opened(self, uow: UnitOfWork, event: BettingOpened) -> None:
        terms = uow.get(terms_aggregate_id(event.table_id), TableTerms)
        if terms is None:
            return  # TableOpened always comes first on the table's partition
        book = uow.get(book_aggregate_id(event.table_id, event.coup_id), BetBook)
        if book is None:
            book = BetBook(
                table_id=event.table_id,
                coup_id=event.coup_id,
                paytable=terms.paytable,
                limits=terms.limits,
                currency=terms.currency,
                closes_at=event.closes_at,
            )
            uow.add(book)
        self._release_held(
            uow,
            event.table_id,
            book,
            "NO_SUCH_COUP",
            f"table {event.table_id} has no coup {{coup_id}} open for bets "
            f"(the coup open now is {event.coup_id})",
        )

    def _on_betting_closed(self, uow: UnitOfWork, event: BettingClosed) -> None:
        book = uow.get(book_aggregate_id(event.table_id, event.coup_id), BetBook)
        if book is not None and book.status is BookStatus.BETTING:
            book.close_betting(closed_at=event.occurred_at)

    def _on_coup_resolved(self, uow: UnitOfWork, event: CoupResolved) -> None:
        book = uow.get(book_aggregate_id(event.table_id, event.coup_id), BetBook)
        if book is not None and book.status in (BookStatus.BETTING, BookStatus.CLOSED):
            book.settle(CoupFacts(event.outcome, event.player_pair, event.banker_pair))

    def _on_coup_voided(self, uow: UnitOfWork, event: CoupVoided) -> None:
        book = uow.get(book_aggregate_id(event.table_id, event.coup_id), BetBook)
        if book is not None and book.status is not BookStatus.VOIDED:
            book.refund(event.supervisor_id, event.reason)

    _table_event_handlers: ClassVar[
        dict[str, Callable[[SettlementApplication, UnitOfWork, Any], None]]
    ] = {
        "TableOpened": _on_table_opened,
        "TableClosed": _on_table_closed,
        "BettingOpened": _on_betting_opened,
        "BettingClosed": _on_betting_closed,
        "CoupResolved": _on_coup_resolved,
        "CoupVoided": _on_coup_voided,
    }


def _utc_now() -> datetime:
    return datetime.now(UTC)
