"""The checks of the demo's ledger: what can be wrong with what the services published.

Pure functions over the ledger's records (:mod:`services.dev.demo.records`). Amounts are
recomputed from the cards in CoupResolved with :mod:`services.shared.rules` (the coup re-resolved
by the tableau, the bet settled with the table's paytable), independently of the settlement
service.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from contracts import BetAccepted, BetSettled, CoupResolved, TableOpened
from services.dev.demo.records import BetState, CoupState, ShoeState
from services.shared.rules.cards import Card
from services.shared.rules.paytable import BetType, get_paytable
from services.shared.rules.settlement import BetSettlement, settle_bet
from services.shared.rules.shoe import verify_commitment
from services.shared.rules.tableau import CoupResult, resolve_coup


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


class ProblemKind(StrEnum):
    SETTLED_TWICE = "settled_twice"
    NEVER_SETTLED = "never_settled"
    WRONG_AMOUNT = "wrong_amount"
    SETTLED_NOT_ACCEPTED = "settled_not_accepted"
    ACCEPTED_AND_REJECTED = "accepted_and_rejected"
    ANSWER_CHANGED = "answer_changed"
    TABLEAU_MISMATCH = "tableau_mismatch"
    COUP_RESOLVED_TWICE = "coup_resolved_twice"
    COUP_SETTLED_TWICE = "coup_settled_twice"
    COUP_TOTALS_MISMATCH = "coup_totals_mismatch"
    REFUNDED_TWICE = "refunded_twice"
    NEVER_REFUNDED = "never_refunded"
    WRONG_REFUND = "wrong_refund"
    REVEAL_MISMATCH = "reveal_mismatch"
    NEVER_ANSWERED = "never_answered"
    UNEXPECTED_ANSWER = "unexpected_answer"
    ACCEPTED_AFTER_OUTCOME = "accepted_after_outcome"
    ACCEPTED_OUTSIDE_TERMS = "accepted_outside_terms"


NON_BINDING = frozenset({"NO_SUCH_TABLE", "NO_SUCH_COUP"})
"""Refusals that do not use up a bet id (the bet may have raced ahead of its table or coup):
a resend of the same bet may be answered afresh."""

WARNING_KINDS = frozenset(
    {
        ProblemKind.UNEXPECTED_ANSWER,
        ProblemKind.NEVER_ANSWERED,
        ProblemKind.ACCEPTED_AFTER_OUTCOME,
    }
)
"""Not integrity failures: a bettor's guess about an answer (a late bet racing the close)."""


@dataclass(frozen=True, slots=True)
class Problem:
    kind: ProblemKind
    detail: str
    bet_id: str | None = None
    coup_id: str | None = None

    @property
    def severity(self) -> Severity:
        return Severity.WARNING if self.kind in WARNING_KINDS else Severity.ERROR

    def __str__(self) -> str:
        where = " ".join(
            part
            for part in (
                f"coup {self.coup_id}" if self.coup_id else "",
                f"bet {self.bet_id}" if self.bet_id else "",
            )
            if part
        )
        return f"{self.kind.value}: {where + ': ' if where else ''}{self.detail}"


def shoe_order(player: Iterable[str], banker: Iterable[str]) -> list[Card]:
    """The cards of a coup back in the order they left the shoe: P, B, P, B, then the
    Player's third card, then the Banker's third card."""
    p = [Card.parse(code) for code in player]
    b = [Card.parse(code) for code in banker]
    return [*p[:1], *b[:1], *p[1:2], *b[1:2], *p[2:], *b[2:]]


def check_coup(coup: CoupState, bets: Mapping[str, BetState], final: bool) -> list[Problem]:
    found: list[Problem] = []
    resolved = coup.resolved
    if resolved is not None:
        mismatch = tableau_mismatch(resolved)
        if mismatch:
            found.append(Problem(ProblemKind.TABLEAU_MISMATCH, mismatch, None, coup.coup_id))
    if len(coup.resolutions) > 1:
        hands = {(tuple(r.player_cards), tuple(r.banker_cards)) for r in coup.resolutions.values()}
        found.append(
            Problem(
                ProblemKind.COUP_RESOLVED_TWICE,
                f"{len(coup.resolutions)} distinct CoupResolved events "
                f"({len(hands)} different hands)",
                None,
                coup.coup_id,
            )
        )
    if len(coup.settled) > 1:
        found.append(
            Problem(
                ProblemKind.COUP_SETTLED_TWICE,
                f"{len(coup.settled)} distinct CoupSettled events",
                None,
                coup.coup_id,
            )
        )
    for settled in coup.settled.values():
        of_coup = [bets[b] for b in coup.bet_ids]
        settlements = [next(iter(b.settlements.values())) for b in of_coup if b.settlements]
        if not final and len(settlements) < len(of_coup):
            continue
        staked = sum(s.stake for s in settlements)
        house = sum(s.stake - s.returned for s in settlements)
        if (settled.bets, settled.staked, settled.house_result) != (
            len(settlements),
            staked,
            house,
        ):
            found.append(
                Problem(
                    ProblemKind.COUP_TOTALS_MISMATCH,
                    f"CoupSettled says bets={settled.bets} staked={settled.staked} "
                    f"house_result={settled.house_result}, its BetSettled events add up to "
                    f"bets={len(settlements)} staked={staked} house_result={house}",
                    None,
                    coup.coup_id,
                )
            )
    return found


