"""The gateway Application: one operator's bets, its wallet calls, its tables and its days.

Entry points:

- :meth:`GatewayApplication.request`: a bet from the HTTP API, idempotent by the operator's bet
  id (the same content returns the recorded bet; other content raises :class:`Conflict`). With
  a wallet the bet asks for its debit first; without, it is placed at once (its ``Placed``
  fact is what the outbox relay publishes as the PlaceBet);
- :meth:`GatewayApplication.handle`: one delivery of the operator's bet-events topic (answers,
  settlements, refunds) or of table-events (the tables' public facts), in the batch's unit of
  work with its tracking record (``services.shared.platform.consumer.with_unit_of_work``);
- :meth:`GatewayApplication.record_call`: what the wallet answered a call (``outbox.py``).

The gateway is its operator's one writer of the operator's bet-commands topic. A bet id that
settlement answers before this gateway placed it was placed by another writer (another
client with the gateway's credentials): this gateway's copy would be a resend, which
settlement answers with nothing, so it is refused ``DUPLICATE_BET_ID`` instead of waiting for
ever with its stake debited: at once when it is requested after (the id is recorded as taken
on its coup's :class:`~services.gateway.domain.Round`), with its debit rolled back when it
was on its way.

Every fact that moves money also adds to its day's :class:`~services.gateway.domain.Ledger` in
the same transaction: a settlement, correction or refund on the day settlement recorded it (the
message's ``occurred_at``, UTC), a wallet call on the day the wallet confirmed it.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, NamedTuple, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import Tracking

from contracts import (
    HOUSE,
    NON_BINDING,
    BetAccepted,
    BetCorrected,
    BetRefunded,
    BetRejected,
    BetSettled,
    BettingClosed,
    BettingOpened,
    CardDealt,
    CoupResolved,
    CoupVoided,
    Message,
    TableClosed,
    TableOpened,
)
from services.gateway.domain import (
    Bet,
    Kind,
    Ledger,
    Round,
    Status,
    Table,
    bet_aggregate_id,
    ledger_aggregate_id,
    round_aggregate_id,
    table_aggregate_id,
)
from services.shared.platform.consumer import Delivery
from services.shared.platform.store import Evidence, ServiceApplication, UnitOfWork, raise_incident

A = TypeVar("A", bound=Aggregate)

PUBLIC_FACTS = (
    TableOpened,
    TableClosed,
    BettingOpened,
    BettingClosed,
    CardDealt,
    CoupResolved,
    CoupVoided,
)
"""The table-events facts players see (the feed, the rounds); CommandRejected is not one."""


class Call(NamedTuple):
    """A wallet call's outcome to record (:meth:`GatewayApplication.record_call`)."""

    bet_id: str
    kind: Kind
    outcome: str
    status: int | None
    balance: int | None
    reason_code: str = ""
    message: str = ""
    incident: tuple[str, str] | None = None
    correction: str = ""  # a correction's call: the correction it is for


class Conflict(Exception):
    """The bet id was used for a bet with other content."""


DUPLICATE = "DUPLICATE_BET_ID"


@dataclass(frozen=True, slots=True)
class BetRequest:
    """A bet as the platform sent it (already bounded by the API's model)."""

    bet_id: str
    player_id: str
    table_id: str
    coup_id: str
    bet_type: str
    amount: int
    currency: str

    @property
    def digest(self) -> str:
        """SHA-256 of the content: the same bet id with another digest is a conflict."""
        text = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


