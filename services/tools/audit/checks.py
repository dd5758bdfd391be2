"""The audit's checks over a rebuilt :class:`~services.tools.audit.model.History`.

Everything that can be recomputed is recomputed with ``services.shared.rules`` and
compared with what the stores say: the commitment from the revealed order and
salt, every card from its position in the revealed order, who gets each card
from the tableau, totals/natural/outcome/pairs from the cards, every payout
from the table's paytable and rounding rule. Nothing the services recorded as
a *result* is trusted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from services.shared.rules.cards import Card
from services.shared.rules.paytable import BetType, Paytable, UnknownPaytable, get_paytable
from services.shared.rules.settlement import BetResult, bet_result
from services.shared.rules.shoe import COMMITMENT_SCHEME, burn_count, composition, verify_commitment
from services.shared.rules.tableau import CoupResult, NotEnoughCards, Side, next_side, resolve_coup
from services.shared.rules.validation import BetLimit, validate_bet
from services.tools.audit.findings import Code, Finding, Severity
from services.tools.audit.model import BookView, CoupView, History, ShoeView
from services.tools.audit.totals import Totals

DUPLICATE_BET_ID = "DUPLICATE_BET_ID"
_DAMAGE = (ValueError, TypeError, KeyError, IndexError, AttributeError)


@dataclass(frozen=True)
class Filters:
    """Restrict the audit to one table and/or coups opened in [since, until)."""

    table: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def table_in(self, table_id: str) -> bool:
        return self.table is None or table_id == self.table

    def time_in(self, at: str) -> bool:
        if self.since is None and self.until is None:
            return True
        moment = datetime.fromisoformat(at)
        if self.since is not None and moment < self.since:
            return False
        return self.until is None or moment < self.until

    def overlaps(self, start: str, end: str | None) -> bool:
        if self.until is not None and datetime.fromisoformat(start) >= self.until:
            return False
        return not (
            self.since is not None and end is not None and datetime.fromisoformat(end) < self.since
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "since": None if self.since is None else self.since.isoformat(),
            "until": None if self.until is None else self.until.isoformat(),
        }


@lru_cache(maxsize=64)
def _card(code: str) -> Card:
    return Card.parse(code)


@lru_cache(maxsize=16)
def _full_shoe(decks: int) -> Counter[str]:
    return Counter(card.code for card in composition(decks))


@lru_cache(maxsize=64)
def _limits(items: tuple[tuple[str, int, int], ...]) -> dict[BetType, BetLimit]:
    return {BetType(name): BetLimit(low, high) for name, low, high in items}


_OPPOSITE = frozenset({BetType.PLAYER.value, BetType.BANKER.value})
BET_TYPES = {bet.value: bet for bet in BetType}


@lru_cache(maxsize=65_536)
def _invalid(
    limits: tuple[tuple[str, int, int], ...],
    bet_type: str,
    amount: object,
    currency: str,
    table_currency: str,
) -> str | None:
    """Why the rules would refuse this bet (opposing bets aside), or None."""
    if not isinstance(amount, int) or isinstance(amount, bool):
        return f"amount {amount!r} is not a whole number of minor units"
    problem = validate_bet(bet_type, amount, _limits(limits), currency, table_currency, ())
    return None if problem is None else problem.message


def _limit_key(limits: dict[str, dict[str, int]]) -> tuple[tuple[str, int, int], ...]:
    return tuple(sorted((k, int(v["minimum"]), int(v["maximum"])) for k, v in limits.items()))


class Checker:
    """Run every check; ``findings`` and ``totals`` hold the outcome."""

    def __init__(self, history: History, filters: Filters | None = None) -> None:
        self.history = history
        self.filters = filters or Filters()
        self.findings: list[Finding] = []
        self.totals = Totals()
        # (table, shoe) -> position -> (coup id, card) as the shoe handed them out
        self._drawn: dict[tuple[str, str], dict[int, tuple[str, str]]] = {}
        self._results: dict[tuple[str, str], CoupResult] = {}
        self._last_shoe: dict[str, str] = {}
        self._wins: dict[str, dict[tuple[str, int], int]] = {}
        self._staked: dict[str, int] = {}
        self.checked = Counter[str]()

    def run(self) -> None:
        """Every check, on the whole history."""
        self.check_dealing()
        self.check_books()
        self.check_missing_books(set(self.history.books))

    def check_dealing(self) -> None:
        """Shoes and coups (what the bet books are then checked against)."""
        for shoe in self.history.shoes.values():
            self._last_shoe[shoe.table_id] = shoe.shoe_id
        # A record too damaged to check is a finding, not a crash of the audit.
        for shoe in self.history.shoes.values():
            if self.filters.table_in(shoe.table_id):
                try:
                    self.check_shoe(shoe)
                except _DAMAGE as error:
                    self._damaged(error, table_id=shoe.table_id, shoe_id=shoe.shoe_id)
        for coup in self.history.coups.values():
            if self._coup_selected(coup):
                try:
                    self.check_coup(coup)
                except _DAMAGE as error:
                    self._damaged(error, table_id=coup.table_id, coup_id=coup.coup_id)

    def check_books(self) -> None:
        """The bet books in the history (all of them, or one share of a parallel audit)."""
        for key, book in self.history.books.items():
            dealt = self.history.coups.get(key)
            if self.filters.table_in(book.table_id) and self.filters.time_in(
                dealt.opened_at if dealt is not None else book.opened_at
            ):
                try:
                    self.check_book(book, dealt)
                except _DAMAGE as error:
                    self._damaged(error, table_id=book.table_id, coup_id=book.coup_id)

    def check_missing_books(self, books: set[tuple[str, str]]) -> None:
        """Coups dealing opened that settlement has no book for (``books``: all book keys)."""
        if not books:
            return  # no settlement store read
        for key, coup in self.history.coups.items():
            if key not in books and self._coup_selected(coup):
                self._error(
                    Code.VIEWS_DISAGREE,
                    "dealing opened this coup, settlement has no bets book for it",
                    table_id=coup.table_id,
                    shoe_id=coup.shoe_id,
                    coup_id=coup.coup_id,
                )

    def _damaged(self, error: Exception, **where: Any) -> None:
        self._error(
            Code.UNREADABLE_EVENT,
            f"cannot be checked, its records are malformed ({type(error).__name__}: {error})",
            **where,
        )

    def _coup_selected(self, coup: CoupView) -> bool:
        return self.filters.table_in(coup.table_id) and self.filters.time_in(coup.opened_at)

    def _add(self, severity: Severity, code: Code, message: str, **where: Any) -> None:
        self.findings.append(Finding(severity, code, message, **where))

    def _error(self, code: Code, message: str, **where: Any) -> None:
        self._add(Severity.ERROR, code, message, **where)

    # -- shoes -----------------------------------------------------------------------
    def check_shoe(self, shoe: ShoeView) -> None:
        where = {"table_id": shoe.table_id, "shoe_id": shoe.shoe_id, "store": "shoe"}
        self.checked["shoes"] += 1
        drawn: dict[int, tuple[str, str]] = {}
        self._drawn[(shoe.table_id, shoe.shoe_id)] = drawn
        if shoe.scheme != COMMITMENT_SCHEME:
            self._error(
                Code.COMMITMENT_MISMATCH,
                f"unknown commitment scheme {shoe.scheme!r}",
                notification_id=shoe.notification_id,
                **where,
            )
        reveal = shoe.reveal
        order = shoe.order if reveal is None else reveal.order
        try:
            cards = [_card(code) for code in order]
        except ValueError as error:
            self._error(Code.NOT_A_FULL_SHOE, f"unreadable card in the order: {error}", **where)
            return
        if Counter(order) != _full_shoe(shoe.decks):
            self._error(
                Code.NOT_A_FULL_SHOE,
                f"the {'revealed' if reveal else 'recorded'} order is not {shoe.decks} full decks",
                **where,
            )
        if reveal is not None:
            if reveal.commitment != shoe.commitment:
                self._error(
                    Code.COMMITMENT_MISMATCH,
                    f"the reveal names commitment {reveal.commitment[:16]}..., the shuffle "
                    f"published {shoe.commitment[:16]}...",
                    notification_id=reveal.notification_id,
                    **where,
                )
            if not _verify(cards, reveal.salt, shoe.commitment):
                self._error(
                    Code.COMMITMENT_MISMATCH,
                    "the revealed order and salt do not give the commitment published "
                    "at the shuffle",
                    notification_id=reveal.notification_id,
                    **where,
                )
            if reveal.order != shoe.order:
                self._error(
                    Code.REVEAL_DIFFERS,
                    "the revealed order is not the order the shoe was shuffled to",
                    notification_id=reveal.notification_id,
                    **where,
                )
        else:
            if not _verify(cards, shoe.salt, shoe.commitment):
                self._error(
                    Code.COMMITMENT_MISMATCH,
                    "the recorded order and salt do not give the published commitment",
                    notification_id=shoe.notification_id,
                    **where,
                )
            if self._last_shoe.get(shoe.table_id) != shoe.shoe_id:
                self._add(
                    Severity.WARNING,
                    Code.SHOE_NOT_REVEALED,
                    "a later shoe was shuffled but this one was never closed and revealed",
                    **where,
                )
        expected = 0
        if shoe.burn is not None:
            shown, burned, next_position, nid = shoe.burn
            count = min(burn_count(cards[0]), len(order) - 1) if order else 0
            if shown != order[0] or burned != order[1 : 1 + count] or next_position != 1 + count:
                self._error(
                    Code.WRONG_BURN,
                    f"showed {shown} and burned {len(burned)} cards (next position "
                    f"{next_position}); the order demands {order[0]} and {count} cards "
                    f"({', '.join(order[1 : 1 + count])})",
                    notification_id=nid,
                    **where,
                )
            expected = next_position
        elif shoe.draws:
            self._error(Code.WRONG_BURN, "cards were drawn before the burn", **where)
        for draw in shoe.draws:
            first = draw.first_position
            if first < expected:
                self._error(
                    Code.CARD_DRAWN_TWICE,
                    f"positions {first}..{expected - 1} were handed out again "
                    f"(request {draw.request_id})",
                    coup_id=draw.coup_id,
                    notification_id=draw.notification_id,
                    **where,
                )
            elif first > expected:
                self._error(
                    Code.DRAW_OUT_OF_ORDER,
                    f"drew from position {first} while {expected} was next (cards skipped)",
                    coup_id=draw.coup_id,
                    notification_id=draw.notification_id,
                    **where,
                )
            for offset, card in enumerate(draw.cards):
                position = first + offset
                truth = order[position] if position < len(order) else None
                if card != truth:
                    self._error(
                        Code.WRONG_CARD,
                        f"drew {card} at position {position}, where the order has {truth}",
                        coup_id=draw.coup_id,
                        notification_id=draw.notification_id,
                        **where,
                    )
                drawn.setdefault(position, (draw.coup_id, card))
            expected = max(expected, first + len(draw.cards))
        if reveal is not None and reveal.cards_dealt != expected:
            self._error(
                Code.REVEAL_DIFFERS,
                f"the reveal says {reveal.cards_dealt} cards were dealt, the draws "
                f"reach position {expected}",
                notification_id=reveal.notification_id,
                **where,
            )

    # -- coups -----------------------------------------------------------------------
    def check_coup(self, coup: CoupView) -> None:
        self.checked["coups"] += 1
        where = {"table_id": coup.table_id, "shoe_id": coup.shoe_id, "coup_id": coup.coup_id}
        drawn = self._drawn.get((coup.table_id, coup.shoe_id))
        if drawn is None and self.history.shoes:
            self._error(
                Code.VIEWS_DISAGREE,
                "dealing dealt from a shoe the shoe service has no record of",
                store="dealing",
                **where,
            )
        player: list[Card] = []
        banker: list[Card] = []
        sequence: list[Card] = []
        sound = True
        for dealt in coup.dealt:
            card = _card(dealt.card)
            try:
                due = next_side(player, banker) if sound else None
            except ValueError:  # hands no coup can produce
                due = None
            if sound and (due is None or due.value != dealt.side):
                sound = False
                self._error(
                    Code.TABLEAU_VIOLATED,
                    f"{dealt.card} went to {dealt.side}, the tableau "
                    + ("says the coup was complete" if due is None else f"gives it to {due.value}"),
                    store="dealing",
                    notification_id=dealt.notification_id,
                    **where,
                )
            hand = player if dealt.side == Side.PLAYER.value else banker
            hand.append(card)
            sequence.append(card)
            if dealt.index_in_hand != len(hand) and sound:
                self._error(
                    Code.TABLEAU_VIOLATED,
                    f"{dealt.card} recorded as card {dealt.index_in_hand} of the "
                    f"{dealt.side} hand, it was card {len(hand)}",
                    store="dealing",
                    notification_id=dealt.notification_id,
                    **where,
                )
            if drawn is not None:
                source = drawn.get(dealt.position)
                if source is None or source[0] != coup.coup_id or source[1] != dealt.card:
                    self._error(
                        Code.CARD_NOT_FROM_SHOE,
                        f"{dealt.card} at position {dealt.position}: the shoe handed out "
                        + (
                            "no card there"
                            if source is None
                            else f"{source[1]} there for coup {source[0]}"
                        ),
                        store="dealing",
                        notification_id=dealt.notification_id,
                        **where,
                    )
        result: CoupResult | None = None
        if sequence:
            try:
                result = resolve_coup(sequence)
            except (NotEnoughCards, ValueError):
                result = None
        stored = coup.resolved
        if stored is not None:
            self._check_result(coup, stored, result, len(sequence), where)
            if "_twice" in stored:
                self._error(
                    Code.WRONG_RESULT,
                    "the coup was resolved twice",
                    store="dealing",
                    notification_id=stored["_twice"],
                    **where,
                )
        elif not coup.voids:
            table = self.history.tables.get(coup.table_id)
            if table is None or not table.coups or table.coups[-1] != coup.coup_id:
                self._error(
                    Code.COUP_INCOMPLETE,
                    "neither resolved nor voided, and later coups were played",
                    store="dealing",
                    **where,
                )
        if result is not None and stored is not None:
            self._results[(coup.table_id, coup.coup_id)] = result
        for void in coup.voids:
            if not void.supervisor_id.strip():
                self._error(
                    Code.VOID_WITHOUT_SUPERVISOR,
                    "voided without a supervisor",
                    store="dealing",
                    notification_id=void.notification_id,
                    **where,
                )
        if len(coup.voids) > 1:
            self._error(
                Code.WRONG_RESULT,
                f"voided {len(coup.voids)} times",
                store="dealing",
                notification_id=coup.voids[1].notification_id,
                **where,
            )
        if coup.settings is None:
            self._error(Code.VIEWS_DISAGREE, "a coup of a table never opened", **where)

    def _check_result(
        self,
        coup: CoupView,
        stored: dict[str, Any],
        result: CoupResult | None,
        dealt: int,
        where: dict[str, Any],
    ) -> None:
        nid = coup.resolved_nid
        if result is None:
            self._error(
                Code.WRONG_RESULT,
                f"resolved with {dealt} cards dealt: not a complete coup",
                store="dealing",
                notification_id=nid,
                **where,
            )
            return
        if result.cards_used != dealt:
            self._error(
                Code.TABLEAU_VIOLATED,
                f"{dealt} cards dealt, the tableau uses {result.cards_used}",
                store="dealing",
                notification_id=nid,
                **where,
            )
        truth: dict[str, Any] = {
            "player_cards": [c.code for c in result.player],
            "banker_cards": [c.code for c in result.banker],
            "player_total": result.player_total,
            "banker_total": result.banker_total,
            "outcome": result.outcome.value,
            "natural": result.natural,
            "player_pair": result.player_pair,
            "banker_pair": result.banker_pair,
        }
        wrong = [
            f"{name} {stored.get(name)!r} (should be {value!r})"
            for name, value in truth.items()
            if stored.get(name) != value
        ]
        if wrong:
            self._error(
                Code.WRONG_RESULT,
                "recorded " + "; ".join(wrong),
                store="dealing",
                notification_id=nid,
                **where,
            )

    # -- bets ------------------------------------------------------------------------
    def check_book(self, book: BookView, coup: CoupView | None) -> None:
        self.checked["books"] += 1
        self.checked["bets"] += len(book.accepted)
        key = (book.table_id, book.coup_id)
        where: dict[str, Any] = {"table_id": book.table_id, "coup_id": book.coup_id}
        if coup is not None:
            where["shoe_id"] = coup.shoe_id
        if coup is None:
            self._error(
                Code.VIEWS_DISAGREE,
                "settlement has bets on a coup dealing never opened",
                store="settlement",
                **where,
            )
        elif coup.settings is not None and (
            coup.settings.paytable != book.paytable or coup.settings.currency != book.currency
        ):
            self._error(
                Code.VIEWS_DISAGREE,
                f"settlement used paytable {book.paytable} / {book.currency}, dealing's table "
                f"had {coup.settings.paytable} / {coup.settings.currency}",
                store="settlement",
                **where,
            )
        try:
            paytable: Paytable | None = get_paytable(book.paytable)
        except UnknownPaytable:
            paytable = None
            self._error(Code.WRONG_SETTLEMENT, f"unknown paytable {book.paytable!r}", **where)
        self._check_acceptance(book, where)
        result = self._results.get(key)
        voided = coup is not None and bool(coup.voids)
        voided_before_result = voided and coup is not None and not coup.voids[0].was_resolved
        resolved = coup is not None and coup.resolved is not None
        paid_out: dict[str, int] = {}
        if len(book.settlements) > 1:
            self._error(
                Code.SETTLED_TWICE,
                f"the coup was settled {len(book.settlements)} times",
                store="settlement",
                notification_id=book.settlements[1].notification_id,
                **where,
            )
        if book.settlements:
            if voided_before_result:
                self._error(
                    Code.VIEWS_DISAGREE,
                    "settled although dealing voided the coup before its result",
                    store="settlement",
                    notification_id=book.settlements[0].notification_id,
                    **where,
                )
            elif coup is not None and not resolved:
                self._error(
                    Code.VIEWS_DISAGREE,
                    "settled although dealing never resolved the coup",
                    store="settlement",
                    notification_id=book.settlements[0].notification_id,
                    **where,
                )
            for settlement in book.settlements:
                paid_out.update(self._check_settlement(book, settlement, result, paytable, where))
        elif resolved and not voided_before_result:
            for bet_id in book.accepted:
                self._error(
                    Code.NEVER_SETTLED,
                    "accepted, the coup was resolved, the bet was never settled",
                    store="settlement",
                    bet_id=bet_id,
                    **where,
                )
        self._check_refunds(book, coup, voided, paid_out, where)
        self._count(book, coup, voided, paid_out)

    def _check_acceptance(self, book: BookView, where: dict[str, Any]) -> None:
        for bet_id in book.late:
            self._error(
                Code.ACCEPTED_AFTER_CLOSE,
                "accepted although placed after betting closed (or after the coup was decided)",
                store="settlement",
                bet_id=bet_id,
                notification_id=book.accepted[bet_id].notification_id,
                **where,
            )
        for bet_id in book.twice:
            self._error(
                Code.ACCEPTED_TWICE, "accepted twice", store="settlement", bet_id=bet_id, **where
            )
        # The reader flagged the accepted bets that broke the table's terms (see
        # decode._bets_answered); the rules' validate_bet says why.
        for bet_id in book.suspect:
            bettor_id, bet_type, amount, bet_currency, _at, nid, _placed = book.accepted[bet_id]
            problem = _invalid(
                _limit_key(book.limits), bet_type, amount, bet_currency, book.currency
            ) or (
                f"this bettor already bet {book.sides.get(bettor_id)} in this coup "
                "(opposing Player and Banker bets)"
            )
            self._error(
                Code.ACCEPTED_INVALID,
                f"accepted, but: {problem}",
                store="settlement",
                bet_id=bet_id,
                notification_id=nid,
                **where,
            )
        self._staked = book.staked
        for bet_id, rejection in book.rejected.items():
            if rejection.reason_code != DUPLICATE_BET_ID and bet_id in book.accepted:
                self._error(
                    Code.VIEWS_DISAGREE,
                    f"both accepted and rejected ({rejection.reason_code})",
                    store="settlement",
                    bet_id=bet_id,
                    notification_id=rejection.notification_id,
                    **where,
                )

    def _check_settlement(
        self,
        book: BookView,
        settlement: Any,
        result: CoupResult | None,
        paytable: Paytable | None,
        where: dict[str, Any],
    ) -> dict[str, int]:
        nid = settlement.notification_id
        if result is not None and (
            settlement.outcome != result.outcome.value
            or settlement.player_pair != result.player_pair
            or settlement.banker_pair != result.banker_pair
        ):
            self._error(
                Code.VIEWS_DISAGREE,
                f"settled as {settlement.outcome} (pairs P {settlement.player_pair}, "
                f"B {settlement.banker_pair}); the cards give {result.outcome.value} "
                f"(pairs P {result.player_pair}, B {result.banker_pair})",
                store="settlement",
                notification_id=nid,
                **where,
            )
        paid: dict[str, int] = {}
        staked_lines = paid_lines = 0
        desk = self.history.desk_rejections.get(book.table_id, {})
        accepted = book.accepted
        outcomes = (
            None if result is None else {bet.value: bet_result(bet, result) for bet in BetType}
        )
        wins = self._wins.setdefault(book.paytable, {})
        win, push = BetResult.WIN, BetResult.PUSH
        if outcomes is not None and paytable is not None:
            fast = self._settled_as_expected(settlement, accepted, outcomes, wins, paytable)
            if fast is not None:
                return fast  # every line is exactly what the rules give: nothing to report
        for line in settlement.lines:
            bet_id, bettor_id, bet_type, outcome, stake, payout, returned = line
            staked_lines += stake
            paid_lines += returned
            if bet_id in paid:
                self._error(
                    Code.SETTLED_TWICE,
                    "settled twice",
                    store="settlement",
                    bet_id=bet_id,
                    notification_id=nid,
                    **where,
                )
                continue
            paid[bet_id] = returned
            bet = accepted.get(bet_id)
            if bet is None:
                rejected = book.rejected.get(bet_id) or desk.get(bet_id)
                self._error(
                    Code.REJECTED_BET_SETTLED if rejected else Code.SETTLED_NOT_ACCEPTED,
                    (
                        f"rejected ({rejected.reason_code}) but settled"
                        if rejected
                        else "settled but never accepted"
                    )
                    + f": {outcome} {stake} -> {returned}",
                    store="settlement",
                    bet_id=bet_id,
                    notification_id=nid,
                    **where,
                )
                continue
            if outcomes is None or paytable is None:
                continue
            # services.shared.rules.settle_bet, made fast for a coup of many bets: the result of
            # each bet type is the rules' bet_result (once per coup), a winning payout the
            # paytable's win_amount (its odds and rounding rule) remembered per stake.
            amount = bet[2]
            due = outcomes.get(bet[1])
            if due is win:
                key = (bet[1], amount)
                true_payout = wins.get(key)
                if true_payout is None:
                    true_payout = wins[key] = paytable.win_amount(BET_TYPES[bet[1]], amount)
                truth = ("WIN", true_payout, amount + true_payout)
            elif due is push:
                truth = ("PUSH", 0, amount)
            elif due is None:
                truth = ("unknown bet type", 0, 0)
            else:
                truth = ("LOSE", 0, 0)
            if (
                outcome != truth[0]
                or stake != amount
                or payout != truth[1]
                or returned != truth[2]
                or bettor_id != bet[0]
                or bet_type != bet[1]
            ):
                self._error(
                    Code.WRONG_SETTLEMENT,
                    f"recorded {bet_type} by {bettor_id}: {outcome} stake {stake} payout "
                    f"{payout} returned {returned}; the {paytable.name} paytable gives "
                    f"{bet[1]} by {bet[0]}: {truth[0]} stake "
                    f"{amount} payout {truth[1]} returned {truth[2]}",
                    store="settlement",
                    bet_id=bet_id,
                    notification_id=nid,
                    **where,
                )
        if staked_lines != settlement.staked or paid_lines != settlement.paid:
            self._error(
                Code.WRONG_TOTALS,
                f"coup totals staked {settlement.staked} paid {settlement.paid}, its lines "
                f"add up to staked {staked_lines} paid {paid_lines}",
                store="settlement",
                notification_id=nid,
                **where,
            )
        for bet_id in accepted:
            if bet_id not in paid:
                self._error(
                    Code.NEVER_SETTLED,
                    "accepted but missing from the coup's settlement",
                    store="settlement",
                    bet_id=bet_id,
                    notification_id=nid,
                    **where,
                )
        return paid

    @staticmethod
    def _settled_as_expected(
        settlement: Any,
        accepted: dict[str, Any],
        outcomes: dict[str, BetResult],
        wins: dict[tuple[str, int], int],
        paytable: Paytable,
    ) -> dict[str, int] | None:
        """bet id -> returned when every line is exactly the rules' settlement, else None.

        The services settle bets in the order they were accepted, so a correct
        settlement lines up with the accepted bets one to one: each line is compared
        with the line the rules give (one list comparison per bet). Any difference
        sends the caller through the detailed checks that say what is wrong.
        """
        lines = settlement.lines
        if len(lines) != len(accepted):
            return None
        win, push = BetResult.WIN, BetResult.PUSH
        paid: dict[str, int] = {}
        staked = returned_total = 0
        for line, (bet_id, bet) in zip(lines, accepted.items(), strict=True):
            bettor_id, bet_type, amount = bet[0], bet[1], bet[2]
            due = outcomes.get(bet_type)
            if due is win:
                key = (bet_type, amount)
                payout = wins.get(key)
                if payout is None:
                    payout = wins[key] = paytable.win_amount(BET_TYPES[bet_type], amount)
                returned = amount + payout
                expected = [bet_id, bettor_id, bet_type, "WIN", amount, payout, returned]
            elif due is push:
                returned = amount
                expected = [bet_id, bettor_id, bet_type, "PUSH", amount, 0, amount]
            elif due is None:
                return None
            else:
                returned = 0
                expected = [bet_id, bettor_id, bet_type, "LOSE", amount, 0, 0]
            if line != expected or bet_id in paid:
                return None
            paid[bet_id] = returned
            staked += amount
            returned_total += returned
        if staked != settlement.staked or returned_total != settlement.paid:
            return None
        return paid

    def _check_refunds(
        self,
        book: BookView,
        coup: CoupView | None,
        voided: bool,
        paid_out: dict[str, int],
        where: dict[str, Any],
    ) -> None:
        if not book.refunds:
            if voided:
                assert coup is not None
                self._error(
                    Code.NOT_REFUNDED,
                    f"dealing voided the coup ({coup.voids[0].supervisor_id}: "
                    f"{coup.voids[0].reason}); settlement never refunded its "
                    f"{len(book.accepted)} bets",
                    store="settlement",
                    **where,
                )
            return
        refund = book.refunds[0]
        if not voided:
            self._error(
                Code.VIEWS_DISAGREE,
                "settlement refunded the coup, dealing never voided it",
                store="settlement",
                notification_id=refund.notification_id,
                **where,
            )
        elif coup is not None and (
            refund.supervisor_id != coup.voids[0].supervisor_id
            or refund.reason != coup.voids[0].reason
        ):
            self._error(
                Code.VIEWS_DISAGREE,
                f"refund names {refund.supervisor_id!r} ({refund.reason!r}), the void "
                f"{coup.voids[0].supervisor_id!r} ({coup.voids[0].reason!r})",
                store="settlement",
                notification_id=refund.notification_id,
                **where,
            )
        if len(book.refunds) > 1:
            self._error(
                Code.WRONG_REFUND,
                f"refunded {len(book.refunds)} times",
                store="settlement",
                notification_id=book.refunds[1].notification_id,
                **where,
            )
        seen: set[str] = set()
        total = 0
        for bet_id, _bettor, stake, adjustment in refund.lines:
            total += stake
            bet = book.accepted.get(bet_id)
            expected = None if bet is None else (bet.amount, bet.amount - paid_out.get(bet_id, 0))
            if bet_id in seen or expected is None or (stake, adjustment) != expected:
                self._error(
                    Code.WRONG_REFUND,
                    "refunded twice"
                    if bet_id in seen
                    else "refunded but never accepted"
                    if expected is None
                    else f"refunded stake {stake} adjustment {adjustment}, should be "
                    f"stake {expected[0]} adjustment {expected[1]}",
                    store="settlement",
                    bet_id=bet_id,
                    notification_id=refund.notification_id,
                    **where,
                )
            seen.add(bet_id)
        for bet_id in book.accepted:
            if bet_id not in seen:
                self._error(
                    Code.NOT_REFUNDED,
                    "the coup was voided, this bet was not refunded",
                    store="settlement",
                    bet_id=bet_id,
                    notification_id=refund.notification_id,
                    **where,
                )
        if total != refund.refunded:
            self._error(
                Code.WRONG_TOTALS,
                f"refund total {refund.refunded}, its lines add up to {total}",
                store="settlement",
                notification_id=refund.notification_id,
                **where,
            )

    # -- totals ----------------------------------------------------------------------
    def _count(
        self, book: BookView, coup: CoupView | None, voided: bool, paid_out: dict[str, int]
    ) -> None:
        if coup is None or (not book.settlements and not voided):
            return  # not decided yet
        decks = coup.settings.decks if coup.settings else 8
        self.totals.add_coup(
            table_id=book.table_id,
            shoe_id=coup.shoe_id,
            coup_id=book.coup_id,
            day=coup.opened_at[:10],
            bets=len(book.accepted),
            staked_by_type=self._staked,
            paid=sum(paid_out.values()),
            voided=voided,
            paytable=book.paytable,
            decks=decks,
        )


def _verify(cards: Iterable[Card], salt: str, commitment: str) -> bool:
    try:
        return verify_commitment(list(cards), bytes.fromhex(salt), commitment)
    except ValueError:
        return False