def check_bet(
    bet: BetState,
    coups: Mapping[tuple[str, str], CoupState],
    tables: Mapping[str, TableOpened],
    final: bool,
) -> list[Problem]:
    found: list[Problem] = []
    accepted = bet.accepted
    real_rejections = [
        r
        for r in bet.rejections.values()
        if r.reason_code != "DUPLICATE_BET_ID" and r.reason_code not in NON_BINDING
    ]
    if accepted is not None and real_rejections:
        found.append(
            Problem(
                ProblemKind.ACCEPTED_AND_REJECTED,
                f"both BetAccepted and BetRejected {real_rejections[0].reason_code}",
                bet.bet_id,
                accepted.coup_id,
            )
        )
    found.extend(check_expectation(bet, final))
    if accepted is None:
        if bet.settlements or bet.refunds:
            found.append(
                Problem(
                    ProblemKind.SETTLED_NOT_ACCEPTED,
                    "settled or refunded but never accepted",
                    bet.bet_id,
                )
            )
        return found
    coup = coups.get((accepted.table_id, accepted.coup_id))
    outside = outside_terms(accepted, coup.terms if coup is not None else None)
    if outside:
        found.append(
            Problem(ProblemKind.ACCEPTED_OUTSIDE_TERMS, outside, bet.bet_id, accepted.coup_id)
        )
    if coup is not None and coup.resolved is not None:
        late = (accepted.occurred_at - coup.resolved.occurred_at).total_seconds()
        if late > 0:  # settlement lagged behind the table: the outcome was public already
            found.append(
                Problem(
                    ProblemKind.ACCEPTED_AFTER_OUTCOME,
                    f"accepted {late:.2f} s after CoupResolved was recorded",
                    bet.bet_id,
                    accepted.coup_id,
                )
            )
    if len(bet.settlements) > 1:
        found.append(
            Problem(
                ProblemKind.SETTLED_TWICE,
                f"{len(bet.settlements)} distinct BetSettled events",
                bet.bet_id,
                accepted.coup_id,
            )
        )
    voided = coup is not None and coup.voided is not None
    if voided:
        found.extend(check_refund(bet, accepted, final))
    elif bet.refunds:
        found.append(
            Problem(
                ProblemKind.WRONG_REFUND,
                "refunded although its coup was not voided",
                bet.bet_id,
                accepted.coup_id,
            )
        )
    if not bet.settlements:
        if final and not voided:
            why = "its coup resolved" if coup and coup.resolved else "its coup never resolved"
            found.append(Problem(ProblemKind.NEVER_SETTLED, why, bet.bet_id, accepted.coup_id))
        return found
    for settled in bet.settlements.values():
        wrong = settlement_mismatch(accepted, settled, coup, tables, final)
        if wrong:
            found.append(Problem(ProblemKind.WRONG_AMOUNT, wrong, bet.bet_id, accepted.coup_id))
    return found


def outside_terms(accepted: BetAccepted, terms: TableOpened | None) -> str | None:
    """Why an accepted bet breaks the table's terms in force when its coup opened, or None."""
    if terms is None:
        return None
    limit = terms.limits.get(accepted.bet_type)
    if limit is None:
        return f"{accepted.bet_type} is not offered at table {terms.table_id}"
    if not limit.minimum <= accepted.amount <= limit.maximum:
        return (
            f"stake {accepted.amount} outside the table's {accepted.bet_type} limits "
            f"{limit.minimum}..{limit.maximum}"
        )
    if accepted.currency != terms.currency:
        return f"currency {accepted.currency}, the table's is {terms.currency}"
    return None


def check_expectation(bet: BetState, final: bool) -> list[Problem]:
    if not bet.planned:
        return []
    if bet.first_answer is None:
        if final:
            return [Problem(ProblemKind.NEVER_ANSWERED, "no answer", bet.bet_id)]
        return []
    expected = bet.planned[0].expected or "ACCEPTED"
    if bet.first_answer != expected:
        return [
            Problem(
                ProblemKind.UNEXPECTED_ANSWER,
                f"{bet.planned[0].kind.value} bet answered {bet.first_answer}, expected {expected}",
                bet.bet_id,
                bet.planned[0].coup_id,
            )
        ]
    return []