class GatewayApplication(ServiceApplication):
    """One operator's gateway store (see the module docstring)."""

    name = "gateway"
    env: ClassVar[dict[str, str]] = {**ServiceApplication.env, "AGGREGATE_CACHE_MAXSIZE": "20000"}
    snapshotting_intervals: ClassVar[dict[type[Any], int]] = {Table: 100, Ledger: 100}

    def __init__(
        self,
        env: dict[str, str] | None = None,
        *,
        operator: str = HOUSE,
        service: str = "gateway",
        wallet: bool = False,
        zero_credits: bool = False,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        super().__init__(env)
        self.operator = operator
        self.service = service  # the store's and its incidents' name (gateway-<operator>)
        self.wallet = wallet  # the operator has a wallet: stakes are debited first
        self.zero_credits = zero_credits  # a losing bet gets a zero credit (round closure)
        self._clock = clock or (lambda: datetime.now(UTC))
        self._tallies: dict[tuple[str, str], dict[str, int]] = {}
        self._answered: dict[tuple[str, str], list[str]] = {}
        self._taken: dict[tuple[str, str], list[str]] = {}

    # -- units of work that also add to the days' figures ------------------------------
    @contextmanager
    def unit_of_work(self, tracking: Tracking | None = None) -> Iterator[UnitOfWork]:
        uow = UnitOfWork(self, tracking)
        self._tallies = {}
        self._answered = {}
        self._taken = {}
        yield uow  # a failure leaves the cache as it was: the unit's aggregates are copies
        self._add_tallies(uow)
        self._add_round_bets(uow)
        uow.commit()  # which evicts them if it raises (its commit may have landed)

    def _tally(self, day: str, currency: str, **deltas: int) -> None:
        figures = self._tallies.setdefault((day, currency), defaultdict(int))
        for name, delta in deltas.items():
            figures[name] += delta

    def _add_tallies(self, uow: UnitOfWork) -> None:
        by_day: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)
        for (day, currency), figures in self._tallies.items():
            by_day[day][currency] = dict(figures)
        for day, deltas in sorted(by_day.items()):
            ledger = uow.get(ledger_aggregate_id(day), Ledger)
            if ledger is None:
                ledger = Ledger(day=day)
                uow.add(ledger)
            ledger.tally(deltas)
        self._tallies = {}

    def _add_round_bets(self, uow: UnitOfWork) -> None:
        for (table_id, coup_id), bet_ids in self._answered.items():
            self._round(uow, table_id, coup_id).add_bets(bet_ids)
        for (table_id, coup_id), bet_ids in self._taken.items():
            self._round(uow, table_id, coup_id).take(bet_ids)
        self._answered = {}
        self._taken = {}

    @staticmethod
    def _round(uow: UnitOfWork, table_id: str, coup_id: str) -> Round:
        found = uow.get(round_aggregate_id(table_id, coup_id), Round)
        if found is None:
            found = Round(table_id=table_id, coup_id=coup_id)
            uow.add(found)
        return found

    # -- bets from the API -------------------------------------------------------------
    def request(self, request: BetRequest) -> Bet:
        """The operator's bet ``request.bet_id``: recorded now, or as recorded before (same
        content); :class:`Conflict` when recorded with other content."""
        (found,) = self.requests([request])
        if isinstance(found, Conflict):
            raise found
        return found

    def requests(self, requests: Sequence[BetRequest]) -> list[Bet | Conflict]:
        """:meth:`request` for many (the API's concurrent requests), in ONE transaction."""
        with self.unit_of_work() as uow:
            return [self._request(uow, request) for request in requests]

    def _request(self, uow: UnitOfWork, request: BetRequest) -> Bet | Conflict:
        digest = request.digest
        bet = uow.get(bet_aggregate_id(self.operator, request.bet_id), Bet)
        if bet is not None:
            if bet.digest != digest:
                return Conflict(request.bet_id)
            return bet
        coup = uow.get(round_aggregate_id(request.table_id, request.coup_id), Round)
        taken = coup is not None and request.bet_id in coup.taken
        bet = Bet(
            operator=self.operator,
            bet_id=request.bet_id,
            table_id=request.table_id,
            coup_id=request.coup_id,
            bettor_id=request.player_id,
            bet_type=request.bet_type,
            amount=request.amount,
            currency=request.currency,
            digest=digest,
            debit=self.wallet and not taken,
        )
        if taken:
            bet.answer(False, DUPLICATE, self._taken_message(request.bet_id))
            self._answered.setdefault((bet.table_id, bet.coup_id), []).append(bet.bet_id)
        elif not self.wallet:
            bet.place()
        uow.add(bet)
        return bet

    def _taken_message(self, bet_id: str) -> str:
        return (
            f"bet id {bet_id} was placed on operator {self.operator}'s bet-commands topic by "
            "another client before this gateway placed it: no money moves for it here; use a "
            "new bet id"
        )

    # -- what the wallet answered --------------------------------------------------------
    def record_call(
        self,
        bet_id: str,
        kind: Kind,
        outcome: str,
        status: int | None,
        balance: int | None,
        *,
        reason_code: str = "",
        message: str = "",
        incident: tuple[str, str] | None = None,
        correction: str = "",
    ) -> Bet | None:
        """Record a call's outcome: ``confirmed`` (a debit also places the bet),
        ``refused`` or ``unknown`` (a debit only: the bet is refused, an unknown debit rolled
        back); ``incident``: (code, message) of an answer not to be trusted; ``correction``:
        the correction a correction's call is for."""
        call = Call(
            bet_id, kind, outcome, status, balance, reason_code, message, incident, correction
        )
        (found,) = self.record_calls([call])
        return found

    def record_calls(self, calls: Sequence[Call]) -> list[Bet | None]:
        """:meth:`record_call` for many (the wallet's answers as they come), in ONE
        transaction."""
        with self.unit_of_work() as uow:
            return [self._record_call(uow, *call) for call in calls]

    def _record_call(
        self,
        uow: UnitOfWork,
        bet_id: str,
        kind: Kind,
        outcome: str,
        status: int | None,
        balance: int | None,
        reason_code: str,
        message: str,
        incident: tuple[str, str] | None,
        correction: str,
    ) -> Bet | None:
        bet = uow.get(bet_aggregate_id(self.operator, bet_id), Bet)
        if bet is None:
            return None
        if incident is not None:
            code, text = incident
            raise_incident(
                uow,
                self.service,
                code,
                text,
                table_id=bet.table_id,
                coup_id=bet.coup_id,
                evidence=Evidence(f"wallet {kind.path}"),
            )
        if (kind, correction) in bet.confirmed:
            return bet  # answered already (a call answered twice)
        if kind is Kind.DEBIT and not bet.debit_pending:
            if outcome == "confirmed" and not bet.placed and Kind.ROLLBACK in bet.requested:
                # Refused while its debit was on its way (its id taken): the stake goes back.
                bet.confirm(kind.value, status or 0, balance)
                self._tally_call(bet, kind)
            return bet
        if outcome == "confirmed":
            bet.confirm(kind.value, status or 0, balance, correction)
            if kind is Kind.DEBIT:
                bet.place()
            self._tally_call(bet, kind, correction)
        elif kind is Kind.DEBIT:
            bet.debit_failed(reason_code, message, status, outcome == "unknown")
        return bet

    def _tally_call(self, bet: Bet, kind: Kind, correction: str = "") -> None:
        count, amount = {
            Kind.DEBIT: ("debits", "debited"),
            Kind.CREDIT: ("credits", "credited"),
            Kind.ROLLBACK: ("rollbacks", "rolled_back"),
            Kind.CREDIT_ROLLBACK: ("credit_rollbacks", "credits_rolled_back"),
            Kind.CORRECTION_CREDIT: ("correction_credits", "correction_credited"),
            Kind.CORRECTION_DEBIT: ("correction_debits", "correction_debited"),
            Kind.CORRECTION_ROLLBACK: ("correction_rollbacks", "corrections_rolled_back"),
        }[kind]
        day = self._clock().date().isoformat()
        moved = bet.transaction(kind, correction).amount
        self._tally(day, bet.currency, **{count: 1, amount: moved})

    # -- what the platform consumes ----------------------------------------------------
    def handle(self, uow: UnitOfWork, delivery: Delivery) -> None:
        """One delivery of the operator's bet events or of the table events."""
        message = delivery.message
        if isinstance(message, PUBLIC_FACTS):
            self._on_table_fact(uow, message)
            return
        if not isinstance(
            message, BetAccepted | BetRejected | BetSettled | BetRefunded | BetCorrected
        ):
            return  # CoupSettled, CoupRefunded, CoupSettlementCorrected...: nothing to do
        bet = uow.get(bet_aggregate_id(self.operator, message.bet_id), Bet)
        if bet is None or not bet.placed:
            if isinstance(message, BetAccepted | BetRejected):
                self._placed_elsewhere(bet, message)
            return  # a bet this gateway did not place (another client of the operator's)
        day = message.occurred_at.astimezone(UTC).date().isoformat()
        if isinstance(message, BetAccepted | BetRejected):
            if not bet.answered:
                reason = None if isinstance(message, BetAccepted) else message.reason_code
                text = "" if isinstance(message, BetAccepted) else message.message
                bet.answer(reason is None, reason, text)
                self._answered.setdefault((bet.table_id, bet.coup_id), []).append(bet.bet_id)
        elif bet.status is not Status.ACCEPTED:
            return  # settled after another client placed its id again: not this bet's money
        elif isinstance(message, BetSettled):
            if bet.settlement is None:
                credit = message.returned > 0 or self.zero_credits
                bet.settle(
                    message.result,
                    message.stake,
                    message.payout,
                    message.returned,
                    credit,
                    day,
                )
                self._tally(
                    day,
                    message.currency,
                    bets=1,
                    staked=message.stake,
                    returned=message.returned,
                    payout=message.payout,
                )
        elif isinstance(message, BetCorrected):
            correction = str(message.correction_id)
            new = correction not in bet.corrections and bet.refund is None
            if bet.settlement is not None and new:
                returned = bet.settlement["returned"] + message.difference
                bet.correct(
                    correction, message.result, message.payout, returned, message.difference, day
                )
                self._tally(day, message.currency, corrections=1, corrected=message.difference)
        elif bet.refund is None:
            bet.refunded(message.stake, message.adjustment, day)
            self._tally(
                day,
                message.currency,
                refunds=1,
                refunded=message.stake,
                adjusted=message.adjustment,
            )

    def _placed_elsewhere(self, bet: Bet | None, message: BetAccepted | BetRejected) -> None:
        """Settlement answered a bet id this gateway has not placed (see the module
        docstring): the id is taken on its coup unless the answer leaves it free, and this
        gateway's bet, if its debit is on its way, is refused and its stake rolled back."""
        if isinstance(message, BetRejected) and message.reason_code in NON_BINDING:
            return  # the id is free: this gateway's copy will be judged afresh
        self._taken.setdefault((message.table_id, message.coup_id), []).append(message.bet_id)
        if bet is not None and bet.status is Status.PENDING:
            bet.answer(False, DUPLICATE, self._taken_message(bet.bet_id))
            self._answered.setdefault((bet.table_id, bet.coup_id), []).append(bet.bet_id)

    def _on_table_fact(self, uow: UnitOfWork, message: Message) -> None:
        table_id: str = getattr(message, "table_id")  # noqa: B009 (every public fact has one)
        table = uow.get(table_aggregate_id(table_id), Table)
        if table is None:
            table = Table(table_id=table_id)
            uow.add(table)
        payload = message.model_dump(mode="json")
        table.add(type(message).__name__, getattr(message, "coup_id", None), payload)

    # -- queries -------------------------------------------------------------------------
    def bet(self, bet_id: str) -> Bet | None:
        return self._peek(bet_aggregate_id(self.operator, bet_id), Bet)

    def bet_by_id(self, aggregate_id: UUID) -> Bet | None:
        return self._peek(aggregate_id, Bet)

    def table(self, table_id: str) -> Table | None:
        return self._peek(table_aggregate_id(table_id), Table)

    def round_bets(self, table_id: str, coup_id: str) -> list[str]:
        found = self._peek(round_aggregate_id(table_id, coup_id), Round)
        return [] if found is None else list(found.bet_ids)

    def ledger(self, day: str) -> Ledger | None:
        return self._peek(ledger_aggregate_id(day), Ledger)

    def _peek(self, aggregate_id: UUID, kind: type[A]) -> A | None:
        try:
            found: Aggregate = self.repository.get(aggregate_id)
        except AggregateNotFoundError:
            return None
        return found if isinstance(found, kind) else None

    def tables(self, table_ids: Iterable[str]) -> list[Table]:
        return [t for t in (self.table(table_id) for table_id in table_ids) if t is not None]

    def table_facts(
        self, table_id: str, after: int = 0, upto: int | None = None, limit: int = 500
    ) -> list[tuple[int, dict[str, Any]]]:
        """The table's facts after version ``after`` (its feed), oldest first: (version,
        the fact as received)."""
        found: Iterable[Any] = self.repository.event_store.get(
            table_aggregate_id(table_id), gt=after, lte=upto, limit=limit
        )
        return [
            (event.originator_version, dict(event.payload))
            for event in found
            if isinstance(event, Table.Fact)
        ]

    def table_ids(self) -> list[str]:
        """Every table the gateway has heard of (its Started events)."""
        topic = "services.gateway.domain:Table.Started"
        found: list[str] = []
        start = 1
        while page := self.process_recorder.select_notifications(start, 1000, topics=[topic]):
            found += [getattr(self.mapper.to_domain_event(n), "table_id") for n in page]  # noqa: B009
            start = page[-1].id + 1
        return found

    def bets_after(self, position: int, limit: int = 1000) -> tuple[list[UUID], int]:
        """Bets with events after notification ``position`` (their ids once each), and the
        last notification read (``position`` when none)."""
        page = self.process_recorder.select_notifications(
            position + 1, limit, topics=list(BET_TOPICS)
        )
        ids = list(dict.fromkeys(UUID(str(n.originator_id)) for n in page))
        return ids, (page[-1].id if page else position)


BET_TOPICS = tuple(
    cls.TOPIC
    for cls in (
        Bet.Requested,
        Bet.Placed,
        Bet.DebitFailed,
        Bet.Answered,
        Bet.Settled,
        Bet.Refunded,
        Bet.Corrected,
        Bet.Confirmed,
    )
)
"""The stored topics of a bet's events (what the wallet outbox scans at its start)."""
