"""The demo's ledger catches what the services could get wrong, by recomputing from the cards."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from uuid import uuid4

from contracts import (
    BetAccepted,
    BetLimitSpec,
    BetRefunded,
    BetRejected,
    BetSettled,
    BettingOpened,
    CardDrawn,
    CoupResolved,
    CoupSettled,
    CoupVoided,
    ShoeClosed,
    ShoeShuffled,
    TableOpened,
)
from services.dev.demo.bettors import BetKind, PlannedBet
from services.dev.demo.ledger import Ledger, ProblemKind, Severity, recompute, shoe_order
from services.shared.rules.cards import Card
from services.shared.rules.paytable import get_paytable
from services.shared.rules.shoe import commitment

TABLE = "t1"
COUP = "c1"
LIMITS = {
    name: BetLimitSpec(minimum=100, maximum=100_000)
    for name in ("player", "banker", "tie", "player_pair", "banker_pair")
}


def flat_edge(decks: int, paytable: str) -> dict[str, Fraction]:
    return {"player": Fraction(1, 100), "banker": Fraction(1, 100), "tie": Fraction(1, 10)}


def opened_table(ledger: Ledger, paytable: str = "standard") -> None:
    ledger.observe(
        TableOpened(
            table_id=TABLE,
            decks=1,
            paytable=paytable,
            limits=LIMITS
            if paytable == "standard"
            else {
                bet.value: BetLimitSpec(minimum=100, maximum=100_000)
                for bet in get_paytable(paytable).offered
            },
            currency="EUR",
            betting_window_ms=100,
            cut_card_from_end=10,
        )
    )
    ledger.observe(
        BettingOpened(
            table_id=TABLE,
            coup_id=COUP,
            coup_number=1,
            shoe_id="s1",
            closes_at=datetime.now(UTC),
            last_of_shoe=False,
        )
    )


def resolved(player: list[str], banker: list[str], **overrides: object) -> CoupResolved:
    """A CoupResolved whose facts come from the rules (unless overridden)."""
    from services.shared.rules.tableau import resolve_coup

    result = resolve_coup(shoe_order(player, banker))
    fields: dict[str, object] = {
        "table_id": TABLE,
        "coup_id": COUP,
        "coup_number": 1,
        "shoe_id": "s1",
        "player_cards": player,
        "banker_cards": banker,
        "player_total": result.player_total,
        "banker_total": result.banker_total,
        "outcome": result.outcome.value,
        "natural": result.natural,
        "player_pair": result.player_pair,
        "banker_pair": result.banker_pair,
    }
    fields.update(overrides)
    return CoupResolved.model_validate(fields)


EARLY = datetime(2026, 1, 1, tzinfo=UTC)
"""When the bets of these tests were accepted: before any coup was resolved."""


def accepted(bet_id: str, bet_type: str = "banker", amount: int = 1000) -> BetAccepted:
    return BetAccepted(
        occurred_at=EARLY,
        table_id=TABLE,
        bet_id=bet_id,
        coup_id=COUP,
        bettor_id="bettor-1",
        bet_type=bet_type,
        amount=amount,
        currency="EUR",
    )


def settled_as(
    event: BetAccepted, coup: CoupResolved, paytable: str = "standard", **overrides: object
) -> BetSettled:
    """The correct BetSettled for ``event`` (unless overridden)."""
    right = recompute(event.bet_type, event.amount, coup, paytable)
    fields: dict[str, object] = {
        "table_id": TABLE,
        "bet_id": event.bet_id,
        "coup_id": COUP,
        "bettor_id": event.bettor_id,
        "bet_type": event.bet_type,
        "result": right.result.value,
        "stake": right.stake,
        "payout": right.payout,
        "returned": right.returned,
        "currency": "EUR",
    }
    fields.update(overrides)
    return BetSettled.model_validate(fields)


BANKER_WINS = (["2H", "3D"], ["9C", "KS"])  # Player 5 vs Banker natural 9


def kinds(ledger: Ledger) -> list[ProblemKind]:
    return [problem.kind for problem in ledger.problems()]


def test_a_correct_run_has_no_problem_and_the_banker_pays_19_to_20() -> None:
    ledger = Ledger(edge=flat_edge)
    opened_table(ledger)
    coup = resolved(*BANKER_WINS)
    bet = accepted("b1", "banker", 1000)
    for event in (bet, coup, settled_as(bet, coup)):
        ledger.observe(event)
    assert ledger.problems() == []
    settlement = recompute("banker", 1000, coup, "standard")
    assert (settlement.result, settlement.payout, settlement.returned) == ("WIN", 950, 1950)
    summary = ledger.summary()
    assert (summary.bets_accepted, summary.bets_settled, summary.house_result) == (1, 1, -950)
    assert summary.expected_house_result == Fraction(10)


def test_a_bet_settled_twice_is_an_error() -> None:
    ledger = Ledger(edge=flat_edge)
    opened_table(ledger)
    coup = resolved(*BANKER_WINS)
    bet = accepted("b1")
    for event in (bet, coup, settled_as(bet, coup), settled_as(bet, coup)):
        ledger.observe(event)
    assert kinds(ledger) == [ProblemKind.SETTLED_TWICE]


def test_a_redelivered_settlement_is_not_a_second_settlement() -> None:
    ledger = Ledger(edge=flat_edge)
    opened_table(ledger)
    coup = resolved(*BANKER_WINS)
    bet = accepted("b1")
    settlement = settled_as(bet, coup)
    for event in (bet, coup, settlement, settlement):
        ledger.observe(event)
    assert ledger.problems() == []
    assert ledger.redeliveries == 1


def test_an_accepted_bet_never_settled_is_an_error_only_when_the_run_is_over() -> None:
    ledger = Ledger(edge=flat_edge)
    opened_table(ledger)
    ledger.observe(accepted("b1"))
    ledger.observe(resolved(*BANKER_WINS))
    assert ledger.problems(final=False) == []
    assert kinds(ledger) == [ProblemKind.NEVER_SETTLED]
    assert ledger.unsettled() == ["b1"]


def test_a_wrong_payout_is_caught_by_recomputing_from_the_cards() -> None:
    ledger = Ledger(edge=flat_edge)
    opened_table(ledger)
    coup = resolved(*BANKER_WINS)
    bet = accepted("b1", "banker", 1010)  # 19/20 of 1010 = 959.5, rounded down to 959
    ledger.observe(bet)
    ledger.observe(coup)
    ledger.observe(settled_as(bet, coup, payout=960, returned=1970))
    [problem] = ledger.problems()
    assert problem.kind is ProblemKind.WRONG_AMOUNT
    assert problem.severity is Severity.ERROR
    assert "959" in problem.detail


def test_a_wrong_result_is_caught_even_when_the_coup_event_lies_about_the_outcome() -> None:
    ledger = Ledger(edge=flat_edge)
    opened_table(ledger)
    lying = resolved(*BANKER_WINS, outcome="PLAYER", player_total=9, banker_total=5)
    bet = accepted("b1", "player", 1000)
    ledger.observe(bet)
    ledger.observe(lying)
    ledger.observe(
        settled_as(bet, lying, result="WIN", payout=1000, returned=2000)  # as the lie says
    )
    assert sorted(kinds(ledger)) == sorted([ProblemKind.TABLEAU_MISMATCH, ProblemKind.WRONG_AMOUNT])


def test_side_bets_are_recomputed_under_the_tables_paytable() -> None:
    ledger = Ledger(edge=flat_edge)
    opened_table(ledger, "no-commission")
    coup = resolved(*BANKER_WINS)  # Banker's natural 9: a natural win for its Dragon Bonus
    bets = [
        accepted("b1", "dragon_bonus_banker", 1000),
        accepted("b2", "banker", 1000),
        accepted("b3", "super_6", 100),
    ]
    for bet in bets:
        ledger.observe(bet)
    ledger.observe(coup)
    ledger.observe(settled_as(bets[0], coup, "no-commission"))
    ledger.observe(settled_as(bets[1], coup, "no-commission", payout=950, returned=1950))
    ledger.observe(settled_as(bets[2], coup, "no-commission"))
    [problem] = ledger.problems()
    assert (problem.kind, problem.bet_id) == (ProblemKind.WRONG_AMOUNT, "b2")  # 1 to 1 here
    assert recompute("dragon_bonus_banker", 1000, coup, "no-commission").payout == 1000
    summary = ledger.summary()
    assert summary.settled_by_type == {"dragon_bonus_banker": 1, "banker": 1, "super_6": 1}


def test_a_push_on_a_tie_returns_the_stake() -> None:
    coup = resolved(["TH", "7D"], ["7C", "KS"])  # 7 - 7, both stand
    assert coup.outcome == "TIE"
    push = recompute("player", 500, coup, "standard")
    assert (push.result, push.payout, push.returned) == ("PUSH", 0, 500)
    assert recompute("tie", 500, coup, "standard").returned == 4500
    assert recompute("tie", 500, coup, "tie-9-to-1").returned == 5000


def test_a_settlement_of_a_bet_never_accepted_is_an_error() -> None:
    ledger = Ledger(edge=flat_edge)
    opened_table(ledger)
    coup = resolved(*BANKER_WINS)
    ledger.observe(coup)
    ledger.observe(settled_as(accepted("ghost"), coup))
    assert kinds(ledger) == [ProblemKind.SETTLED_NOT_ACCEPTED]


def test_coup_totals_must_add_up() -> None:
    ledger = Ledger(edge=flat_edge)
    opened_table(ledger)
    coup = resolved(*BANKER_WINS)
    bet = accepted("b1", "player", 1000)  # loses
    for event in (bet, coup, settled_as(bet, coup)):
        ledger.observe(event)
    ledger.observe(
        CoupSettled(
            table_id=TABLE,
            coup_id=COUP,
            bets=1,
            staked=1000,
            paid=0,
            house_result=999,
            currency="EUR",
        )
    )
    assert kinds(ledger) == [ProblemKind.COUP_TOTALS_MISMATCH]


def test_a_voided_coup_must_refund_each_bet_once_with_the_right_adjustment() -> None:
    ledger = Ledger(edge=flat_edge)
    opened_table(ledger)
    coup = resolved(*BANKER_WINS)
    winner, loser, forgotten = accepted("w", "banker"), accepted("l", "player"), accepted("f")
    for event in (winner, loser, forgotten, coup):
        ledger.observe(event)
    ledger.observe(settled_as(winner, coup))
    ledger.observe(settled_as(loser, coup))
    ledger.observe(settled_as(forgotten, coup))
    ledger.observe(
        CoupVoided(
            table_id=TABLE, coup_id=COUP, supervisor_id="sup", reason="misdeal", was_resolved=True
        )
    )

    def refund(bet: BetAccepted, adjustment: int) -> BetRefunded:
        return BetRefunded(
            table_id=TABLE,
            bet_id=bet.bet_id,
            coup_id=COUP,
            bettor_id=bet.bettor_id,
            stake=bet.amount,
            refunded=bet.amount,
            adjustment=adjustment,
            currency="EUR",
        )

    ledger.observe(refund(winner, 1000 - 1950))  # the winner gives back the win
    ledger.observe(refund(loser, 0))  # wrong: the loser lost 1000, gets it back
    problems = ledger.problems()
    assert sorted(p.kind for p in problems) == sorted(
        [ProblemKind.WRONG_REFUND, ProblemKind.NEVER_REFUNDED]
    )
    assert {p.bet_id for p in problems} == {"l", "f"}
    assert ledger.summary().bets_refunded == 2


def test_answers_are_compared_with_what_each_bet_expected() -> None:
    ledger = Ledger(edge=flat_edge)
    opened_table(ledger)
    plan = PlannedBet(
        bet_id="x",
        table_id=TABLE,
        coup_id=COUP,
        bettor_id="bettor-1",
        bet_type="banker",
        amount=Decimal(50),
        currency="EUR",
        kind=BetKind.BELOW_MINIMUM,
        expected="BELOW_MINIMUM",
    )
    ledger.expect(plan)
    assert ledger.unanswered() == ["x"]
    ledger.observe(
        BetRejected(
            table_id=TABLE,
            bet_id="x",
            coup_id=COUP,
            bettor_id="bettor-1",
            bet_type="banker",
            amount="50",
            currency="EUR",
            reason_code="ABOVE_MAXIMUM",
            message="wrong reason",
        )
    )
    [problem] = ledger.problems()
    assert problem.kind is ProblemKind.UNEXPECTED_ANSWER
    assert problem.severity is Severity.WARNING
    assert ledger.summary().bets_rejected == {"ABOVE_MAXIMUM": 1}


def test_a_revealed_shoe_must_match_the_cards_drawn_and_the_commitment() -> None:
    order = [Card.parse(code) for code in ("9H", "2C", "KD", "5S", "AH", "7C")]
    salt = bytes(32)
    ledger = Ledger(edge=flat_edge)
    ledger.observe(
        ShoeShuffled(
            table_id=TABLE,
            shoe_id="s1",
            decks=1,
            card_count=52,
            commitment=commitment(order, salt),
            commitment_scheme="sha256(salt|order)/v1",
            cut_card_index=40,
        )
    )
    for position, card in enumerate(("9H", "2C", "KD")):
        ledger.observe(
            CardDrawn(
                table_id=TABLE,
                shoe_id="s1",
                coup_id=COUP,
                request_id="r1",
                position=position,
                card=card,
            )
        )
    honest = ShoeClosed(
        table_id=TABLE,
        shoe_id="s1",
        order=[card.code for card in order],
        salt=salt.hex(),
        commitment=commitment(order, salt),
        cards_dealt=3,
    )
    ledger.observe(honest)
    assert ledger.problems() == []

    swapped = ["2C", "9H", "KD", "5S", "AH", "7C"]
    ledger.observe(honest.model_copy(update={"order": swapped, "event_id": uuid4()}))
    found = ledger.problems()
    assert {p.kind for p in found} == {ProblemKind.REVEAL_MISMATCH}
    assert len(found) == 3  # two positions differ, and the commitment fails


def rejected(bet_id: str, code: str, amount: str = "1000") -> BetRejected:
    return BetRejected(
        table_id=TABLE,
        bet_id=bet_id,
        coup_id=COUP,
        bettor_id="bettor-1",
        bet_type="banker",
        amount=amount,
        currency="EUR",
        reason_code=code,
        message="why",
    )


def test_a_bet_that_raced_ahead_of_its_coup_may_be_accepted_on_a_resend() -> None:
    ledger = Ledger(edge=flat_edge)
    opened_table(ledger)
    coup = resolved(*BANKER_WINS)
    bet = accepted("b1")
    for event in (rejected("b1", "NO_SUCH_COUP"), bet, coup, settled_as(bet, coup)):
        ledger.observe(event)
    assert ledger.problems() == []
    assert ledger.rejections() == {}


def test_a_bet_both_accepted_and_refused_is_an_error_but_a_reused_id_is_not() -> None:
    ledger = Ledger(edge=flat_edge)
    opened_table(ledger)
    coup = resolved(*BANKER_WINS)
    bet = accepted("b1")
    for event in (bet, coup, settled_as(bet, coup), rejected("b1", "DUPLICATE_BET_ID", "5")):
        ledger.observe(event)
    assert ledger.problems() == []
    assert ledger.rejections() == {"DUPLICATE_BET_ID": 1}
    ledger.observe(rejected("b1", "BETTING_CLOSED"))
    assert sorted(kinds(ledger)) == sorted(
        [ProblemKind.ANSWER_CHANGED, ProblemKind.ACCEPTED_AND_REJECTED]
    )


def test_a_coup_resolved_twice_with_other_cards_is_an_error() -> None:
    ledger = Ledger(edge=flat_edge)
    opened_table(ledger)
    ledger.observe(resolved(*BANKER_WINS))
    ledger.observe(resolved(["TH", "7D"], ["7C", "KS"]))
    assert kinds(ledger) == [ProblemKind.COUP_RESOLVED_TWICE]


def test_a_bet_accepted_after_the_outcome_was_recorded_is_a_warning() -> None:
    ledger = Ledger(edge=flat_edge)
    opened_table(ledger)
    coup = resolved(*BANKER_WINS)
    late = accepted("b1").model_copy(
        update={"occurred_at": coup.occurred_at + timedelta(seconds=2)}
    )
    for event in (coup, late, settled_as(late, coup)):
        ledger.observe(event)
    [problem] = ledger.problems()
    assert problem.kind is ProblemKind.ACCEPTED_AFTER_OUTCOME
    assert problem.severity is Severity.WARNING


def test_a_bet_accepted_outside_the_tables_terms_is_an_error() -> None:
    # Whatever the settlement service says (e.g. it believed forged terms), the ledger holds
    # every accepted bet to the terms the table opened with.
    ledger = Ledger()
    opened_table(ledger)
    ledger.observe(accepted("whale", amount=10**12))
    ledger.observe(accepted("tiny", amount=1))
    ledger.observe(accepted("fine", amount=100_000))
    wrong = [p for p in ledger.problems() if p.kind is ProblemKind.ACCEPTED_OUTSIDE_TERMS]
    assert sorted(p.bet_id or "" for p in wrong) == ["tiny", "whale"]
    assert all(p.severity is Severity.ERROR for p in wrong)
    assert "outside the table's banker limits 100..100000" in str(wrong[0])