def check_refund(bet: BetState, accepted: BetAccepted, final: bool) -> list[Problem]:
    if not bet.refunds:
        if final:
            return [
                Problem(
                    ProblemKind.NEVER_REFUNDED,
                    "its coup was voided",
                    bet.bet_id,
                    accepted.coup_id,
                )
            ]
        return []
    if len(bet.refunds) > 1:
        return [
            Problem(
                ProblemKind.REFUNDED_TWICE,
                f"{len(bet.refunds)} distinct BetRefunded events",
                bet.bet_id,
                accepted.coup_id,
            )
        ]
    refund = next(iter(bet.refunds.values()))
    settled = next(iter(bet.settlements.values()), None)
    adjustment = accepted.amount - settled.returned if settled else accepted.amount
    if (refund.stake, refund.refunded, refund.adjustment) != (
        accepted.amount,
        accepted.amount,
        adjustment,
    ):
        return [
            Problem(
                ProblemKind.WRONG_REFUND,
                f"refund stake={refund.stake} refunded={refund.refunded} "
                f"adjustment={refund.adjustment}, expected stake={accepted.amount} "
                f"refunded={accepted.amount} adjustment={adjustment}",
                bet.bet_id,
                accepted.coup_id,
            )
        ]
    return []


def settlement_mismatch(
    accepted: BetAccepted,
    settled: BetSettled,
    coup: CoupState | None,
    tables: Mapping[str, TableOpened],
    final: bool,
) -> str | None:
    if coup is None or coup.resolved is None:
        return "settled, but no CoupResolved was seen for its coup" if final else None
    table = tables.get(accepted.table_id)
    paytable = table.paytable if table is not None else "standard"
    try:
        expected = recompute(accepted.bet_type, accepted.amount, coup.resolved, paytable)
    except ValueError as error:
        return f"cannot recompute: {error}"
    got = (settled.bet_type, settled.result, settled.stake, settled.payout, settled.returned)
    want = (
        accepted.bet_type,
        expected.result.value,
        expected.stake,
        expected.payout,
        expected.returned,
    )
    if got != want:
        return (
            f"settled (type, result, stake, payout, returned)={got}, recomputed {want} "
            f"from {coup.resolved.player_cards} vs {coup.resolved.banker_cards}"
        )
    return None


def check_shoe(shoe: ShoeState) -> list[Problem]:
    closed = shoe.closed
    if closed is None:
        return []
    found: list[Problem] = []
    order = list(closed.order)
    for position, card in sorted(shoe.cards.items()):
        if position >= len(order) or order[position] != card:
            revealed = order[position] if position < len(order) else "nothing"
            found.append(
                Problem(
                    ProblemKind.REVEAL_MISMATCH,
                    f"shoe {shoe.shoe_id} position {position}: handed out {card}, "
                    f"revealed {revealed}",
                )
            )
    try:
        cards = [Card.parse(code) for code in order]
        honest = verify_commitment(cards, bytes.fromhex(closed.salt), shoe.commitment)
    except ValueError as error:
        found.append(Problem(ProblemKind.REVEAL_MISMATCH, f"shoe {shoe.shoe_id}: {error}"))
        return found
    if not honest or (closed.commitment != shoe.commitment):
        found.append(
            Problem(
                ProblemKind.REVEAL_MISMATCH,
                f"shoe {shoe.shoe_id}: revealed order and salt do not match the commitment "
                f"published when it was shuffled",
            )
        )
    return found


def recompute(
    bet_type: str, stake: int, resolved: CoupResolved, paytable: str, cache: bool = True
) -> BetSettlement:
    """Settle a bet from scratch: re-resolve the coup from its cards, then apply the paytable."""
    cards = (tuple(resolved.player_cards), tuple(resolved.banker_cards))
    result = _resolve(cards) if cache else resolve_coup(shoe_order(*cards))
    return settle_bet(BetType(bet_type), stake, result, get_paytable(paytable))


@functools.lru_cache(maxsize=4096)
def _resolve(cards: tuple[tuple[str, ...], tuple[str, ...]]) -> CoupResult:
    return resolve_coup(shoe_order(*cards))


def tableau_mismatch(resolved: CoupResolved) -> str | None:
    """Why ``resolved`` does not follow the tableau, or None when it does."""
    try:
        result: CoupResult = resolve_coup(shoe_order(resolved.player_cards, resolved.banker_cards))
    except ValueError as error:  # NotEnoughCards, CardParseError
        return f"cards {resolved.player_cards} vs {resolved.banker_cards}: {error}"
    got = (
        tuple(resolved.player_cards),
        tuple(resolved.banker_cards),
        resolved.player_total,
        resolved.banker_total,
        resolved.outcome,
        resolved.natural,
        resolved.player_pair,
        resolved.banker_pair,
    )
    want = (
        tuple(card.code for card in result.player),
        tuple(card.code for card in result.banker),
        result.player_total,
        result.banker_total,
        result.outcome.value,
        result.natural,
        result.player_pair,
        result.banker_pair,
    )
    if got != want:
        return f"reported {got}, the tableau gives {want}"
    return None
