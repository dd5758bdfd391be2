"""Every bet settlement has answered, in memory, rebuilt from the store at start.

A bet is known by (operator, bet id): each operator has its own bet ids, so one operator
cannot squat another's (``contracts.topics``: the operator is the topic's).

A resend of a bet (same id, same content) gets the recorded answer and records
nothing; the same id with other content is a DUPLICATE_BET_ID. Changes made
while handling a message are pending until its transaction commits, so a
failed transaction leaves no trace here either.

Refusals for NO_SUCH_TABLE / NO_SUCH_COUP do not use up a bet id (the bet may
have raced ahead of the table's events); a held bet (see ``desk``) is answered
"held" until it is judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation

from services.shared.facts.settlement import HOUSE, HeldLine

NON_BINDING = frozenset({"NO_SUCH_TABLE", "NO_SUCH_COUP"})
"""Refusals that leave the bet id free: a resend is judged afresh."""

DUPLICATE = "DUPLICATE_BET_ID"

ContentKey = tuple[str, str, str, str, Decimal | str, str]


@dataclass(frozen=True)
class BetAnswer:
    """Settlement's answer to a PlaceBet."""

    bet_id: str
    accepted: bool
    reason_code: str | None = None
    message: str = ""
    repeated: bool = False  # a resend, answered from the record: nothing changed
    held: bool = False  # waiting for its coup's BettingOpened (answered then)


@dataclass(frozen=True)
class BetRequest:
    """A bet as received (from PlaceBet, or taken back from the desk)."""

    table_id: str
    coup_id: str
    bet_id: str
    bettor_id: str
    bet_type: str
    amount: str
    currency: str
    # When it was placed: the broker's append time (not part of the content; see books.py).
    placed_at: datetime | None = None
    # ``amount`` parsed (``parse_amount``), once, where the bet entered: None when it is not
    # a positive whole number. Requests rebuilt from the store are never judged: None.
    stake: int | None = None
    # Whose bet: the operator of the bet-commands topic it came by (never a field of it).
    operator: str = HOUSE

    @property
    def key(self) -> ContentKey:
        return content_key(
            self.table_id, self.coup_id, self.bettor_id, self.bet_type, self.amount, self.currency
        )

    @classmethod
    def held(cls, table_id: str, line: HeldLine) -> BetRequest:
        """The bet of a desk's held line (see ``desk.held_line``)."""
        return cls(
            table_id,
            line.coup_id,
            line.bet_id,
            line.bettor_id,
            line.bet_type,
            line.amount,
            line.currency,
            datetime.fromisoformat(line.placed_at),
        )

    def fields(self) -> dict[str, str]:
        return {
            "table_id": self.table_id,
            "coup_id": self.coup_id,
            "bet_id": self.bet_id,
            "bettor_id": self.bettor_id,
            "bet_type": self.bet_type,
            "amount": self.amount,
            "currency": self.currency,
            "operator": self.operator,
        }


def content_key(
    table_id: str, coup_id: str, bettor_id: str, bet_type: str, amount: object, currency: str
) -> ContentKey:
    try:
        amount_key: Decimal | str = Decimal(str(amount))
    except InvalidOperation:
        amount_key = str(amount)
    return (table_id, coup_id, bettor_id, bet_type, amount_key, currency)


@dataclass(frozen=True)
class Answered:
    key: ContentKey
    answer: BetAnswer


BetKey = tuple[str, str]
"""(operator, bet id)."""


class BetIndex:
    """(operator, bet id) -> the content it was placed with and its answer."""

    def __init__(self) -> None:
        self._answered: dict[BetKey, Answered] = {}
        self._pending: dict[BetKey, Answered | None] = {}

    def __len__(self) -> int:
        return len(self._answered)

    # -- transactions --------------------------------------------------------------
    def begin(self) -> None:
        self._pending = {}

    def commit(self) -> None:
        for key, answered in self._pending.items():
            if answered is None:
                self._answered.pop(key, None)
            else:
                self._answered[key] = answered
        self._pending = {}

    def rollback(self) -> None:
        self._pending = {}

    # -- reading and writing ---------------------------------------------------------
    def get(self, operator: str, bet_id: str) -> Answered | None:
        key = (operator, bet_id)
        if key in self._pending:
            return self._pending[key]
        return self._answered.get(key)

    def answer(self, operator: str, bet_id: str) -> BetAnswer | None:
        answered = self._answered.get((operator, bet_id))
        return None if answered is None else answered.answer

    def record(self, request: BetRequest, answer: BetAnswer) -> None:
        """Note the answer given to ``request`` (a binding one, or 'held')."""
        if answer.reason_code == DUPLICATE:
            return  # the original stays the answer
        key = (request.operator, request.bet_id)
        if not answer.accepted and answer.reason_code in NON_BINDING:
            current = self.get(*key)
            if current is not None and current.answer.held:
                self._pending[key] = None  # released and refused: free again
            return
        self._pending[key] = Answered(request.key, answer)

    # -- rebuilding from stored events -----------------------------------------------
    def replay(self, request: BetRequest, answer: BetAnswer) -> None:
        """Apply one answer found in the store (in store order)."""
        current = self._answered.get((request.operator, request.bet_id))
        if current is not None and not current.answer.held:
            return  # answered for good already
        self.begin()
        self.record(request, answer)
        self.commit()
