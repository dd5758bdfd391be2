"""Exact odds: published figures, exact pair probabilities, and a brute-force cross-check."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.shared.rules import (
    RANKS,
    BetType,
    Card,
    InvalidCounts,
    NotEnoughCards,
    exact_odds,
    full_shoe_odds,
    get_paytable,
    resolve_coup,
)

STANDARD = get_paytable("standard")
TIE_9 = get_paytable("tie-9-to-1")


@pytest.fixture(scope="module")
def eight_decks() -> dict[str, Fraction]:
    return dict(full_shoe_odds(8, STANDARD).probabilities)


def test_eight_decks_match_the_published_probabilities(eight_decks: dict[str, Fraction]) -> None:
    assert round(float(eight_decks["banker"]), 6) == 0.458597
    assert round(float(eight_decks["player"]), 6) == 0.446247
    assert round(float(eight_decks["tie"]), 6) == 0.095156


def test_six_decks_match_the_published_probabilities() -> None:
    odds = full_shoe_odds(6, STANDARD).probabilities
    assert round(float(odds["banker"]), 6) == 0.458653
    assert round(float(odds["player"]), 6) == 0.446279
    assert round(float(odds["tie"]), 6) == 0.095069


def test_eight_decks_match_the_published_house_edges() -> None:
    standard = full_shoe_odds(8, STANDARD).house_edge
    assert round(float(standard[BetType.BANKER]), 4) == 0.0106
    assert round(float(standard[BetType.PLAYER]), 4) == 0.0124
    assert round(float(standard[BetType.TIE]), 4) == 0.1436
    assert round(float(standard[BetType.PLAYER_PAIR]), 4) == 0.1036
    assert round(float(standard[BetType.BANKER_PAIR]), 4) == 0.1036
    assert round(float(full_shoe_odds(8, TIE_9).house_edge[BetType.TIE]), 4) == 0.0484


@pytest.mark.parametrize("decks", range(1, 9))
def test_a_full_shoe_is_exact(decks: int) -> None:
    odds = full_shoe_odds(decks, STANDARD)
    p = odds.probabilities
    assert p["player"] + p["banker"] + p["tie"] == 1
    assert p["player_pair"] == p["banker_pair"] == Fraction(4 * decks - 1, 52 * decks - 1)
    for bet in BetType:
        assert odds.house_edge[bet] + odds.return_to_player[bet] == 1


def test_house_edges_follow_from_the_probabilities(eight_decks: dict[str, Fraction]) -> None:
    p = eight_decks
    edge = full_shoe_odds(8, STANDARD).house_edge
    assert edge[BetType.PLAYER] == p["banker"] - p["player"]
    assert edge[BetType.BANKER] == p["player"] - Fraction(19, 20) * p["banker"]
    assert edge[BetType.TIE] == 1 - 9 * p["tie"]
    assert edge[BetType.PLAYER_PAIR] == 1 - 12 * p["player_pair"]


def brute_force(rank_counts: Sequence[int]) -> dict[str, Fraction]:
    """Deal the shoe card by card, by rank, until resolve_coup can settle; sum the chances.

    ``ways[key][k]`` counts the ordered k-card deals with that result; each has
    probability 1 / (N (N-1) ... (N-k+1)).
    """
    cards = [Card(rank, "S") for rank in RANKS]
    total = sum(rank_counts)
    counts = list(rank_counts)
    keys = ("player", "banker", "tie", "player_pair", "banker_pair")
    ways = {key: [0] * 7 for key in keys}

    def deal(drawn: list[Card], paths: int) -> None:
        if len(drawn) >= 4:
            try:
                coup = resolve_coup(drawn)
            except NotEnoughCards:
                pass
            else:
                used = len(drawn)
                ways[coup.outcome.value.lower()][used] += paths
                ways["player_pair"][used] += paths * coup.player_pair
                ways["banker_pair"][used] += paths * coup.banker_pair
                return
        for index, count in enumerate(counts):
            if count:
                counts[index] -= 1
                drawn.append(cards[index])
                deal(drawn, paths * count)
                drawn.pop()
                counts[index] += 1

    deal([], 1)
    falling = [1]
    for k in range(6):
        falling.append(falling[-1] * (total - k))
    return {
        key: sum((Fraction(ways[key][k], falling[k]) for k in range(4, 7)), Fraction(0))
        for key in keys
    }


small_shoes = (
    st.dictionaries(st.integers(0, 12), st.integers(1, 5), min_size=1, max_size=5)
    .map(lambda chosen: [chosen.get(rank, 0) for rank in range(13)])
    .filter(lambda counts: sum(counts) >= 6)
)


@given(small_shoes)
@settings(max_examples=12, deadline=None)
def test_exact_odds_agree_with_brute_force_on_small_shoes(counts: list[int]) -> None:
    odds = exact_odds(counts, STANDARD)
    assert dict(odds.probabilities) == brute_force(counts)


def test_exact_odds_agree_with_brute_force_on_a_shoe_with_every_value() -> None:
    # One card of each value: every branch of the tableau can occur.
    counts = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0]
    assert dict(exact_odds(counts, STANDARD).probabilities) == brute_force(counts)


remaining_shoes = st.lists(st.integers(0, 32), min_size=13, max_size=13).filter(
    lambda counts: sum(counts) >= 6
)


@given(remaining_shoes)
@settings(max_examples=15, deadline=None)
def test_any_remaining_shoe_gives_probabilities_that_sum_to_one(counts: list[int]) -> None:
    odds = exact_odds(counts, STANDARD)
    p = odds.probabilities
    assert p["player"] + p["banker"] + p["tie"] == 1
    assert all(0 <= value <= 1 for value in p.values())
    # Counts by value (10 numbers) give the same main figures, and no pair figures.
    values = [sum(counts[9:]), *counts[:9]]
    by_value = exact_odds(values, STANDARD)
    assert {key: by_value.probabilities[key] for key in ("player", "banker", "tie")} == {
        key: p[key] for key in ("player", "banker", "tie")
    }
    assert not by_value.pairs_known
    assert set(by_value.house_edge) == {BetType.PLAYER, BetType.BANKER, BetType.TIE}


@pytest.mark.parametrize(
    ("counts", "message"),
    [
        ([4] * 12, "got 12"),
        ([4] * 12 + [-1], "negative"),
        ([0] * 12 + [5], "at least 6"),
        ([4] * 12 + [True], "whole number"),
    ],
)
def test_bad_counts_are_rejected_with_a_reason(counts: list[int], message: str) -> None:
    with pytest.raises(InvalidCounts, match=message):
        exact_odds(counts, STANDARD)


@pytest.mark.parametrize("decks", [0, 9])
def test_a_full_shoe_needs_1_to_8_decks(decks: int) -> None:
    with pytest.raises(ValueError):
        full_shoe_odds(decks, STANDARD)
