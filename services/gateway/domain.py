"""The gateway's domain: one operator's bets, the wallet calls that move their money, the tables
its players see and the day's figures.

- :class:`Bet` (one per operator bet id): the request as the platform sent it, its answer, its
  settlement or refund, and its wallet transactions. Each wallet call is derived from the bet's
  facts (a debit when the bet needs one, a rollback when a debited bet is refused, voided or its
  debit's fate is unknown, a credit of ``returned`` when it is settled, a rollback of that
  credit when a settled coup is voided; for each correction of a settled bet's result, a
  credit or a debit of its difference, and that call's rollback when the coup is voided) and is
  *requested* by the fact that calls for it, *confirmed* by :class:`Bet.Confirmed` or, for a
  debit only, *failed* by :class:`Bet.DebitFailed`. Its id is deterministic
  (:func:`transaction_id`), so a call sent again after any crash is the same call.
- :class:`Table` (one per table): the table's public facts as received, in order (the feed the
  server-sent events replay by version), its terms and the coup open for bets, and where each
  recent coup's facts are in the feed (the rounds).
- :class:`Ledger` (one per UTC day): the day's figures per currency, added in the same
  transaction as the facts they count.

Imports eventsourcing's domain only: no Kafka, no HTTP, no database.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from services.shared.facts.topics import register_stored_topics


class Kind(StrEnum):
    """The kind of a wallet call (its path: ``{wallet}/debit``, ``/credit``, ``/rollback``)."""

    DEBIT = "debit"
    CREDIT = "credit"
    ROLLBACK = "rollback"  # of the debit: the stake goes back
    CREDIT_ROLLBACK = "credit-rollback"  # of the credit (a settled coup voided)
    CORRECTION_CREDIT = "correction-credit"  # a correction's difference owed to the player
    CORRECTION_DEBIT = "correction-debit"  # a correction's difference taken back
    CORRECTION_ROLLBACK = "correction-rollback"  # of a correction's call (a corrected coup voided)

    @property
    def path(self) -> str:
        return _PATHS.get(self, self.value)


_PATHS = {
    Kind.CREDIT_ROLLBACK: "rollback",
    Kind.CORRECTION_CREDIT: "credit",
    Kind.CORRECTION_DEBIT: "debit",
    Kind.CORRECTION_ROLLBACK: "rollback",
}
CORRECTION_CALLS = (Kind.CORRECTION_CREDIT, Kind.CORRECTION_DEBIT)
"""A correction's own call: its difference paid, or taken back."""
CORRECTIONS = (*CORRECTION_CALLS, Kind.CORRECTION_ROLLBACK)
"""The calls made once per correction of a bet (the others once per bet)."""


def correction_call(difference: int) -> Kind:
    """The call that moves a correction's ``difference`` (owed to the player when > 0)."""
    return Kind.CORRECTION_CREDIT if difference > 0 else Kind.CORRECTION_DEBIT


TX_NAMESPACE = UUID("3c5b0e4a-6f0e-4b8e-a2c4-5d2f8b1e7a90")


def transaction_id(operator: str, bet_id: str, kind: Kind, correction: str = "") -> str:
    """The wallet transaction id of a bet's call of ``kind`` (of ``correction``, for a
    correction's call): the same for every try."""
    name = f"{operator}\n{bet_id}\n{kind.value}" + (f"\n{correction}" if correction else "")
    return str(uuid5(TX_NAMESPACE, name))


def bet_aggregate_id(operator: str, bet_id: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"/punto-banco/gateway/{operator}/bets/{bet_id}")


@dataclass(frozen=True, slots=True)
class Transaction:
    """A wallet call a bet needs (``reference``: the transaction a rollback reverses;
    ``correction``: the correction a correction's call is for)."""

    kind: Kind
    transaction_id: str
    amount: int
    reference: str | None = None
    correction: str = ""

    @property
    def key(self) -> tuple[Kind, str]:
        return self.kind, self.correction


class Status(StrEnum):
    PENDING = "PENDING"
    ACCEPTED = "ACCEPTED"
    REJECTED = "REJECTED"


