"""Paytables and the settlement of one bet, in integer minor units."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.shared.rules import (
    PAYTABLES,
    BetResult,
    BetType,
    Outcome,
    Paytable,
    Rounding,
    UnknownPaytable,
    get_paytable,
    round_amount,
    settle_bet,
)

# rules.md: net win per unit staked.
TIE_PAYS = {"standard": 8, "tie-9-to-1": 9}


@dataclass(frozen=True)
class FakeCoup:
    outcome: str
    player_pair: bool = False
    banker_pair: bool = False


def test_the_two_named_paytables_follow_the_rules() -> None:
    assert set(PAYTABLES) == {"standard", "tie-9-to-1"}
    for name, tie in TIE_PAYS.items():
        table = get_paytable(name)
        assert table.odds == {
            BetType.PLAYER: 1,
            BetType.BANKER: Fraction(19, 20),
            BetType.TIE: tie,
            BetType.PLAYER_PAIR: 11,
            BetType.BANKER_PAIR: 11,
        }
        assert table.rounding is Rounding.DOWN


def test_paytables_are_values() -> None:
    table = get_paytable("standard")
    copy = Paytable("standard", dict(table.odds))
    assert copy == table
    assert hash(copy) == hash(table)
    assert copy != get_paytable("tie-9-to-1")


def test_an_unknown_paytable_is_named_with_the_known_ones() -> None:
    with pytest.raises(UnknownPaytable) as caught:
        get_paytable("tie-10-to-1")
    assert "tie-10-to-1" in str(caught.value)
    assert "standard" in str(caught.value)
    assert isinstance(caught.value, KeyError)
    assert isinstance(caught.value, ValueError)


def test_a_paytable_needs_odds_for_every_bet() -> None:
    with pytest.raises(ValueError):
        Paytable("partial", {BetType.PLAYER: Fraction(1)})


@pytest.mark.parametrize(
    ("stake", "down", "half_up", "up"),
    [(100, 95, 95, 95), (10, 9, 10, 10), (1, 0, 1, 1), (19, 18, 18, 19), (30, 28, 29, 29)],
)
def test_a_banker_win_pays_19_20_rounded_by_the_rule(
    stake: int, down: int, half_up: int, up: int
) -> None:
    amount = stake * Fraction(19, 20)
    assert round_amount(amount, Rounding.DOWN) == down
    assert round_amount(amount, Rounding.HALF_UP) == half_up
    assert round_amount(amount, Rounding.UP) == up


def test_settlement_examples_for_a_stake_of_100() -> None:
    table = get_paytable("standard")
    banker_win = FakeCoup("BANKER")
    assert settle_bet(BetType.BANKER, 100, banker_win, table).net == 95
    assert settle_bet(BetType.PLAYER, 100, banker_win, table).net == -100
    tie = FakeCoup("TIE")
    assert settle_bet(BetType.PLAYER, 100, tie, table).result is BetResult.PUSH
    assert settle_bet(BetType.BANKER, 100, tie, table).net == 0
    assert settle_bet(BetType.TIE, 100, tie, table).net == 800
    assert settle_bet(BetType.TIE, 100, tie, get_paytable("tie-9-to-1")).net == 900
    assert settle_bet(BetType.PLAYER_PAIR, 100, FakeCoup("PLAYER", True), table).net == 1100


@pytest.mark.parametrize("stake", [0, -5, True])
def test_a_stake_must_be_a_positive_whole_number(stake: int) -> None:
    with pytest.raises(ValueError):
        settle_bet(BetType.PLAYER, stake, FakeCoup("PLAYER"), get_paytable("standard"))


coups = st.builds(
    FakeCoup, st.sampled_from([o.value for o in Outcome]), st.booleans(), st.booleans()
)
stakes = st.integers(1, 10**12)


@given(st.sampled_from(list(BetType)), stakes, coups, st.sampled_from(list(PAYTABLES)))
def test_a_settlement_matches_the_paytable(
    bet: BetType, stake: int, coup: FakeCoup, name: str
) -> None:
    settled = settle_bet(bet, stake, coup, get_paytable(name))
    assert settled.stake == stake
    if bet in (BetType.PLAYER, BetType.BANKER):
        if coup.outcome == "TIE":
            expected = BetResult.PUSH
        else:
            expected = BetResult.WIN if coup.outcome == bet.value.upper() else BetResult.LOSE
    elif bet is BetType.TIE:
        expected = BetResult.WIN if coup.outcome == "TIE" else BetResult.LOSE
    else:
        won = coup.player_pair if bet is BetType.PLAYER_PAIR else coup.banker_pair
        expected = BetResult.WIN if won else BetResult.LOSE
    assert settled.result is expected
    win = {
        BetType.PLAYER: stake,
        BetType.BANKER: stake * 19 // 20,  # rounded down
        BetType.TIE: stake * TIE_PAYS[name],
        BetType.PLAYER_PAIR: stake * 11,
        BetType.BANKER_PAIR: stake * 11,
    }[bet]
    if expected is BetResult.WIN:
        assert (settled.payout, settled.returned, settled.net) == (win, stake + win, win)
    elif expected is BetResult.PUSH:
        assert (settled.payout, settled.returned, settled.net) == (0, stake, 0)
    else:
        assert (settled.payout, settled.returned, settled.net) == (0, 0, -stake)


@given(
    st.lists(st.tuples(st.sampled_from(list(BetType)), stakes), max_size=10),
    coups,
    st.sampled_from(list(PAYTABLES)),
)
def test_money_is_conserved_in_a_coup(
    bets: list[tuple[BetType, int]], coup: FakeCoup, name: str
) -> None:
    table = get_paytable(name)
    settled = [settle_bet(bet, stake, coup, table) for bet, stake in bets]
    staked = sum(stake for _, stake in bets)
    returned = sum(s.returned for s in settled)
    house_result = staked - returned
    assert sum(s.net for s in settled) + house_result == 0
    assert all(s.returned == s.stake + s.payout or s.result is BetResult.LOSE for s in settled)
    assert all(s.payout >= 0 and s.returned >= 0 for s in settled)


@given(stakes, st.sampled_from(list(Rounding)))
def test_rounding_stays_within_one_minor_unit(stake: int, rounding: Rounding) -> None:
    exact = stake * Fraction(19, 20)
    rounded = round_amount(exact, rounding)
    assert abs(rounded - exact) < 1
    if rounding is Rounding.DOWN:
        assert rounded <= exact
    if rounding is Rounding.UP:
        assert rounded >= exact
