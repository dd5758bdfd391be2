"""The shoe: composition, Fisher-Yates shuffle, commitment, burn and cut card."""

from __future__ import annotations

import hashlib
import math
import random
import secrets
from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.shared.rules import (
    ALL_CARDS,
    MAX_DECKS,
    MIN_DECKS,
    Card,
    burn,
    burn_count,
    commitment,
    composition,
    cut_card_index,
    encode_order,
    new_salt,
    shuffle,
    verify_commitment,
)


@pytest.mark.parametrize("decks", range(MIN_DECKS, MAX_DECKS + 1))
def test_composition_holds_each_card_once_per_deck(decks: int) -> None:
    cards = composition(decks)
    assert len(cards) == 52 * decks
    assert Counter(cards) == {card: decks for card in ALL_CARDS}


@pytest.mark.parametrize("decks", [0, 9, -1, True])
def test_composition_rejects_a_deck_count_outside_1_to_8(decks: int) -> None:
    with pytest.raises(ValueError):
        composition(decks)


@given(
    st.integers(MIN_DECKS, MAX_DECKS),
    st.binary(min_size=32, max_size=32),
    st.randoms(use_true_random=False),
    st.data(),
)
@settings(max_examples=30)
def test_a_shuffle_is_a_permutation_and_its_commitment_verifies_only_itself(
    decks: int, salt: bytes, rng: random.Random, data: st.DataObject
) -> None:
    # Every random choice comes from hypothesis (the shuffle's generator too), so a
    # failing example replays exactly; production shuffles with secrets (tested below).
    cards = composition(decks)
    order = shuffle(cards, randbelow=rng.randrange)
    assert sorted(order) == sorted(cards)
    sealed = commitment(order, salt)
    assert verify_commitment(order, salt, sealed)
    # Swap two different cards: the commitment no longer verifies.
    i = data.draw(st.integers(0, len(order) - 1))
    j = data.draw(st.integers(0, len(order) - 1).filter(lambda k: order[k] != order[i]))
    changed = list(order)
    changed[i], changed[j] = changed[j], changed[i]
    assert not verify_commitment(changed, salt, sealed)
    # Another salt does not verify either.
    other = data.draw(st.binary(min_size=32, max_size=32).filter(lambda b: b != salt))
    assert not verify_commitment(order, other, sealed)


def test_the_commitment_scheme_is_sha256_of_salt_bar_and_comma_joined_codes() -> None:
    order = [Card.parse("9H"), Card.parse("10D"), Card.parse("KS")]
    salt = bytes(range(32))
    assert encode_order(order) == b"9H,TD,KS"
    expected = hashlib.sha256(salt + b"|" + b"9H,TD,KS").hexdigest()
    assert commitment(order, salt) == expected
    assert verify_commitment(order, salt, expected.upper())
    assert not verify_commitment(order, salt, "not hex at all \u00e9")


def test_salts_are_32_fresh_bytes() -> None:
    salts = {new_salt() for _ in range(20)}
    assert len(salts) == 20
    assert all(len(salt) == 32 for salt in salts)


def test_shuffle_is_fisher_yates_over_the_given_randbelow() -> None:
    calls: list[int] = []

    def first(n: int) -> int:
        calls.append(n)
        return 0

    cards = composition(1)[:5]
    order = shuffle(cards, randbelow=first)
    assert calls == [5, 4, 3, 2]
    # Swapping i with 0 for i = 4..1 rotates: [c1, c2, c3, c4, c0]
    assert order == [cards[1], cards[2], cards[3], cards[4], cards[0]]
    assert shuffle(cards, randbelow=lambda n: n - 1) == cards
    assert cards == composition(1)[:5]  # the input is not changed


def test_the_default_shuffle_uses_secrets() -> None:
    assert shuffle.__defaults__ == (secrets.randbelow,)


def chi_square_p_value(statistic: float, degrees: int) -> float:
    """P(X >= statistic) for X chi-square with ``degrees`` degrees of freedom."""
    a, x = degrees / 2, statistic / 2
    if x <= 0:
        return 1.0
    # Regularised lower incomplete gamma by its series, then the complement.
    term = total = 1 / a
    n = 0
    while term > total * 1e-17:
        n += 1
        term *= x / (a + n)
        total += term
    lower = total * math.exp(-x + a * math.log(x) - math.lgamma(a))
    return max(0.0, 1 - lower)


