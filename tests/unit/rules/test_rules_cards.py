"""Cards: parsing, values and hand totals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.shared.rules import ALL_CARDS, RANKS, SUITS, Card, CardParseError, hand_total

# Written from rules.md: Ace = 1, 2 to 9 face value, 10/J/Q/K = 0.
EXPECTED_VALUES = {
    "A": 1, "2": 2, "3": 3, "4": 4, "5": 5, "6": 6, "7": 7, "8": 8, "9": 9,
    "T": 0, "J": 0, "Q": 0, "K": 0,
}  # fmt: skip


@pytest.mark.parametrize("rank", RANKS)
def test_each_rank_has_its_baccarat_value_in_every_suit(rank: str) -> None:
    for suit in SUITS:
        assert Card(rank, suit).value == EXPECTED_VALUES[rank]


@pytest.mark.parametrize(
    ("token", "expected"),
    [("9H", Card("9", "H")), ("TD", Card("T", "D")), ("10D", Card("T", "D")),
     ("th", Card("T", "H")), ("ks", Card("K", "S")), (" aC ", Card("A", "C"))],
)  # fmt: skip
def test_parse_accepts_codes_ten_as_10_and_lower_case(token: str, expected: Card) -> None:
    assert Card.parse(token) == expected


@pytest.mark.parametrize("token", ["", "H", "1H", "11H", "9X", "ZZ", "9", "9HH", "0S", "10"])
def test_parse_rejects_a_bad_token_and_names_it(token: str) -> None:
    with pytest.raises(CardParseError) as caught:
        Card.parse(token)
    assert repr(token) in str(caught.value)
    assert caught.value.token == token


def test_card_code_and_str_are_rank_then_suit() -> None:
    card = Card("T", "S")
    assert card.code == "TS"
    assert str(card) == "TS"


def test_a_card_with_an_unknown_rank_or_suit_cannot_be_built() -> None:
    with pytest.raises(ValueError):
        Card("1", "H")
    with pytest.raises(ValueError):
        Card("A", "X")


def test_a_deck_has_52_distinct_cards() -> None:
    assert len(set(ALL_CARDS)) == 52


@given(st.lists(st.sampled_from(ALL_CARDS), max_size=8))
def test_hand_total_is_the_sum_of_values_modulo_10(cards: list[Card]) -> None:
    assert hand_total(cards) == sum(EXPECTED_VALUES[card.rank] for card in cards) % 10


@given(st.sampled_from(ALL_CARDS))
def test_parse_reads_back_every_card_code(card: Card) -> None:
    assert Card.parse(card.code) == card
    assert Card.parse(card.code.lower()) == card


def test_totals_from_the_rules() -> None:
    assert hand_total([Card.parse("6H"), Card.parse("7S")]) == 3
    assert hand_total([Card.parse("4H"), Card.parse("6S")]) == 0
