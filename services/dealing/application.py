"""The dealing Application: table commands, the shoe's answers, and the betting clock.

Every entry point takes the contract message it handles and, for messages from
another service, the eventsourcing ``Tracking`` of that message: the new
events and the tracking record are recorded in ONE transaction, so a message
delivered twice has one effect. Commands from outside (OpenTable, VoidCoup...)
carry no notification id; they are idempotent by their natural keys (table id,
coup id) and a refused command id is answered once. A void is a supervisor's signed decision,
verified before anything changes (``voids.py``: the supervisors keyring and void window come
from the Application's environment).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError, Tracking
from eventsourcing.utils import get_topic

from contracts import (
    MISPLACED,
    BetsClosed,
    CardDrawn,
    CardsBurned,
    CloseBetting,
    CloseTable,
    CorrectCoup,
    CorrectResult,
    CutCardReached,
    Message,
    OpenTable,
    ShoeClosed,
    ShoeShuffled,
    StudioShoeClosed,
    StudioShoeOpened,
    VoidCoup,
)
from services.dealing.coups import INITIAL_CARDS
from services.dealing.domain import (
    CommandRejections,
    Coup,
    CoupPhase,
    ShoeState,
    Table,
    TableStatus,
    coup_aggregate_id,
    rejections_aggregate_id,
    table_aggregate_id,
)
from services.dealing.rejections import Refused, index_old_refusals
from services.dealing.table_settings import settings_problem
from services.dealing.voids import VoidAuthority, correction_refusal
from services.shared.platform.consumer import Refusal
from services.shared.platform.logs import message_context
from services.shared.platform.security import SupervisorKeyring
from services.shared.platform.store import (
    REFUSED_COMMANDS,
    Evidence,
    Origin,
    ServiceApplication,
    UnitOfWork,
    create_side_tables,
    raise_incident,
    refuse_fact,
)

A = TypeVar("A", bound=Aggregate)

SERVICE = "dealing"
COMMANDS = (OpenTable, CloseTable, CloseBetting, VoidCoup, CorrectCoup, CorrectResult)
"""The table commands (what may be refused)."""

TABLE_COMMANDS = COMMANDS
"""The commands from outside dealing answers (``CommandRejected``)."""


@dataclass(frozen=True)
class BettingDeadline:
    table_id: str
    coup_id: str
    closes_at: datetime


class DealingApplication(ServiceApplication):
    """Tables and coups (see the module docstring)."""

    name = "dealing"
    # A table records a few events per coup, a table id's log of refusals one per refusal:
    # snapshot them now and then, so a restart (or a cold read) does not replay them all.
    snapshotting_intervals: ClassVar[dict[type[Any], int]] = {Table: 100, CommandRejections: 500}

    def __init__(
        self,
        env: dict[str, str] | None = None,
        clock: Callable[[], datetime] | None = None,
        supervisors: SupervisorKeyring | None = None,
    ) -> None:
        """``supervisors``: who may sign a void (default: the keyring file the environment
        names, ``PB_SUPERVISOR_KEYRING``; none: every void is refused)."""
        super().__init__(env)
        # the command ids refused: a table in the store (read by id), written with the refusal
        create_side_tables(self.factory, self.recorder, [REFUSED_COMMANDS])
        self.refused = Refused(self.recorder)
        index_old_refusals(self)  # once per store written by an older dealing
        self._clock = clock or (lambda: datetime.now(UTC))
        self.voids = VoidAuthority.from_env(self.env.get, supervisors)
        self._table_ids: set[str] = set(self._load_table_ids())
        # The open betting windows, kept in memory for the betting clock (which asks
        # often); refreshed from the store after every change, rebuilt here at start.
        self._deadlines: dict[str, BettingDeadline] = {}
        for table_id in self._table_ids:
            self._refresh_deadline(table_id)

    @contextmanager
    def unit_of_work(self, tracking: Tracking | None = None) -> Iterator[UnitOfWork]:
        """The base's unit of work, with the rows of the commands it refused."""
        self.refused.begin()
        uow = UnitOfWork(self, tracking)
        yield uow
        uow.add_rows(self.refused.rows())
        uow.commit()

    # -- entry points ----------------------------------------------------------------
    def handle(self, message: Message, tracking: Tracking | None = None) -> None:
        """Apply one incoming contract message (a table command or a shoe event)."""
        if tracking is not None and self.process_recorder.has_tracking_id(
            tracking.application_name, tracking.notification_id
        ):
            return  # already processed: no second effect
        handler = self._handlers.get(type(message))
        try:
            with self.unit_of_work(tracking) as uow:
                if handler is not None:
                    handler(self, uow, message, None)
        except IntegrityError:
            if tracking is None or not self.process_recorder.has_tracking_id(
                tracking.application_name, tracking.notification_id
            ):
                raise
            # This position was recorded meanwhile: the first delivery won, no second effect.
        table_id = getattr(message, "table_id", None)
        if isinstance(table_id, str) and table_id in self._table_ids:
            self._refresh_deadline(table_id)

    def handle_batch(
        self,
        messages: Sequence[Message],
        tracking: Tracking,
        origins: Sequence[Origin | None] | None = None,
        refusals: Sequence[Refusal | None] | None = None,
    ) -> None:
        """Apply table commands or shoe events (one partition's batch) in ONE transaction.

        The unit of work checkpoints after each message, so the events are recorded (and
        published) in the order the messages were handled, exactly as one transaction per
        message would record them; with 100 tables that is one commit per fetched batch
        instead of one per message. ``origins[i]``: where ``messages[i]`` was read;
        ``refusals[i]``: why the consumer refused it (:meth:`_refused`).
        """
        for extra in (origins, refusals):
            if extra is not None and len(extra) != len(messages):
                raise ValueError("origins and refusals need one entry per message")
        tables: set[str] = set()
        try:
            with self.unit_of_work(tracking) as uow:
                self.refused.prefetch(  # the batch's command ids: one read of the store
                    (m.table_id, m.event_id) for m in messages if isinstance(m, COMMANDS)
                )
                for index, message in enumerate(messages):
                    handler = self._handlers.get(type(message))
                    origin = None if origins is None else origins[index]
                    refusal = None if refusals is None else refusals[index]
                    if refusal is not None:
                        self._refused(uow, message, refusal, origin)
                    elif handler is not None:
                        with message_context(message):  # log records carry its ids
                            handler(self, uow, message, origin)
                    uow.checkpoint()
                    table_id = getattr(message, "table_id", None)
                    if isinstance(table_id, str):
                        tables.add(table_id)
        except IntegrityError:
            if not self.process_recorder.has_tracking_id(
                tracking.application_name, tracking.notification_id
            ):
                raise
            # This position was recorded meanwhile: the first delivery won, no second effect.
        for table_id in sorted(tables & self._table_ids):
            self._refresh_deadline(table_id)

    def handle_bet_events(
        self,
        messages: Sequence[Message],
        tracking: Tracking,
        origins: Sequence[Origin | None] | None = None,
        refusals: Sequence[Refusal | None] | None = None,
    ) -> None:
        """Settlement's bet events (one partition's batch): only BetsClosed matters.

        Every other bet event (a flood of BetAccepted...) is skipped without reading
        any aggregate; the batch's ``tracking`` is recorded in ONE transaction with the
        DrawCards of the BetsClosed among them (:meth:`handle_batch`).
        """
        kept = [index for index, message in enumerate(messages) if isinstance(message, BetsClosed)]
        self.handle_batch(
            [messages[index] for index in kept],
            tracking,
            None if origins is None else [origins[index] for index in kept],
            None if refusals is None else [refusals[index] for index in kept],
        )

    def open_table(self, command: OpenTable) -> None:
        self.handle(command)

    def close_table(self, command: CloseTable) -> None:
        self.handle(command)

    def void_coup(self, command: VoidCoup) -> None:
        self.handle(command)

    def close_betting(self, table_id: str, coup_id: str) -> bool:
        """Close betting on a coup now (the betting clock); True if it was open."""
        with self.unit_of_work() as uow:
            coup = uow.get(coup_aggregate_id(table_id, coup_id), Coup)
            if coup is None or coup.phase is not CoupPhase.BETTING:
                return False
            self._close_betting(coup)
        self._refresh_deadline(table_id)
        return True

    def close_expired_betting(self, now: datetime | None = None) -> list[BettingDeadline]:
        """Close every coup whose betting window has run out; the ones closed."""
        now = now or self._clock()
        closed = []
        for deadline in self.betting_deadlines():
            if deadline.closes_at <= now and self.close_betting(
                deadline.table_id, deadline.coup_id
            ):
                closed.append(deadline)
        return closed

    # -- queries -------------------------------------------------------------------
    def table_ids(self) -> list[str]:
        return sorted(self._table_ids)

    def get_table(self, table_id: str) -> Table | None:
        return self._peek(table_aggregate_id(table_id), Table)

    def get_coup(self, table_id: str, coup_id: str) -> Coup | None:
        return self._peek(coup_aggregate_id(table_id, coup_id), Coup)

    def betting_deadlines(self) -> list[BettingDeadline]:
        """The coups now open for bets, with when their betting closes (earliest first)."""
        return sorted(self._deadlines.values(), key=lambda d: d.closes_at)

    def _refresh_deadline(self, table_id: str) -> None:
        table = self.get_table(table_id)
        coup = None
        if table is not None and table.current_coup_id is not None:
            coup = self.get_coup(table_id, table.current_coup_id)
        if coup is not None and coup.phase is CoupPhase.BETTING:
            self._deadlines[table_id] = BettingDeadline(table_id, coup.coup_id, coup.closes_at)
        else:
            self._deadlines.pop(table_id, None)

    def _peek(self, aggregate_id: UUID, kind: type[A]) -> A | None:
        """The aggregate as recorded, for reading only (the cached object, not a copy)."""
        try:
            found: Aggregate = self.repository.get(aggregate_id, deepcopy_from_cache=False)
        except AggregateNotFoundError:
            return None
        return found if isinstance(found, kind) else None

    def _load_table_ids(self) -> list[str]:
        topic = get_topic(Table.Opened)
        ids: list[str] = []
        start = 1
        while True:
            batch = self.recorder.select_notifications(start, 500, topics=[topic])
            if not batch:
                return ids
            for notification in batch:
                event = self.mapper.to_domain_event(notification)
                ids.append(event.table_id)  # type: ignore[attr-defined]
            start = batch[-1].id + 1

    # -- table commands --------------------------------------------------------------
    def _on_open_table(
        self, uow: UnitOfWork, command: OpenTable, origin: Origin | None = None
    ) -> None:
        problem = settings_problem(command)
        if problem is not None:
            self._reject(uow, command, *problem)
            return
        settings: dict[str, Any] = {
            "decks": command.decks,
            "paytable": command.paytable,
            "limits": {
                bet_type: {"minimum": limit.minimum, "maximum": limit.maximum}
                for bet_type, limit in sorted(command.limits.items())
            },
            "currency": command.currency,
            "betting_window_ms": command.betting_window_ms,
            "cut_card_from_end": command.cut_card_from_end,
            "card_source": command.card_source,
        }
        table = uow.get(table_aggregate_id(command.table_id), Table)
        if table is None:
            table = Table(table_id=command.table_id, **settings)
            uow.add(table)
            self._table_ids.add(command.table_id)
        elif table.status is TableStatus.CLOSED:
            table.reopen(table_id=command.table_id, **settings)
        elif table.status is TableStatus.CLOSING:
            self._reject(
                uow,
                command,
                "TABLE_ALREADY_OPEN",
                f"table {command.table_id} is closing after its current coup; "
                "open it again after TableClosed",
            )
            return
        elif table.settings() == settings:
            return  # the same OpenTable again: already open with these settings
        else:
            self._reject(
                uow,
                command,
                "TABLE_ALREADY_OPEN",
                f"table {command.table_id} is already open with other settings; "
                "close it first (CloseTable) to change them",
            )
            return
        table.request_new_shoe()

    def _on_close_table(
        self, uow: UnitOfWork, command: CloseTable, origin: Origin | None = None
    ) -> None:
        table = uow.get(table_aggregate_id(command.table_id), Table)
        if table is None:
            self._reject(uow, command, "NO_SUCH_TABLE", f"there is no table {command.table_id}")
            return
        if table.status is not TableStatus.OPEN:
            return  # already closed or closing
        if table.current_coup_id is None:
            self._close_now(table, command.reason)
        else:
            table.request_close(command.reason)  # the current coup is finished first

    def _table_and_coup(
        self, uow: UnitOfWork, command: CloseBetting | VoidCoup | CorrectCoup | CorrectResult
    ) -> tuple[Table, Coup] | None:
        """The command's table and coup, or None after refusing it (no such table / coup)."""
        table = uow.get(table_aggregate_id(command.table_id), Table)
        if table is None:
            self._reject(uow, command, "NO_SUCH_TABLE", f"there is no table {command.table_id}")
            return None
        coup = uow.get(coup_aggregate_id(command.table_id, command.coup_id), Coup)
        if coup is None:
            self._reject(
                uow,
                command,
                "NO_SUCH_COUP",
                f"table {command.table_id} has no coup {command.coup_id}",
            )
            return None
        return table, coup

    def _on_close_betting(
        self, uow: UnitOfWork, command: CloseBetting, origin: Origin | None = None
    ) -> None:
        found = self._table_and_coup(uow, command)
        if found is None:
            return
        _, coup = found
        if coup.phase is CoupPhase.BETTING:
            self._close_betting(coup)

    def _on_void_coup(
        self, uow: UnitOfWork, command: VoidCoup, origin: Origin | None = None
    ) -> None:
        """Void on a supervisor's signed decision, verified first (``voids.py``)."""
        now = self._clock()
        decision = self.voids.decision_for(command, now)
        if isinstance(decision, Refusal):
            self._reject(uow, command, decision.code, decision.message)
            return
        if self.refused.before(command.table_id, command.event_id):
            return  # refused before, answered once: its decision is spent (a replay)
        found = self._table_and_coup(uow, command)
        if found is None:
            return
        table, coup = found
        refusal = self.voids.coup_refusal(coup, decision, now)
        if refusal is not None:
            self._reject(uow, command, refusal.code, refusal.message)
            return
        assert command.authorization is not None  # decision_for refuses a void without one
        coup.void(decision.supervisor_id, command.reason, command.authorization)
        if table.current_coup_id == coup.coup_id:
            if table.card_source == "studio":  # its shoe may hold cards read for it
                table.clear_studio_coup(coup.coup_id, command.reason)
            self._after_coup(uow, table, coup)

    def _on_correct_coup(
        self, uow: UnitOfWork, command: CorrectCoup, origin: Origin | None = None
    ) -> None:
        """A held studio coup's cards as a supervisor decided them (signed, verified first):
        its shoe is told to deal them (``AcceptCards``); the coup resolves as they come."""
        decision = self.voids.decision_for(command, self._clock())
        if isinstance(decision, Refusal):
            self._reject(uow, command, decision.code, decision.message)
            return
        found = self._table_and_coup(uow, command)
        if found is None:
            return
        table, coup = found
        why = correction_refusal(table.card_source, table.current_coup_id, coup, command.cards)
        if why is not None:
            self._reject(uow, command, "COUP_NOT_CORRECTABLE", why)
            return
        table.correct_studio_coup(coup.coup_id, command.cards, command.reason)

    def _on_correct_result(
        self, uow: UnitOfWork, command: CorrectResult, origin: Origin | None = None
    ) -> None:
        """A resolved studio coup's result found wrong after settlement, corrected on a
        supervisor's signed decision (verified first, as a void's): ``CoupCorrected``, which
        settlement pays as differences."""
        now = self._clock()
        decision = self.voids.decision_for(command, now)
        if isinstance(decision, Refusal):
            self._reject(uow, command, decision.code, decision.message)
            return
        if self.refused.before(command.table_id, command.event_id):
            return  # refused before, answered once: its decision is spent (a replay)
        found = self._table_and_coup(uow, command)
        if found is None:
            return
        table, coup = found
        refusal = self.voids.result_refusal(table.card_source, coup, command.cards, decision, now)
        if refusal is not None:
            self._reject(uow, command, refusal.code, refusal.message)
            return
        assert command.authorization is not None  # decision_for refuses one without
        coup.correct_result(
            command.event_id,
            list(command.cards),
            decision.supervisor_id,
            command.reason,
            command.authorization,
        )

    # -- settlement's events ----------------------------------------------------------
    def _on_bets_closed(
        self, uow: UnitOfWork, message: BetsClosed, origin: Origin | None = None
    ) -> None:
        """Settlement closed the coup's book: now (and only now) ask the shoe for cards.

        The waiting state is the coup itself (DEALING with no cards requested yet), so
        a restart re-derives it from the store and a second BetsClosed does nothing.
        """
        coup = uow.get(coup_aggregate_id(message.table_id, message.coup_id), Coup)
        if coup is None or coup.phase is not CoupPhase.DEALING or coup.requests:
            return  # unknown, still betting (cannot happen), voided, or dealt already
        table = uow.get(table_aggregate_id(message.table_id), Table)
        if table is None or table.current_coup_id != coup.coup_id:
            return  # not the coup in play
        coup.request_cards(INITIAL_CARDS)

    # -- the shoe's events ---------------------------------------------------------
    def _on_shoe_shuffled(
        self, uow: UnitOfWork, message: ShoeShuffled, origin: Origin | None = None
    ) -> None:
        table = self._table_with_shoe(uow, message.table_id, message.shoe_id)
        if table is not None and table.shoe_state is ShoeState.SHUFFLING:
            table.note_shuffle(message.shoe_id, message.card_count, message.cut_card_index)

    def _on_studio_shoe_opened(
        self, uow: UnitOfWork, message: StudioShoeOpened, origin: Origin | None = None
    ) -> None:
        """A shoe with no cut card placed ahead: its device reads where it comes out
        (``CutCardReached``)."""
        table = self._table_with_shoe(uow, message.table_id, message.shoe_id)
        if table is not None and table.shoe_state is ShoeState.SHUFFLING:
            table.note_shuffle(message.shoe_id, message.card_count, message.card_count)

    def _on_cards_burned(
        self, uow: UnitOfWork, message: CardsBurned, origin: Origin | None = None
    ) -> None:
        table = self._table_with_shoe(uow, message.table_id, message.shoe_id)
        if (
            table is not None
            and table.status is TableStatus.OPEN
            and table.shoe_state is ShoeState.SHUFFLING
            and table.current_coup_id is None
        ):
            self._start_coup(uow, table, message.next_position)

    def _on_card_drawn(
        self, uow: UnitOfWork, message: CardDrawn, origin: Origin | None = None
    ) -> None:
        # The coup is read before the table, so its events are recorded (and published)
        # before the table's (CoupFinished, the next coup, the shoe change).
        coup = uow.get(coup_aggregate_id(message.table_id, message.coup_id), Coup)
        why = "there is no such coup" if coup is None else None
        if coup is not None:
            why = coup.why_unexpected(message.request_id, message.position, message.card)
        if why is not None:
            raise_incident(
                uow,
                SERVICE,
                "CONFLICTING_CARD" if "was dealt as" in why else "UNEXPECTED_CARD",
                f"CardDrawn {message.card} at position {message.position} refused: {why}",
                table_id=message.table_id,
                coup_id=message.coup_id,
                evidence=Evidence.of(message, origin),
            )
            return
        if coup is None or not coup.expects(message.request_id, message.position):
            return  # a copy of a card dealt already, or a card for a finished coup
        table = self._table_with_shoe(uow, message.table_id, message.shoe_id)
        if table is None:
            return
        if (
            table.cut_card_index is not None
            and message.position >= table.cut_card_index
            and not table.cut_card_reached
        ):
            table.note_cut_card(message.position)
        coup.deal(message.card, message.position)
        if coup.phase is CoupPhase.RESOLVED and table.current_coup_id == coup.coup_id:
            self._after_coup(uow, table, coup)

    def _on_cut_card_reached(
        self, uow: UnitOfWork, message: CutCardReached, origin: Origin | None = None
    ) -> None:
        table = self._table_with_shoe(uow, message.table_id, message.shoe_id)
        if table is not None and not table.cut_card_reached:
            table.note_cut_card(message.position)

    def _on_shoe_closed(
        self, uow: UnitOfWork, message: ShoeClosed | StudioShoeClosed, origin: Origin | None = None
    ) -> None:
        """Nothing to do: the reveal is for auditors (the tracking record is kept)."""

    _handlers: ClassVar[
        dict[type[Message], Callable[[DealingApplication, UnitOfWork, Any, Origin | None], None]]
    ] = {
        OpenTable: _on_open_table,
        CloseTable: _on_close_table,
        CloseBetting: _on_close_betting,
        VoidCoup: _on_void_coup,
        CorrectCoup: _on_correct_coup,
        CorrectResult: _on_correct_result,
        ShoeShuffled: _on_shoe_shuffled,
        CardsBurned: _on_cards_burned,
        CardDrawn: _on_card_drawn,
        CutCardReached: _on_cut_card_reached,
        ShoeClosed: _on_shoe_closed,
        StudioShoeOpened: _on_studio_shoe_opened,
        StudioShoeClosed: _on_shoe_closed,
        BetsClosed: _on_bets_closed,
    }
    """Message type -> what dealing does with it."""

    # -- the flow of a table ---------------------------------------------------------
    def _table_with_shoe(self, uow: UnitOfWork, table_id: str, shoe_id: str) -> Table | None:
        table = uow.get(table_aggregate_id(table_id), Table)
        if table is None or table.shoe_id != shoe_id:
            return None  # not this table's shoe in play: stale news
        return table

    def _start_coup(self, uow: UnitOfWork, table: Table, first_position: int | None) -> None:
        """Open the table's next coup; its first card is at ``first_position`` or later."""
        coup_id = table.start_coup()
        assert table.shoe_id is not None
        closes_at = self._clock() + timedelta(milliseconds=table.betting_window_ms)
        coup = Coup(
            table_id=table.table_id,
            coup_id=coup_id,
            coup_number=table.coup_number,
            shoe_id=table.shoe_id,
            closes_at=closes_at,
            last_of_shoe=table.current_coup_last,
            terms={"paytable": table.paytable, "limits": table.limits, "currency": table.currency},
            first_position=first_position,
        )
        uow.add(coup)

    def _close_betting(self, coup: Coup) -> None:
        """Close betting; the cards are asked for on settlement's BetsClosed, not now."""
        coup.close_betting()

    def _after_coup(self, uow: UnitOfWork, table: Table, coup: Coup) -> None:
        """The current coup is resolved or voided: close the table, change shoe, or go on."""
        table.finish_coup()
        if table.status is TableStatus.CLOSING:
            self._close_now(table, table.close_reason)
        elif table.current_coup_last:
            table.finish_shoe()
            table.request_new_shoe()
        else:
            after = coup.positions[-1] + 1 if coup.positions else coup.first_position
            self._start_coup(uow, table, after)

    def _close_now(self, table: Table, reason: str) -> None:
        if table.shoe_state is not ShoeState.CLOSED:
            table.finish_shoe()
        table.close(reason)

    def _refused(
        self, uow: UnitOfWork, message: Message, refusal: Refusal, origin: Origin | None
    ) -> None:
        """A message the consumer refused (``Delivery.refusal``): a table command is answered
        with a CommandRejected, a service's fact is an incident; nothing else changes."""
        if type(message) in TABLE_COMMANDS:
            self._reject(uow, message, refusal.code, refusal.message)
        else:
            refuse_fact(uow, SERVICE, message, refusal.code, refusal.message, origin)

    def _reject(self, uow: UnitOfWork, command: Message, code: str, message: str) -> None:
        """Answer ``command`` CommandRejected, once per command id and table id (one read
        where its table's history is not, ``contracts.MISPLACED``, leaves the id free there)."""
        table_id: str = getattr(command, "table_id", "")
        if code not in MISPLACED and not self.refused.add(table_id, command.event_id):
            return  # refused before: answered once
        rejections = uow.get(rejections_aggregate_id(table_id), CommandRejections)
        if rejections is None:
            rejections = CommandRejections(table_id=table_id)
            uow.add(rejections)
        rejections.reject(command.event_id, type(command).__name__, code, message)
