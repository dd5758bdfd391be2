"""The checks of the demo's ledger: what can be wrong with what the services published.

Pure functions over the ledger's views (:mod:`services.dev.demo.records`: the read side's
history of the messages seen, and the demo's answers). Amounts are recomputed from the cards
in CoupResolved with :mod:`services.shared.rules` (the coup re-resolved by the tableau, the
bet settled with the table's paytable), independently of the settlement service. Unlike the
audit's checks, these judge a live, partial stream: what has not arrived yet is a problem
only when the run is over (``final``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from contracts import NON_BINDING, CoupResolved
from services.dev.demo.records import AcceptedBet, BetState, CoupState, Lines, ShoeState
from services.shared.facts.dealing import CoupResolvedFact
from services.shared.facts.settlement import SettledLine
from services.shared.rules.cards import Card
from services.shared.rules.paytable import BetType, get_paytable
from services.shared.rules.settlement import BetSettlement, settle_bet
from services.shared.rules.shoe import verify_commitment
from services.shared.rules.tableau import CoupResult, dealing_order, resolve_coup
from services.tools.history.codes import Check, Severity
from services.tools.history.views import TableSettings, TableView

ProblemKind = Check
"""The ledger's problem kinds: the read side's one list of check codes (its demo-only codes,
and the audit's codes under the demo's older names as aliases)."""

Resolved = CoupResolved | CoupResolvedFact
"""A coup's result: the message, or the fact the ledger's views keep of it."""


DUPLICATE_BET_ID = "DUPLICATE_BET_ID"
ACCEPTED = "ACCEPTED"

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
    return [Card.parse(code) for code in dealing_order(list(player), list(banker))]


def check_coup(coup: CoupState, lines: Lines, final: bool) -> list[Problem]:
    found: list[Problem] = []
    resolved = coup.resolved
    if resolved is not None:
        mismatch = tableau_mismatch(resolved)
        if mismatch:
            found.append(Problem(ProblemKind.TABLEAU_MISMATCH, mismatch, None, coup.coup_id))
    resolutions = coup.resolutions
    if len(resolutions) > 1:
        hands = {(tuple(r.fact.player_cards), tuple(r.fact.banker_cards)) for r in resolutions}
        found.append(
            Problem(
                ProblemKind.COUP_RESOLVED_TWICE,
                f"{len(resolutions)} distinct CoupResolved events ({len(hands)} different hands)",
                None,
                coup.coup_id,
            )
        )
    settled_coup = coup.settled
    if len(settled_coup) > 1:
        found.append(
            Problem(
                ProblemKind.COUP_SETTLED_TWICE,
                f"{len(settled_coup)} distinct CoupSettled events",
                None,
                coup.coup_id,
            )
        )
    for settled in settled_coup:
        of_coup = coup.bet_ids
        settlements = [lines.settled[b][0] for b in of_coup if b in lines.settled]
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
    tables: Mapping[str, TableView],
    final: bool,
) -> list[Problem]:
    found: list[Problem] = []
    accepted = bet.accepted
    real_rejections = [
        r
        for r in bet.rejections.values()
        if r.reason_code != DUPLICATE_BET_ID and r.reason_code not in NON_BINDING
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
    resolution = None if coup is None else coup.resolution
    if resolution is not None:
        late = (
            datetime.fromisoformat(accepted.at) - datetime.fromisoformat(resolution.at)
        ).total_seconds()
        if late > 0:  # settlement lagged behind the table: the outcome was public already
            found.append(
                Problem(
                    ProblemKind.ACCEPTED_AFTER_OUTCOME,
                    f"accepted {late:.2f} s after CoupResolved was recorded",
                    bet.bet_id,
                    accepted.coup_id,
                )
            )
    settlements = bet.settlements
    if len(settlements) > 1:
        found.append(
            Problem(
                ProblemKind.SETTLED_TWICE,
                f"{len(settlements)} distinct BetSettled events",
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
    if not settlements:
        if final and not voided:
            why = "its coup resolved" if coup and coup.resolved else "its coup never resolved"
            found.append(Problem(ProblemKind.NEVER_SETTLED, why, bet.bet_id, accepted.coup_id))
        return found
    for settled in settlements:
        wrong = settlement_mismatch(accepted, settled, coup, tables, final)
        if wrong:
            found.append(Problem(ProblemKind.WRONG_AMOUNT, wrong, bet.bet_id, accepted.coup_id))
    return found


def outside_terms(accepted: AcceptedBet, terms: TableSettings | None) -> str | None:
    """Why an accepted bet breaks the table's terms in force when its coup opened, or None."""
    if terms is None:
        return None
    limit = terms.limits.get(accepted.bet_type)
    if limit is None:
        return f"{accepted.bet_type} is not offered at table {accepted.table_id}"
    if not limit["minimum"] <= accepted.amount <= limit["maximum"]:
        return (
            f"stake {accepted.amount} outside the table's {accepted.bet_type} limits "
            f"{limit['minimum']}..{limit['maximum']}"
        )
    if accepted.currency != terms.currency:
        return f"currency {accepted.currency}, the table's is {terms.currency}"
    return None