def position_counts(randbelow: Callable[[int], int], size: int, shuffles: int) -> list[list[int]]:
    cards = list(ALL_CARDS[:size])
    index = {card: i for i, card in enumerate(cards)}
    counts = [[0] * size for _ in range(size)]
    for _ in range(shuffles):
        for position, card in enumerate(shuffle(cards, randbelow=randbelow)):
            counts[index[card]][position] += 1
    return counts


def uniformity_p_value(counts: list[list[int]], shuffles: int) -> float:
    size = len(counts)
    expected = shuffles / size
    statistic = sum((cell - expected) ** 2 / expected for row in counts for cell in row)
    return chi_square_p_value(statistic, (size - 1) ** 2)


SIZE, SHUFFLES, ALPHA = 8, 16_000, 1e-6
SEED = 20261201
"""A fixed seed: the statistical tests of the algorithm give the same verdict on every run."""
CSPRNG_ALPHA = 1e-9
"""The production generator's check fails a fair shuffle once in 10^9 runs (it cannot be seeded)."""


def test_the_shuffle_puts_every_card_at_every_position_uniformly() -> None:
    # 8 distinct cards, 16 000 shuffles: 2 000 expected per (card, position) cell. The
    # generator is seeded, so this verdict on the algorithm is the same on every run.
    counts = position_counts(random.Random(SEED).randrange, SIZE, SHUFFLES)
    assert uniformity_p_value(counts, SHUFFLES) > ALPHA


def test_the_production_generator_shuffles_uniformly() -> None:
    # The same check with the CSPRNG production uses; it cannot be seeded, so its
    # threshold is set for a false failure once in 10^9 runs.
    counts = position_counts(secrets.randbelow, SIZE, SHUFFLES)
    assert uniformity_p_value(counts, SHUFFLES) > CSPRNG_ALPHA


def test_the_uniformity_test_catches_a_biased_generator() -> None:
    # Modulo bias: 16 outcomes folded onto n favour the small numbers when n does not divide 16.
    rng = random.Random(SEED)

    def biased(n: int) -> int:
        return rng.randrange(16) % n

    shuffles = SHUFFLES // 4  # the bias is gross: a quarter of the budget finds it
    counts = position_counts(biased, SIZE, shuffles)
    assert uniformity_p_value(counts, shuffles) < CSPRNG_ALPHA


def test_chi_square_p_value_matches_known_quantiles() -> None:
    assert chi_square_p_value(3.841, 1) == pytest.approx(0.05, abs=1e-4)
    assert chi_square_p_value(18.307, 10) == pytest.approx(0.05, abs=1e-4)
    assert chi_square_p_value(49.0, 49) == pytest.approx(0.4734, abs=1e-3)


@pytest.mark.parametrize(
    ("code", "burned"),
    [("AH", 1), ("2C", 2), ("9D", 9), ("TS", 10), ("JH", 10), ("QC", 10), ("KD", 10)],
)
def test_the_shown_card_burns_its_value_and_a_zero_burns_ten(code: str, burned: int) -> None:
    assert burn_count(Card.parse(code)) == burned


def test_the_burn_shows_the_first_card_and_burns_that_many_after_it() -> None:
    order = [Card.parse(code) for code in ["3H", "KC", "QD", "JS", "9H", "2C"]]
    done = burn(order)
    assert done.shown == order[0]
    assert done.burned == tuple(order[1:4])
    assert done.next_position == 4
    ten = [Card.parse("KS"), *composition(1)[:12]]
    assert burn(ten).next_position == 11
    with pytest.raises(ValueError):
        burn(ten[:5])


def test_the_cut_card_index_counts_from_the_end() -> None:
    assert cut_card_index(312, 16) == 296
    assert cut_card_index(416, 0) == 416
    with pytest.raises(ValueError):
        cut_card_index(312, 313)
    with pytest.raises(ValueError):
        cut_card_index(312, -1)
