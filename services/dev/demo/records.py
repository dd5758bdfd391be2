"""What the demo's ledger shows per bet, coup and shoe: thin views over the read side.

The ledger keeps no records of its own beyond the answers to its bets: these views read
the history (:mod:`services.tools.history`, fed with every message seen) and the answers
(:mod:`services.dev.demo.answers`), with the attributes the live view, the orchestrator and
the end-to-end tests read (``.closed``, ``.settled``, ``.accepted.coup_id``...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, NamedTuple

from services.dev.demo.bettors import PlannedBet
from services.shared.facts.dealing import CoupResolvedFact
from services.shared.facts.settlement import RefundLine, SettledLine
from services.tools.history.views import (
    BookView,
    CoupView,
    History,
    Refund,
    Resolution,
    Reveal,
    Settlement,
    ShoeView,
    TableSettings,
    Void,
)

if TYPE_CHECKING:
    from uuid import UUID

    from contracts import BetRejected
    from services.dev.demo.answers import Answers, BetAnswers

Key = tuple[str, str]
"""(table id, coup id)."""


class AcceptedBet(NamedTuple):
    """A bet as its book accepted it (first acceptance)."""

    table_id: str
    coup_id: str
    bet_id: str
    bettor_id: str
    bet_type: str
    amount: int
    currency: str
    at: str  # when it was accepted (ISO 8601)


class Lines:
    """Every settled and refunded line by bet id, across all books (built once per pass)."""

    def __init__(self, history: History) -> None:
        self.settled: dict[str, list[SettledLine]] = {}
        self.refunded: dict[str, list[RefundLine]] = {}
        for book in history.books.values():
            for settlement in book.settlements:
                for line in settlement.lines:
                    self.settled.setdefault(line.bet_id, []).append(line)
            for refund in book.refunds:
                for back in refund.lines:
                    self.refunded.setdefault(back.bet_id, []).append(back)


class ShoeState:
    """A shoe as its messages showed it."""

    __slots__ = ("view",)

    def __init__(self, view: ShoeView) -> None:
        self.view = view

    @property
    def shoe_id(self) -> str:
        return self.view.shoe_id

    @property
    def table_id(self) -> str:
        return self.view.table_id

    @property
    def shuffled(self) -> bool:
        return bool(self.view.scheme)  # else known only from cards drawn from it

    @property
    def card_count(self) -> int:
        return self.view.card_count

    @property
    def cut_card_index(self) -> int | None:
        return self.view.cut_card_index if self.shuffled else None

    @property
    def commitment(self) -> str:
        return self.view.commitment

    @property
    def drawn(self) -> int:
        """Positions out of the shoe (shown, burned and drawn)."""
        return self.view.cards_out

    @property
    def closed(self) -> Reveal | None:
        return self.view.reveal

    @property
    def cards(self) -> dict[int, str]:
        """Position -> the card first handed out there (burned and drawn)."""
        out: dict[int, str] = {}
        for position, card in self.view.handed_out():
            out.setdefault(position, card)
        return out


class CoupState:
    """A coup and its book as their messages showed them."""

    __slots__ = ("book", "key", "view")

    def __init__(self, key: Key, view: CoupView | None, book: BookView | None) -> None:
        self.key, self.view, self.book = key, view, book

    @property
    def table_id(self) -> str:
        return self.key[0]

    @property
    def coup_id(self) -> str:
        return self.key[1]

    @property
    def coup_number(self) -> int | None:
        """From its BettingOpened or CoupResolved (None: neither seen yet)."""
        view = self.view
        if view is None or not (view.opened_at or view.resolutions):
            return None
        return view.coup_number

    @property
    def shoe_id(self) -> str | None:
        return None if self.view is None or not self.view.shoe_id else self.view.shoe_id

    @property
    def terms(self) -> TableSettings | None:
        """The table's terms when the coup opened."""
        return None if self.view is None else self.view.settings

    @property
    def betting_closed(self) -> bool:
        return self.view is not None and self.view.betting_closed_at is not None

    @property
    def resolution(self) -> Resolution | None:
        return None if self.view is None else self.view.resolved

    @property
    def resolved(self) -> CoupResolvedFact | None:
        resolution = self.resolution
        return None if resolution is None else resolution.fact

    @property
    def resolutions(self) -> list[Resolution]:
        return [] if self.view is None else self.view.resolutions

    @property
    def voided(self) -> Void | None:
        return self.view.voids[0] if self.view is not None and self.view.voids else None

    @property
    def settled(self) -> list[Settlement]:
        """Its CoupSettled (more than one: settled twice)."""
        if self.book is None:
            return []
        return [s for s in self.book.settlements if s.staked is not None]

    @property
    def refunded(self) -> list[Refund]:
        """Its CoupRefunded."""
        return [] if self.book is None else [r for r in self.book.refunds if r.refunded is not None]

    @property
    def bet_ids(self) -> list[str]:
        """Its accepted bets, in the order they were accepted."""
        return [] if self.book is None else list(self.book.accepted)


