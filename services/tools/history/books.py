"""The facts of the bet books -> their views: one method per fact (see ``project``).

A book's bets are screened as they are read, in one pass (late, accepted twice, breaking
the table's terms, staked per bet type), for the checks. On Kafka one message carries one
bet: BetSettled and BetRefunded gather into the book's open settlement or refund, which
its CoupSettled or CoupRefunded closes.

Operators: each answer, settlement or refund fact is one operator's; its bets are keyed by
``views.bet_key``, and a coup's per-operator settlements (refunds) join into one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from services.shared.facts.settlement import (
    HOUSE,
    AnswerLine,
    BookOpenedFact,
    CorrectedLine,
    CoupRefundedFact,
    CoupSettledFact,
    RefundLine,
    SettledLine,
)
from services.tools.history.views import (
    Accepted,
    BookView,
    History,
    Refund,
    Rejected,
    Settlement,
    SettlementCorrection,
    Void,
    bet_key,
)

OPPOSING = frozenset({"player", "banker"})
"""One bettor may not back both in one coup (services.shared.rules.validation)."""

_new = tuple.__new__  # a NamedTuple without its Python-level __new__ (as _make does)


def keyed_lines(lines: list[Any], operator: str) -> list[Any]:
    """Settled or refunded lines with their bet and bettor ids as the views key them
    (``bet_key``)."""
    if operator == HOUSE and not any("/" in line[0] or "/" in line[1] for line in lines):
        return lines  # the house's, as they are: the common case, and a busy one
    return [
        line._replace(bet_id=bet_key(operator, line[0]), bettor_id=bet_key(operator, line[1]))
        for line in lines
    ]


def moment(value: Any) -> str:
    """A stored or published time as ISO 8601 text (stored: ``{"_type_": ..., "_data_": ...}``)."""
    if isinstance(value, dict):
        return str(value["_data_"])
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


class BookProjector:
    """The bet books' facts into ``history`` (the part of the Projector for settlement)."""

    history: History
    lenient: bool

    def book_opened(self, fact: BookOpenedFact, at: str, nid: int) -> BookView:
        limits = fact.limits
        bounds = {
            name: (int(limit["minimum"]), int(limit["maximum"])) for name, limit in limits.items()
        }
        known = self.history.books.get((fact.table_id, fact.coup_id)) if self.lenient else None
        if known is not None:  # made on a bet message that came first: now its real terms
            known.paytable, known.currency, known.limits = fact.paytable, fact.currency, limits
            known.closes_at, known.bounds = moment(fact.closes_at), bounds
            known.opened_at, known.notification_id = at, nid
            return known
        book = BookView(
            table_id=fact.table_id,
            coup_id=fact.coup_id,
            paytable=fact.paytable,
            currency=fact.currency,
            limits=limits,
            opened_at=at,
            notification_id=nid,
            closes_at=moment(fact.closes_at),
        )
        book.bounds = bounds
        self.history.books[(fact.table_id, fact.coup_id)] = book
        return book

    @staticmethod
    def operator_closed(book: BookView, operator: str, closed_by: str) -> None:
        """An operator's close mark while the book waited for others': its later bets are
        late (stores only: the marks are settlement's own)."""
        book.marks.setdefault(operator, closed_by)

    @staticmethod
    def book_closed(book: BookView, at: str, closed_by: str | None) -> None:
        book.closed_at = at
        book.closed_by = closed_by

    def bets_answered(
        self,
        book: BookView,
        lines: Sequence[AnswerLine],
        placed_list: Sequence[str | None] | None,
        at: str,
        nid: int,
        operator: str = HOUSE,
    ) -> None:
        """One transaction's answers (a BetsAnsweredFact's ``lines`` and ``placed_at``):
        lines (bet_id, bettor, type, amount, currency, code, message), + placed_at as an 8th
        item in older stores, or in ``placed_list`` beside them.

        An accepted bet is late when the coup was already settled or voided in the book,
        or it was placed at/after the betting deadline or the book's close (the broker's
        append time of dealing's CloseBook mark; before the marks existed, dealing's
        BettingClosed); for stores that do not record when bets were placed, when it was
        accepted after the book noted its close. ``operator``: whose bets (and bettors).
        """
        decided = bool(book.settlements) or bool(book.refunds)
        closed_at, closed_by, deadline = book.closed_at, book.closed_by, book.closes_at
        coup = self.history.coups.get((book.table_id, book.coup_id))
        if closed_by is None and coup is not None and coup.betting_closed_at is not None:
            closed_by = coup.betting_closed_at
        accepted = book.accepted
        mark = book.marks.get(operator)  # the operator's own close, before the book's
        bounds, sides, staked, table_currency = book.bounds, book.sides, book.staked, book.currency
        for index, line in enumerate(lines):
            bet_id, bettor_id, bet_type, amount, currency, code, message = line[:7]
            if operator != HOUSE or "/" in bet_id or "/" in bettor_id:
                bet_id, bettor_id = bet_key(operator, bet_id), bet_key(operator, bettor_id)
            placed = line[7] if len(line) > 7 else placed_list[index] if placed_list else None
            if code is None:
                if (
                    decided
                    or (placed is None and closed_at is not None)
                    or (placed is not None and deadline and placed >= deadline)
                    or (placed is not None and closed_by is not None and placed >= closed_by)
                    or (placed is not None and closed_at is not None and closed_by is None)
                    or (placed is not None and mark is not None and placed >= mark)
                ):
                    book.late.append(bet_id)
                if bet_id in accepted:
                    book.twice.append(bet_id)
                    continue
                accepted[bet_id] = _new(
                    Accepted, (bettor_id, bet_type, amount, currency, at, nid, placed)
                )
                # The rules' conditions for accepting it (validation.validate_bet), inline.
                bound = bounds.get(bet_type)
                if type(amount) is not int:
                    book.suspect.append(bet_id)
                    continue
                staked[bet_type] = staked.get(bet_type, 0) + amount
                if (
                    bound is None
                    or currency != table_currency
                    or amount < bound[0]
                    or amount > bound[1]
                    or (bet_type in OPPOSING and sides.setdefault(bettor_id, bet_type) != bet_type)
                ):
                    book.suspect.append(bet_id)
            else:
                book.rejected[bet_id] = Rejected(
                    bettor_id, bet_type, str(amount), code, message, at, nid
                )

    @staticmethod
    def bet_rejected(book: BookView, bet_id: str, rejected: Rejected) -> None:
        """One refusal recorded by itself (an older store's one-bet event)."""
        book.rejected[bet_id] = rejected

    def desk_rejected(self, table_id: str, bet_id: str, rejected: Rejected) -> None:
        """A bet refused before it reached a coup's book (no such table or coup)."""
        self.history.desk_rejections.setdefault(table_id, {})[bet_id] = rejected

    @staticmethod
    def coup_settled(book: BookView, fact: CoupSettledFact, at: str, nid: int) -> None:
        """One operator's part of a coup's settlement: joins the last settlement when that
        has no part of this operator's yet and was on the same facts, else a new one."""
        operator = fact.operator
        lines = keyed_lines(fact.lines, operator)
        staked, paid = int(fact.staked), int(fact.paid)
        facts = (fact.outcome, bool(fact.player_pair), bool(fact.banker_pair))
        last = book.settlements[-1] if book.settlements else None
        if (
            last is not None
            and operator not in last.operators
            and (last.outcome, last.player_pair, last.banker_pair) == facts
            and last.staked is not None
            and last.paid is not None
        ):
            last.lines = [*last.lines, *lines]
            last.staked, last.paid = last.staked + staked, last.paid + paid
            last.bets = (last.bets or 0) + len(lines)
            last.house_result = last.staked - last.paid
            last.operators.append(operator)
            return
        book.settlements.append(
            Settlement(
                *facts,
                lines,
                staked,
                paid,
                at,
                nid,
                len(lines),
                staked - paid,
                [operator],
            )
        )

    @staticmethod
    def _part(book: BookView, operator: str, at: str, nid: int) -> Settlement:
        """The settlement an operator's message joins (Kafka): the last one, unless this
        operator's totals are in it already."""
        settlements = book.settlements
        if not settlements or operator in settlements[-1].operators:
            settlements.append(Settlement(None, None, None, [], None, None, at, nid))
        return settlements[-1]

    def settled_line(
        self, book: BookView, line: SettledLine, at: str, nid: int, operator: str = HOUSE
    ) -> None:
        """One bet's settlement (Kafka): into the book's open settlement (one whose totals
        for the operator have not been seen yet), or a new one."""
        settlement = self._part(book, operator, at, nid)
        settlement.lines.append(keyed_lines([line], operator)[0])
        settlement.pending.add(operator)

    def settlement_totals(
        self,
        book: BookView,
        bets: int,
        staked: int,
        paid: int,
        house_result: int,
        at: str,
        nid: int,
        operator: str = HOUSE,
    ) -> None:
        """An operator's settlement totals of a coup (Kafka's CoupSettled): they close its
        part of the open settlement (a second CoupSettled of one operator with no bets of its
        own is a second settlement)."""
        settlement = self._part(book, operator, at, nid)
        settlement.staked = (settlement.staked or 0) + staked
        settlement.paid = (settlement.paid or 0) + paid
        settlement.bets = (settlement.bets or 0) + bets
        settlement.house_result = (settlement.house_result or 0) + house_result
        settlement.at, settlement.notification_id = at, nid
        settlement.operators.append(operator)
        settlement.pending.discard(operator)

    @staticmethod
    def coup_refunded(book: BookView, fact: CoupRefundedFact, at: str, nid: int) -> None:
        """One operator's part of a coup's refund: joins the last refund when that has no
        part of this operator's yet, else a new one."""
        operator = fact.operator
        lines = keyed_lines(fact.lines, operator)
        last = book.refunds[-1] if book.refunds else None
        if last is not None and last.refunded is not None and operator not in last.operators:
            book.refunds[-1] = last._replace(
                lines=[*last.lines, *lines],
                refunded=last.refunded + int(fact.refunded),
                operators=(*last.operators, operator),
            )
            return
        who, why = str(fact.supervisor_id), str(fact.reason)
        book.refunds.append(Refund(who, why, lines, int(fact.refunded), at, nid, (operator,)))

    @staticmethod
    def settlement_corrected(
        book: BookView,
        correction_id: str,
        lines: Sequence[CorrectedLine],
        at: str,
        nid: int,
        operator: str = HOUSE,
    ) -> None:
        """Lines of a correction's settlement (a stored fact: one operator's; Kafka: one
        BetCorrected): joined to the book's settlement of the same correction."""
        keyed = keyed_lines(list(lines), operator)
        for known in book.corrections:
            if known.correction_id == correction_id:
                known.lines.extend(keyed)
                return
        book.corrections.append(SettlementCorrection(correction_id, list(keyed), at, nid))

    @staticmethod
    def refund_line(
        book: BookView,
        line: RefundLine,
        void: Void | None,
        at: str,
        nid: int,
        operator: str = HOUSE,
    ) -> None:
        """One bet's refund (Kafka): into the book's open refund (one whose total has not
        been seen yet), or a new one; who voided the coup and why come from its void."""
        refunds = book.refunds
        line = keyed_lines([line], operator)[0]
        if refunds and refunds[-1].refunded is None:
            refunds[-1].lines.append(line)
        else:
            who, why = ("", "") if void is None else (void.supervisor_id, void.reason)
            refunds.append(Refund(who, why, [line], None, at, nid, ()))

    @staticmethod
    def refund_total(
        book: BookView,
        refunded: int,
        void: Void | None,
        at: str,
        nid: int,
        operator: str = HOUSE,
    ) -> None:
        """An operator's refund total of a coup (Kafka): it closes the open refund, or joins
        the last closed one that has no part of this operator's yet."""
        refunds = book.refunds
        lines = refunds.pop().lines if refunds and refunds[-1].refunded is None else []
        last = refunds[-1] if refunds else None
        if last is not None and last.refunded is not None and operator not in last.operators:
            refunds[-1] = last._replace(
                lines=[*last.lines, *lines],
                refunded=last.refunded + refunded,
                operators=(*last.operators, operator),
            )
            return
        who, why = ("", "") if void is None else (void.supervisor_id, void.reason)
        refunds.append(Refund(who, why, lines, refunded, at, nid, (operator,)))