def check_expectation(bet: BetState, final: bool) -> list[Problem]:
    """The first binding answer against the one the plan expected."""
    if not bet.planned:
        return []
    if bet.first_answer is None:
        if final:
            return [Problem(ProblemKind.NEVER_ANSWERED, "no answer", bet.bet_id)]
        return []
    expected = bet.planned[0].expected or ACCEPTED
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


def check_refund(bet: BetState, accepted: AcceptedBet, final: bool) -> list[Problem]:
    refunds = bet.refunds
    if not refunds:
        if final:
            return [
                Problem(
                    ProblemKind.NEVER_REFUNDED, "its coup was voided", bet.bet_id, accepted.coup_id
                )
            ]
        return []
    if len(refunds) > 1:
        return [
            Problem(
                ProblemKind.REFUNDED_TWICE,
                f"{len(refunds)} distinct BetRefunded events",
                bet.bet_id,
                accepted.coup_id,
            )
        ]
    refund = refunds[0]
    settled = bet.settlements[0] if bet.settlements else None
    adjustment = accepted.amount - settled.returned if settled else accepted.amount
    if (refund.stake, refund.adjustment) != (accepted.amount, adjustment):
        return [
            Problem(
                ProblemKind.WRONG_REFUND,
                f"refund stake={refund.stake} adjustment={refund.adjustment}, expected "
                f"stake={accepted.amount} adjustment={adjustment}",
                bet.bet_id,
                accepted.coup_id,
            )
        ]
    return []


def settlement_mismatch(
    accepted: AcceptedBet,
    settled: SettledLine,
    coup: CoupState | None,
    tables: Mapping[str, TableView],
    final: bool,
) -> str | None:
    resolved = None if coup is None else coup.resolved
    if resolved is None:
        return "settled, but no CoupResolved was seen for its coup" if final else None
    table = tables.get(accepted.table_id)
    paytable = table.settings.paytable if table is not None and table.opened_at else "standard"
    try:
        expected = recompute(accepted.bet_type, accepted.amount, resolved, paytable)
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
            f"from {resolved.player_cards} vs {resolved.banker_cards}"
        )
    return None


def check_shoe(shoe: ShoeState) -> list[Problem]:
    """Each position handed out once; once revealed, the order matches every card handed
    out and the commitment published when the shoe was shuffled."""
    found: list[Problem] = []
    cards: dict[int, str] = {}
    for position, card in shoe.view.handed_out():
        earlier = cards.setdefault(position, card)
        if earlier != card:
            found.append(
                Problem(
                    ProblemKind.REVEAL_MISMATCH,
                    f"shoe {shoe.shoe_id} position {position} handed out as {earlier} and {card}",
                )
            )
    closed = shoe.closed
    if closed is None:
        return found
    order = list(closed.order)
    for position, card in sorted(cards.items()):
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
        parsed = [Card.parse(code) for code in order]
        honest = verify_commitment(parsed, bytes.fromhex(closed.salt), shoe.commitment)
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
    bet_type: str, stake: int, resolved: Resolved, paytable: str, cache: bool = True
) -> BetSettlement:
    """Settle a bet from scratch: re-resolve the coup from its cards, then apply the paytable."""
    cards = (tuple(resolved.player_cards), tuple(resolved.banker_cards))
    result = _resolve(cards) if cache else resolve_coup(shoe_order(*cards))
    return settle_bet(BetType(bet_type), stake, result, get_paytable(paytable))


@functools.lru_cache(maxsize=4096)
def _resolve(cards: tuple[tuple[str, ...], tuple[str, ...]]) -> CoupResult:
    return resolve_coup(shoe_order(*cards))


def tableau_mismatch(resolved: Resolved) -> str | None:
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