class Bet(Aggregate):
    """One bet of the operator (see the module docstring)."""

    class Requested(Aggregate.Created):
        TOPIC = "services.gateway.domain:Bet.Requested"
        operator: str
        bet_id: str
        table_id: str
        coup_id: str
        bettor_id: str
        bet_type: str
        amount: int
        currency: str
        digest: str  # of the request's content: the same bet id with another is a conflict
        debit: bool  # the operator has a wallet: the stake is debited before the bet goes on

    class Placed(Aggregate.Event):
        """The bet goes to settlement: published as a PlaceBet (fields by name)."""

        TOPIC = "services.gateway.domain:Bet.Placed"
        table_id: str
        bet_id: str
        coup_id: str
        bettor_id: str
        bet_type: str
        amount: int
        currency: str

    class DebitFailed(Aggregate.Event):
        """The debit was refused (``unknown`` False: nothing moved) or its fate is unknown
        (a time-out, a 5xx, no answer: rolled back). The bet is refused."""

        TOPIC = "services.gateway.domain:Bet.DebitFailed"
        reason_code: str
        message: str
        status: int | None
        unknown: bool

    class Answered(Aggregate.Event):
        TOPIC = "services.gateway.domain:Bet.Answered"
        accepted: bool
        reason_code: str | None
        message: str

    class Settled(Aggregate.Event):
        TOPIC = "services.gateway.domain:Bet.Settled"
        result: str
        stake: int
        payout: int
        returned: int
        credit: bool  # a credit call is made (returned > 0, or zero credits asked for)
        day: str

    class Refunded(Aggregate.Event):
        TOPIC = "services.gateway.domain:Bet.Refunded"
        stake: int
        adjustment: int
        day: str

    class Corrected(Aggregate.Event):
        """The settled bet's result was corrected (``BetCorrected``): ``difference`` moves."""

        TOPIC = "services.gateway.domain:Bet.Corrected"
        correction_id: str
        result: str
        payout: int
        returned: int
        difference: int
        day: str

    class Confirmed(Aggregate.Event):
        """The wallet answered a call (200, or 404 to a rollback: it never had the call)."""

        TOPIC = "services.gateway.domain:Bet.Confirmed"
        kind: str
        status: int
        balance: int | None
        correction: str = ""

    @staticmethod
    def create_id(operator: str, bet_id: str, **_: Any) -> UUID:
        return bet_aggregate_id(operator, bet_id)

    @event(Requested)
    def __init__(
        self,
        operator: str,
        bet_id: str,
        table_id: str,
        coup_id: str,
        bettor_id: str,
        bet_type: str,
        amount: int,
        currency: str,
        digest: str,
        debit: bool,
    ) -> None:
        self.operator = operator
        self.bet_id = bet_id
        self.table_id = table_id
        self.coup_id = coup_id
        self.bettor_id = bettor_id
        self.bet_type = bet_type
        self.amount = amount
        self.currency = currency
        self.digest = digest
        self.debit = debit
        self.placed = False
        self.status = Status.PENDING
        self.reason_code: str | None = None
        self.message = ""
        self.debit_unknown = False
        self.settlement: dict[str, Any] | None = None
        self.refund: dict[str, Any] | None = None
        self.requested: set[Kind] = {Kind.DEBIT} if debit else set()
        self.confirmed: dict[tuple[Kind, str], dict[str, Any]] = {}  # (kind, correction) ->
        self.corrections: dict[str, int] = {}  # correction id -> difference, in their order

    # -- commands ---------------------------------------------------------------------
    def place(self) -> None:
        """Send the bet to settlement (after its debit, when it needs one)."""
        self._placed(
            table_id=self.table_id,
            bet_id=self.bet_id,
            coup_id=self.coup_id,
            bettor_id=self.bettor_id,
            bet_type=self.bet_type,
            amount=self.amount,
            currency=self.currency,
        )

    @event(Placed)
    def _placed(
        self,
        table_id: str,
        bet_id: str,
        coup_id: str,
        bettor_id: str,
        bet_type: str,
        amount: int,
        currency: str,
    ) -> None:
        self.placed = True

    @event(DebitFailed)
    def debit_failed(
        self, reason_code: str, message: str, status: int | None, unknown: bool
    ) -> None:
        self.status = Status.REJECTED
        self.reason_code = reason_code
        self.message = message
        self.debit_unknown = unknown
        if unknown:
            self.requested.add(Kind.ROLLBACK)

    @event(Answered)
    def answer(self, accepted: bool, reason_code: str | None, message: str) -> None:
        self.status = Status.ACCEPTED if accepted else Status.REJECTED
        self.reason_code = reason_code
        self.message = message
        if not accepted and self.debit:
            self.requested.add(Kind.ROLLBACK)

    @event(Settled)
    def settle(
        self, result: str, stake: int, payout: int, returned: int, credit: bool, day: str
    ) -> None:
        self.settlement = {"result": result, "stake": stake, "payout": payout}
        self.settlement["returned"] = returned
        if credit and self.debit:
            self.requested.add(Kind.CREDIT)

    @event(Refunded)
    def refunded(self, stake: int, adjustment: int, day: str) -> None:
        self.refund = {"stake": stake, "adjustment": adjustment}
        if self.debit:
            self.requested.add(Kind.ROLLBACK)
            if Kind.CREDIT in self.requested:
                self.requested.add(Kind.CREDIT_ROLLBACK)

    @event(Corrected)
    def correct(
        self, correction_id: str, result: str, payout: int, returned: int, difference: int, day: str
    ) -> None:
        self.settlement = {**(self.settlement or {}), "result": result, "payout": payout}
        self.settlement["returned"] = returned
        self.corrections[correction_id] = difference

    @event(Confirmed)
    def confirm(self, kind: str, status: int, balance: int | None, correction: str = "") -> None:
        self.confirmed[(Kind(kind), correction)] = {"status": status, "balance": balance}

    # -- queries ----------------------------------------------------------------------
    @property
    def answered(self) -> bool:
        return self.status is not Status.PENDING

    def transaction(self, kind: Kind, correction: str = "") -> Transaction:
        """The call of ``kind`` (of ``correction``, for a correction's call)."""
        tx = partial(transaction_id, self.operator, self.bet_id)
        if kind in CORRECTIONS:
            difference = self.corrections[correction]
            made = correction_call(difference)
            reverses = tx(made, correction) if kind is Kind.CORRECTION_ROLLBACK else None
            return Transaction(kind, tx(kind, correction), abs(difference), reverses, correction)
        reference = {Kind.ROLLBACK: Kind.DEBIT, Kind.CREDIT_ROLLBACK: Kind.CREDIT}.get(kind)
        # the settlement's credit: what the bet returned before any correction
        returned = int((self.settlement or {}).get("returned", 0)) - sum(self.corrections.values())
        amount = returned if kind in (Kind.CREDIT, Kind.CREDIT_ROLLBACK) else self.amount
        return Transaction(kind, tx(kind), amount, None if reference is None else tx(reference))

    def calls(self) -> list[Transaction]:
        """Every call the bet's facts requested, in the order they are made."""
        found = [self.transaction(kind) for kind in Kind if kind in self.requested]
        if not self.debit:
            return found  # the operator has no wallet: corrections move nothing here
        for correction, difference in self.corrections.items():
            if difference == 0:
                continue
            made = correction_call(difference)
            if self.refund is None or (made, correction) in self.confirmed:
                found.append(self.transaction(made, correction))
            if self.refund is not None:  # voided: whatever the call did is reversed
                found.append(self.transaction(Kind.CORRECTION_ROLLBACK, correction))
        return found

    def unconfirmed(self) -> list[Transaction]:
        """The calls requested and not confirmed (a failed debit is not one)."""
        failed = {Kind.DEBIT} if self.status is Status.REJECTED and not self.placed else set()
        return [tx for tx in self.calls() if tx.key not in self.confirmed and tx.kind not in failed]

    def due(self) -> list[Transaction]:
        """The calls to make now.

        - A correction's call only once the settlement's credit and the corrections before it
          are confirmed (the player is paid in the order the results were decided), and never
          once the coup is voided: its rollback goes instead (a 404 if the wallet never had
          the call, which the wallet then refuses if it comes late).
        - A credit's rollback only once the credit is confirmed (a rollback must never overtake
          the call it reverses) and the corrections' rollbacks are.
        """
        waiting = self.unconfirmed()
        first_correction = next((tx for tx in waiting if tx.kind in CORRECTION_CALLS), None)
        credit_open = any(tx.kind is Kind.CREDIT for tx in waiting)
        corrections_open = any(tx.kind is Kind.CORRECTION_ROLLBACK for tx in waiting)
        due = []
        for tx in waiting:
            if tx.kind is Kind.CREDIT_ROLLBACK and (
                (Kind.CREDIT, "") not in self.confirmed or corrections_open
            ):
                continue
            if tx.kind in CORRECTION_CALLS and (credit_open or tx is not first_correction):
                continue
            due.append(tx)
        return due

    @property
    def debit_pending(self) -> bool:
        return self.debit and not self.placed and self.status is Status.PENDING

    @property
    def done(self) -> bool:
        """Nothing more will happen unless settlement says more (a void): answered, settled,
        refunded or refused, and every call confirmed."""
        if self.unconfirmed():
            return False
        if self.status is Status.REJECTED:
            return True
        return self.status is Status.ACCEPTED and (
            self.settlement is not None or self.refund is not None
        )


