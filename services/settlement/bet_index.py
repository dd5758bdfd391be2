"""Every bet settlement has answered: read from its bet-id table in the store, a few cached.

A bet is known by (operator, bet id): each operator has its own bet ids, so one operator
cannot squat another's (``contracts.topics``: the operator is the topic's).

A resend of a bet (same id, same content) gets the recorded answer and records
nothing; the same id with other content is a DUPLICATE_BET_ID. Changes made
while handling a message are pending until its transaction commits (they are
recorded in it: ``bet_ids``), so a failed transaction leaves no trace here either.

Nothing of history is loaded at start: a bet id is looked up in the store when a
bet names it (a batch's ids in one query, :meth:`BetIndex.prefetch`), and only the
last :data:`CACHE_SIZE` binding answers seen stay in memory.

Refusals for NO_SUCH_TABLE / NO_SUCH_COUP do not use up a bet id (the bet may
have raced ahead of the table's events); a held bet (see ``desk``) is answered
"held" until it is judged.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import NamedTuple, Protocol

from contracts import MISPLACED
from services.shared.facts.settlement import HOUSE, HeldLine

NON_BINDING = frozenset({"NO_SUCH_TABLE", "NO_SUCH_COUP", "INVALID_ENVELOPE", *MISPLACED})
"""Refusals that leave the bet id free: a resend is judged afresh (a bet misplaced or with a
broken envelope: nothing of its content was judged). ``BOOK_FULL`` is binding, like
``BETTING_CLOSED``: a full book never frees a place, so a resend could only be refused again; a
bet on a later coup is a new bet, with a new id."""

DUPLICATE = "DUPLICATE_BET_ID"

ContentKey = tuple[str, str, str, str, Decimal | str, str]


class BetAnswer(NamedTuple):  # a frozen dataclass costs 3x to make, and one is made a bet
    """Settlement's answer to a PlaceBet."""

    bet_id: str
    accepted: bool
    reason_code: str | None = None
    message: str = ""
    repeated: bool = False  # a resend, answered from the record: nothing changed
    held: bool = False  # waiting for its coup's BettingOpened (answered then)


class BetRequest(NamedTuple):  # not a frozen dataclass: see BetAnswer
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
    text = str(amount)
    try:  # ASCII only, as parse_amount reads it (Decimal reads other scripts' digits too)
        number = Decimal(text) if text.isascii() else None
    except InvalidOperation:
        number = None
    # a NaN equals nothing and an sNaN raises when compared: those are keyed by their text
    amount_key = number if number is not None and number.is_finite() else text
    return (table_id, coup_id, bettor_id, bet_type, amount_key, currency)


class Answered(NamedTuple):  # not a frozen dataclass: see BetAnswer
    """A bet id's content (the request it was answered for) and its answer."""

    request: BetRequest
    answer: BetAnswer

    @property
    def key(self) -> ContentKey:
        return self.request.key


BetKey = tuple[str, str]
"""(operator, bet id)."""


class Stored(NamedTuple):
    """A bet id's row as stored (the highest version): what it says (None: never answered,
    or free again) and its version (0: no row)."""

    state: Answered | None
    version: int


NOT_STORED = Stored(None, 0)


class BetIdStore(Protocol):
    """Where the bet ids' rows are read (``bet_index_store.BetIdStore``)."""

    def read(self, keys: Sequence[BetKey]) -> dict[BetKey, Stored]:
        """The latest rows of ``keys`` (those without one are left out)."""
        ...


Change = tuple[BetKey, Answered | None, int]
"""A bet id's new state (None: free) and the version its row had before."""

CACHE_SIZE = 10_000
"""Bet ids whose binding answer is kept in memory (least recently used go first)."""


class BetIndex:
    """(operator, bet id) -> the content it was placed with and its answer, read from the
    rows in the store; the answers of this unit of work pending until it commits."""

    def __init__(self, store: BetIdStore, cache_size: int = CACHE_SIZE) -> None:
        self._store = store
        self._cache_size = cache_size
        self._cache: OrderedDict[BetKey, Stored] = OrderedDict()  # binding answers only
        self._read: dict[BetKey, Stored] = {}  # read from the store in this unit
        self._pending: dict[BetKey, Answered | None] = {}

    def __len__(self) -> int:
        """Bet ids held in memory (at most the cache's size, plus one unit's)."""
        return len(self._cache) + len(self._read) + len(self._pending)

    # -- transactions --------------------------------------------------------------
    def begin(self) -> None:
        self._read, self._pending = {}, {}

    def changes(self) -> list[Change]:
        """What this unit changed, each with its row's version before (to insert)."""
        return [(key, state, self._stored(key).version) for key, state in self._pending.items()]

    def commit(self, changed: list[Change]) -> None:
        """The unit committed with ``changed`` (its :meth:`changes`, as recorded)."""
        for key, stored in self._read.items():
            if stored.state is not None:  # (an id read as unknown is not cached)
                self._keep(key, stored)
        for key, state, version in changed:
            self._keep(key, Stored(state, version + (state is not None or version > 0)))
        self._read, self._pending = {}, {}

    def rollback(self) -> None:
        self._read, self._pending = {}, {}

    def _keep(self, key: BetKey, stored: Stored) -> None:
        """Cache a binding answer (it never changes); anything else is read again."""
        if stored.state is None or stored.state.answer.held:
            self._cache.pop(key, None)
            return
        self._cache[key] = stored
        self._cache.move_to_end(key)
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    # -- reading and writing ---------------------------------------------------------
    def prefetch(self, keys: Iterable[BetKey]) -> None:
        """Read the rows of ``keys`` not known yet, in one go (a batch's bet ids)."""
        wanted = [
            key
            for key in dict.fromkeys(keys)
            if key not in self._pending and key not in self._read and key not in self._cache
        ]
        if wanted:
            found = self._store.read(wanted)
            for key in wanted:
                self._read[key] = found.get(key, NOT_STORED)

    def _stored(self, key: BetKey) -> Stored:
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        found = self._read.get(key)
        if found is None:
            found = self._read[key] = self._store.read([key]).get(key, NOT_STORED)
        return found

    def get(self, operator: str, bet_id: str) -> Answered | None:
        key = (operator, bet_id)
        if key in self._pending:
            return self._pending[key]
        return self._stored(key).state

    def answer(self, operator: str, bet_id: str) -> BetAnswer | None:
        """The committed answer (a query: reads the store, changes nothing)."""
        key = (operator, bet_id)
        stored = self._cache.get(key) or self._store.read([key]).get(key, NOT_STORED)
        return None if stored.state is None else stored.state.answer

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
        self._pending[key] = Answered(request, answer)

    def replay(self, request: BetRequest, answer: BetAnswer) -> None:
        """Apply an answer found in an old store's log (in log order) within this unit: an
        id answered for good keeps its answer (see ``bet_index_store``)."""
        current = self.get(request.operator, request.bet_id)
        if current is not None and not current.answer.held:
            return
        self.record(request, answer)