class BetState:
    """One bet: what the demo sent and was answered, and what the books did with it."""

    __slots__ = ("_answers", "_history", "_lines")

    def __init__(self, answers: BetAnswers, history: History, lines: Callable[[], Lines]) -> None:
        self._answers, self._history, self._lines = answers, history, lines

    @property
    def bet_id(self) -> str:
        return self._answers.bet_id

    @property
    def planned(self) -> list[PlannedBet]:
        return self._answers.planned

    @property
    def first_answer(self) -> str | None:
        return self._answers.first_answer

    @property
    def rejections(self) -> dict[UUID, BetRejected]:
        return self._answers.rejections

    @property
    def accepted(self) -> AcceptedBet | None:
        where = self._answers.accepted_in
        book = None if where is None else self._history.books.get(where)
        bet = None if book is None else book.accepted.get(self.bet_id)
        if where is None or bet is None:
            return None
        return AcceptedBet(
            where[0], where[1], self.bet_id, bet.bettor_id, bet.bet_type, bet.amount,
            bet.currency, bet.at,
        )  # fmt: skip

    @property
    def settlements(self) -> list[SettledLine]:
        """Every BetSettled of the bet (more than one: settled twice)."""
        return self._lines().settled.get(self.bet_id, [])

    @property
    def refunds(self) -> list[RefundLine]:
        return self._lines().refunded.get(self.bet_id, [])


class Coups(Mapping[Key, CoupState]):
    """(table, coup) -> the coup, for every coup or book seen."""

    def __init__(self, history: History) -> None:
        self.history = history

    def __getitem__(self, key: Key) -> CoupState:
        view, book = self.history.coups.get(key), self.history.books.get(key)
        if view is None and book is None:
            raise KeyError(key)
        return CoupState(key, view, book)

    def __iter__(self) -> Iterator[Key]:
        yield from self.history.coups
        yield from (key for key in self.history.books if key not in self.history.coups)

    def __len__(self) -> int:
        return len(self.history.coups.keys() | self.history.books.keys())


class Shoes(Mapping[str, ShoeState]):
    """Shoe id -> the shoe, for every shoe seen."""

    def __init__(self, history: History) -> None:
        self.history = history

    def _ids(self) -> dict[str, ShoeView]:
        return {shoe.shoe_id: shoe for shoe in self.history.shoes.values()}

    def __getitem__(self, shoe_id: str) -> ShoeState:
        return ShoeState(self._ids()[shoe_id])

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids())

    def __len__(self) -> int:
        return len(self.history.shoes)


class Bets(Mapping[str, BetState]):
    """Bet id -> the bet, for every bet sent or named by a message."""

    def __init__(self, answers: Answers, history: History, lines: Callable[[], Lines]) -> None:
        self.answers, self.history, self.lines = answers, history, lines

    def __getitem__(self, bet_id: str) -> BetState:
        return BetState(self.answers.bets[bet_id], self.history, self.lines)

    def __iter__(self) -> Iterator[str]:
        return iter(self.answers.bets)

    def __len__(self) -> int:
        return len(self.answers.bets)