def table_aggregate_id(table_id: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"/punto-banco/gateway/tables/{table_id}")


MAX_ROUNDS = 5000
"""Rounds (coups) per table whose place in the feed is kept: older ones are not recalled."""


class Table(Aggregate):
    """A table as its players see it (see the module docstring)."""

    class Started(Aggregate.Created):
        TOPIC = "services.gateway.domain:Table.Started"
        table_id: str

    class Fact(Aggregate.Event):
        """One public fact of the table, as received (the contract's JSON)."""

        TOPIC = "services.gateway.domain:Table.Fact"
        kind: str
        coup_id: str | None
        payload: dict[str, Any]

    @staticmethod
    def create_id(table_id: str, **_: Any) -> UUID:
        return table_aggregate_id(table_id)

    @event(Started)
    def __init__(self, table_id: str) -> None:
        self.table_id = table_id
        self.terms: dict[str, Any] | None = None
        self.open = False
        self.coup: dict[str, Any] | None = None  # the coup open for bets
        self.rounds: dict[str, list[int]] = {}  # coup id -> [first version, last version]

    @event(Fact)
    def add(self, kind: str, coup_id: str | None, payload: dict[str, Any]) -> None:
        if kind == "TableOpened":
            self.open = True
            self.terms = {k: payload[k] for k in ("currency", "paytable", "limits", "decks")}
            self.terms["betting_window_ms"] = payload["betting_window_ms"]
        elif kind == "TableClosed":
            self.open = False
            self.coup = None
        elif kind == "BettingOpened":
            self.coup = {k: payload[k] for k in ("coup_id", "coup_number", "closes_at")}
        elif kind == "BettingClosed" and self.coup and self.coup["coup_id"] == coup_id:
            self.coup = None
        if coup_id is not None:
            version = self.version + 1  # this fact's (the aggregate's is set after apply)
            span = self.rounds.get(coup_id)
            if span is None:
                self.rounds[coup_id] = [version, version]
                if len(self.rounds) > MAX_ROUNDS:
                    del self.rounds[next(iter(self.rounds))]
            else:
                span[1] = version


