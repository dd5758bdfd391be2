"""Simulated bettors: valid bets within the limits, and each kind of bad bet on demand."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest

from services.dev.demo.bettors import (
    EXPECTED_REASON,
    WILD_KINDS,
    BetKind,
    Crowd,
    PlannedBet,
    TableTerms,
    demo_limits,
)
from services.shared.rules.paytable import PAYTABLES, BetType, get_paytable
from services.shared.rules.validation import BetLimit, validate_bet

OFFERED = [bet.value for bet in get_paytable("no-commission").offered]
TERMS = TableTerms("demo-1", "EUR", demo_limits(OFFERED))
RULES_LIMITS = {
    BetType(name): BetLimit(limit.minimum, limit.maximum) for name, limit in TERMS.limits.items()
}


def rules_verdict(bet: PlannedBet, earlier: list[PlannedBet]) -> str | None:
    """What the pure rules say of a bet, given the bettor's bets accepted before it."""
    types = [
        BetType(b.bet_type) for b in earlier if b.bettor_id == bet.bettor_id and b.expected is None
    ]
    rejection = validate_bet(bet.bet_type, bet.amount, RULES_LIMITS, bet.currency, "EUR", types)
    return None if rejection is None else rejection.reason.value


def test_a_tame_crowd_bets_only_within_the_limits() -> None:
    crowd = Crowd(TERMS, bettors=50, wildness=0.0, seed=1)
    bets = [bet for n in range(20) for bet in crowd.plan_coup(f"c{n}").all_bets]
    assert len(bets) > 500
    assert {bet.kind for bet in bets} == {BetKind.VALID}
    by_coup: dict[str, list[PlannedBet]] = {}
    for bet in bets:
        assert rules_verdict(bet, by_coup.get(bet.coup_id, [])) is None, bet
        by_coup.setdefault(bet.coup_id, []).append(bet)
        assert bet.amount == int(bet.amount) > 0
    assert len({bet.bet_id for bet in bets}) == len(bets)
    assert {bet.bet_type for bet in bets} == set(OFFERED)  # the side bets of the table too


@pytest.mark.parametrize("paytable", list(PAYTABLES))
def test_bettors_play_the_side_bets_their_table_offers(paytable: str) -> None:
    offered = [bet.value for bet in get_paytable(paytable).offered]
    crowd = Crowd(TableTerms("t", "EUR", demo_limits(offered)), bettors=50, wildness=0.5, seed=8)
    bets = [bet for n in range(20) for bet in crowd.plan_coup(f"c{n}").all_bets]
    valid = {bet.bet_type for bet in bets if bet.kind is BetKind.VALID}
    assert valid == set(offered)
    refused = {bet.bet_type for bet in bets if bet.kind is BetKind.NOT_OFFERED}
    assert refused and not refused & set(offered) and refused <= {b.value for b in BetType}


def test_no_bettor_backs_both_player_and_banker_unless_meant_to() -> None:
    crowd = Crowd(TERMS, bettors=200, wildness=0.5, seed=2)
    plan = crowd.plan_coup("c1")
    for bettor in crowd.bettor_ids():
        sides = [
            bet
            for bet in plan.open_bets
            if bet.bettor_id == bettor and bet.bet_type in ("player", "banker")
        ]
        if len({bet.bet_type for bet in sides}) == 2:
            assert [bet.kind for bet in sides][-1] is BetKind.OPPOSING


@pytest.mark.parametrize("kind", [k for k in WILD_KINDS if k is not BetKind.REPEAT])
def test_each_kind_of_bad_bet_is_what_the_rules_reject_for_its_reason(kind: BetKind) -> None:
    crowd = Crowd(TERMS, bettors=1, wildness=0.0, seed=3)
    earlier = [crowd._bet("c1", "bettor-0001", "player", 1000, BetKind.VALID)]
    bad = crowd.wild_bet(kind, "c1", "bettor-0001", earlier)
    assert bad is not None
    assert bad.kind is kind
    assert bad.expected == EXPECTED_REASON[kind]
    if kind is BetKind.LATE:
        assert bad.late
        assert rules_verdict(bad, earlier) is None  # fine in itself, only too late
        assert bad.expected == "BETTING_CLOSED"
    else:
        assert rules_verdict(bad, earlier) == bad.expected


def test_a_repeat_reuses_an_earlier_bet_id_and_its_expected_answer() -> None:
    crowd = Crowd(TERMS, bettors=1, wildness=0.0, seed=4)
    earlier = [crowd._bet("c1", "bettor-0001", "tie", 500, BetKind.VALID)]
    repeat = crowd.wild_bet(BetKind.REPEAT, "c1", "bettor-0001", earlier)
    assert repeat is not None
    assert (repeat.bet_id, repeat.amount, repeat.expected) == (
        earlier[0].bet_id,
        Decimal(500),
        None,
    )
    assert crowd.wild_bet(BetKind.REPEAT, "c1", "bettor-0001", []) is None


def test_a_wild_crowd_mixes_in_every_kind_of_bad_bet() -> None:
    crowd = Crowd(TERMS, bettors=100, wildness=1.0, seed=5)
    kinds: Counter[BetKind] = Counter()
    for n in range(10):
        plan = crowd.plan_coup(f"c{n}")
        kinds.update(bet.kind for bet in plan.all_bets)
        assert all(bet.late for bet in plan.late_bets)
        assert not any(bet.late for bet in plan.open_bets)
    assert set(kinds) == {BetKind.VALID, *WILD_KINDS}


def test_wildness_and_bettors_are_checked() -> None:
    with pytest.raises(ValueError, match="wildness"):
        Crowd(TERMS, wildness=1.5)
    with pytest.raises(ValueError, match="bettors"):
        Crowd(TERMS, bettors=-1)


def test_the_same_seed_gives_the_same_bets() -> None:
    first = Crowd(TERMS, bettors=10, wildness=0.3, seed=7).plan_coup("c1")
    again = Crowd(TERMS, bettors=10, wildness=0.3, seed=7).plan_coup("c1")
    assert first == again
