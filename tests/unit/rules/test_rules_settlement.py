"""Paytables and the settlement of one bet, in integer minor units, against an oracle
(``tests.payout_oracle``: written apart from the engine, from the cards alone)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from services.shared.rules import (
    ALL_CARDS,
    CASES,
    MAX_RETURN,
    PAYTABLES,
    BetResult,
    BetType,
    Card,
    Paytable,
    Rounding,
    UnknownPaytable,
    bet_case,
    get_paytable,
    parse_cards,
    resolve_coup,
    round_amount,
    settle_bet,
)
from tests.payout_oracle import OFFERED, oracle_payout


# -- paytables ------------------------------------------------------------------------------
def test_the_four_paytables_offer_their_bet_types() -> None:
    assert {name: [bet.value for bet in table.offered] for name, table in PAYTABLES.items()} == {
        name: [bet.value for bet in BetType if bet.value in offered]
        for name, offered in OFFERED.items()
    }
    assert all(table.rounding is Rounding.DOWN for table in PAYTABLES.values())
    assert MAX_RETURN == 251  # a Perfect Pair on both hands


def test_the_banker_bet_of_each_paytable_in_words() -> None:
    words = {name: table.describe(BetType.BANKER) for name, table in PAYTABLES.items()}
    assert words == {
        "standard": "19 to 20",
        "tie-9-to-1": "19 to 20",
        "no-commission": "1 to 1, win on a 6 1 to 2",
        "ez-baccarat": "1 to 1, win on a three-card 7 push",
    }
    assert get_paytable("standard").describe(BetType.BIG) == "0.54 to 1"


def test_paytables_are_values() -> None:
    table = get_paytable("standard")
    copy = Paytable("standard", {bet: dict(pays) for bet, pays in table.pays.items()})
    assert copy == table
    assert hash(copy) == hash(table)
    assert copy != get_paytable("tie-9-to-1")


def test_an_unknown_paytable_is_named_with_the_known_ones() -> None:
    with pytest.raises(UnknownPaytable) as caught:
        get_paytable("tie-10-to-1")
    assert "tie-10-to-1" in str(caught.value)
    assert "ez-baccarat" in str(caught.value)
    assert isinstance(caught.value, KeyError)
    assert isinstance(caught.value, ValueError)


def test_a_paytable_needs_odds_for_exactly_the_cases_of_each_bet() -> None:
    with pytest.raises(ValueError, match="six"):
        Paytable("partial", {BetType.BANKER: {"win": Fraction(1), "tie": Fraction(0)}})
    with pytest.raises(ValueError, match="one above 0"):
        Paytable("nothing", {BetType.SMALL: {"win": Fraction(0)}})
    with pytest.raises(ValueError, match="offers no bet type"):
        Paytable("empty", {})
    assert set(CASES) == set(BetType)


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


# -- settling -------------------------------------------------------------------------------
def coup(*codes: str) -> list[str]:
    return list(codes)


# Cards in shoe order (P, B, P, B, third cards) and what 100 on each bet nets.
EXAMPLES = [
    # Player 5+T=5 draws A -> 6; Banker 4+2=6 stands on an A: a tie on 6 with five cards.
    (coup("5C", "4D", "TH", "2S", "AC"), "no-commission", {"banker": 0, "tie": 800, "big": 54}),
    # Banker 3+3=6 stands, Player 2+3=5 draws 4 -> 9: Player wins by 3 without a natural.
    (coup("2C", "3D", "3H", "3S", "4C"), "standard", {"dragon_bonus_player": -100}),
    # Player 2+3=5 draws K -> 5, Banker T+K=0 draws 6: Banker wins on a 6, half on NC.
    (coup("2C", "TD", "3H", "KS", "KC", "6C"), "no-commission", {"banker": 50, "super_6": 1200}),
    # Player 2+4=6 stands; Banker 5 draws 2 -> 7 with three cards: EZ pushes, Dragon 7 pays.
    (coup("2C", "AD", "4H", "4S", "2C"), "ez-baccarat", {"banker": 0, "dragon_7": 4000}),
    # Player 3+2=5 draws 3 -> 8 (three cards), Banker 2+5=7 stands: Panda 8.
    (coup("3C", "2D", "2H", "5S", "3H"), "ez-baccarat", {"panda_8": 2500, "player": 100}),
    # Both hands identical pairs (9C 9C / 5H 5H): Player 18 -> 8 natural, Banker 10 -> 0.
    (
        coup("9C", "5H", "9C", "5H"),
        "standard",
        {"perfect_pair": 25000, "either_pair": 500, "dragon_bonus_player": 100, "small": 150},
    ),
    # Natural tie 9-9: Dragon Bonus pushes on both sides.
    (coup("9C", "9D", "KH", "KS"), "standard", {"dragon_bonus_banker": 0, "player_pair": -100}),
    # Player A+T=1 draws K -> 1, Banker T+K=0 draws 9 -> 9: Banker by 8 (10 to 1).
    (coup("AC", "TD", "TH", "KS", "KC", "9D"), "standard", {"dragon_bonus_banker": 1000}),
]


@pytest.mark.parametrize(("cards", "paytable", "nets"), EXAMPLES)
def test_worked_examples_for_a_stake_of_100(
    cards: list[str], paytable: str, nets: dict[str, int]
) -> None:
    result = resolve_coup(parse_cards(cards))
    for bet, net in nets.items():
        assert settle_bet(BetType(bet), 100, result, get_paytable(paytable)).net == net, bet


@pytest.mark.parametrize("stake", [0, -5, True])
def test_a_stake_must_be_a_positive_whole_number(stake: int) -> None:
    result = resolve_coup(parse_cards(["9H", "2C", "KD", "5S"]))
    with pytest.raises(ValueError):
        settle_bet(BetType.PLAYER, stake, result, get_paytable("standard"))


def test_a_bet_type_the_paytable_does_not_offer_cannot_be_settled() -> None:
    result = resolve_coup(parse_cards(["9H", "2C", "KD", "5S"]))
    with pytest.raises(KeyError):
        settle_bet(BetType.DRAGON_7, 100, result, get_paytable("standard"))


cards = st.lists(st.sampled_from(ALL_CARDS).map(lambda card: card.code), min_size=6, max_size=6)
stakes = st.integers(1, 10**12)
offered_bets = st.sampled_from(list(PAYTABLES)).flatmap(
    lambda name: st.tuples(st.just(name), st.sampled_from(OFFERED[name]))
)


@settings(max_examples=3000)
@given(cards, offered_bets, stakes)
@example(["4C", "KD", "4C", "KD", "9H", "9S"], ("standard", "perfect_pair"), 7)  # both perfect
@example(["AC", "TD", "TH", "KS", "KC", "9D"], ("standard", "dragon_bonus_banker"), 3)  # by 8
@example(["3C", "2D", "2H", "5S", "3H", "TC"], ("ez-baccarat", "panda_8"), 1)
@example(["2C", "AD", "4H", "4S", "2C", "TC"], ("ez-baccarat", "banker"), 33)  # push on 3-card 7
@example(["2C", "TD", "3H", "KS", "KC", "6C"], ("no-commission", "banker"), 99)  # 1 to 2, down
@example(["2C", "TD", "3H", "KS", "KC", "6C"], ("standard", "big"), 99)  # 0.54 to 1, down
def test_every_bet_pays_what_the_oracle_computes_from_the_cards(
    shoe: list[str], bet: tuple[str, str], stake: int
) -> None:
    paytable, bet_type = bet
    settled = settle_bet(
        BetType(bet_type), stake, resolve_coup(parse_cards(shoe)), PAYTABLES[paytable]
    )
    result, payout = oracle_payout(bet_type, stake, shoe, paytable)
    assert (settled.result.value, settled.payout) == (result, payout)
    assert settled.returned == (0 if result == "LOSE" else stake + payout)


@given(cards, st.sampled_from(list(BetType)))
def test_a_case_is_one_of_the_bet_types_cases(shoe: list[str], bet: BetType) -> None:
    case = bet_case(bet, resolve_coup([Card.parse(code) for code in shoe]))
    assert case is None or case in CASES[bet]


@given(
    st.sampled_from(list(PAYTABLES)).flatmap(
        lambda name: st.tuples(
            st.just(name), st.lists(st.tuples(st.sampled_from(OFFERED[name]), stakes), max_size=10)
        )
    ),
    cards,
)
def test_money_is_conserved_in_a_coup(
    bets: tuple[str, list[tuple[str, int]]], shoe: list[str]
) -> None:
    name, placed = bets
    table, result = get_paytable(name), resolve_coup(parse_cards(shoe))
    settled = [settle_bet(BetType(bet), stake, result, table) for bet, stake in placed]
    staked = sum(stake for _, stake in placed)
    house_result = staked - sum(s.returned for s in settled)
    assert sum(s.net for s in settled) + house_result == 0
    assert all(s.returned == s.stake + s.payout or s.result is BetResult.LOSE for s in settled)
    assert all(0 <= s.returned <= MAX_RETURN * s.stake for s in settled)


@given(stakes, st.sampled_from(list(Rounding)))
def test_rounding_stays_within_one_minor_unit(stake: int, rounding: Rounding) -> None:
    exact = stake * Fraction(19, 20)
    rounded = round_amount(exact, rounding)
    assert abs(rounded - exact) < 1
    if rounding is Rounding.DOWN:
        assert rounded <= exact
    if rounding is Rounding.UP:
        assert rounded >= exact