def round_aggregate_id(table_id: str, coup_id: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"/punto-banco/gateway/rounds/{table_id}/{coup_id}")


class Round(Aggregate):
    """The operator's bets on one coup, in the order settlement answered them, and the bet ids
    of the coup another writer of the operator's bet-commands topic placed first (*taken*:
    settlement answered them before this gateway placed them, so a copy this gateway placed
    would be a resend, which settlement answers with nothing)."""

    class Started(Aggregate.Created):
        TOPIC = "services.gateway.domain:Round.Started"
        table_id: str
        coup_id: str

    class BetsAnswered(Aggregate.Event):
        TOPIC = "services.gateway.domain:Round.BetsAnswered"
        bet_ids: list[str]

    class BetIdsTaken(Aggregate.Event):
        TOPIC = "services.gateway.domain:Round.BetIdsTaken"
        bet_ids: list[str]

    @staticmethod
    def create_id(table_id: str, coup_id: str, **_: Any) -> UUID:
        return round_aggregate_id(table_id, coup_id)

    @event(Started)
    def __init__(self, table_id: str, coup_id: str) -> None:
        self.table_id = table_id
        self.coup_id = coup_id
        self.bet_ids: list[str] = []
        self.taken: set[str] = set()

    @event(BetsAnswered)
    def add_bets(self, bet_ids: list[str]) -> None:
        self.bet_ids.extend(bet_ids)

    @event(BetIdsTaken)
    def take(self, bet_ids: list[str]) -> None:
        self.taken.update(bet_ids)


def ledger_aggregate_id(day: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"/punto-banco/gateway/days/{day}")


FIGURES = (
    "bets",
    "staked",
    "returned",
    "payout",
    "refunds",
    "refunded",
    "adjusted",
    "debits",
    "debited",
    "credits",
    "credited",
    "rollbacks",
    "rolled_back",
    "credit_rollbacks",
    "credits_rolled_back",
    "corrections",
    "corrected",
    "correction_credits",
    "correction_credited",
    "correction_debits",
    "correction_debited",
    "correction_rollbacks",
    "corrections_rolled_back",
)
"""A day's figures per currency (counts and minor units): settled bets, their stakes, what
they returned and their net winnings; refunds, their stakes and adjustments; corrections of
settled bets and the sum of their differences; the wallet's confirmed calls by kind and their
amounts (a correction's calls move its difference's absolute value)."""


class Ledger(Aggregate):
    """One UTC day's figures per currency (see :data:`FIGURES`)."""

    class Started(Aggregate.Created):
        TOPIC = "services.gateway.domain:Ledger.Started"
        day: str

    class Tallied(Aggregate.Event):
        TOPIC = "services.gateway.domain:Ledger.Tallied"
        deltas: dict[str, dict[str, int]]

    @staticmethod
    def create_id(day: str, **_: Any) -> UUID:
        return ledger_aggregate_id(day)

    @event(Started)
    def __init__(self, day: str) -> None:
        self.day = day
        self.figures: dict[str, dict[str, int]] = {}

    @event(Tallied)
    def tally(self, deltas: dict[str, dict[str, int]]) -> None:
        for currency, changes in deltas.items():
            figures = self.figures.setdefault(currency, dict.fromkeys(FIGURES, 0))
            for name, delta in changes.items():
                figures[name] = figures.get(name, 0) + delta


register_stored_topics(Bet, Table, Round, Ledger)
