"""The tableau: every cell of the drawing rules, and coups resolved from any cards."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.shared.rules import (
    ALL_CARDS,
    Card,
    NotEnoughCards,
    Outcome,
    Side,
    banker_draws,
    hand_total,
    next_side,
    player_draws,
    resolve_coup,
)

# The Banker's table of rules.md when the Player drew, written out independently:
# one string per Banker total, one character per value v (0..9) of the Player's
# third card: D = Banker draws, S = Banker stands.
#                       v = 0123456789
BANKER_WHEN_PLAYER_DREW = {
    0: "DDDDDDDDDD",
    1: "DDDDDDDDDD",
    2: "DDDDDDDDDD",
    3: "DDDDDDDDSD",  # stands only on 8
    4: "SSDDDDDDSS",  # draws on 2..7
    5: "SSSSDDDDSS",  # draws on 4..7
    6: "SSSSSSDDSS",  # draws on 6, 7
    7: "SSSSSSSSSS",
}
# rules.md: if the Player stood, the Banker draws on 0-5 and stands on 6-7.
BANKER_WHEN_PLAYER_STOOD = "DDDDDDSS"
# rules.md: the Player draws on 0-5 and stands on 6-7.
PLAYER_RULE = "DDDDDDSS"

# A card of each value, chosen to avoid accidental pairs where it matters little.
CARD_OF_VALUE = {0: "K", 1: "A", 2: "2", 3: "3", 4: "4", 5: "5", 6: "6", 7: "7", 8: "8", 9: "9"}


def expected_banker_draws(banker_total: int, third: int | None) -> bool:
    if banker_total >= 8:
        return False
    if third is None:
        return BANKER_WHEN_PLAYER_STOOD[banker_total] == "D"
    return BANKER_WHEN_PLAYER_DREW[banker_total][third] == "D"


def hand_of(total: int, suit: str) -> list[Card]:
    """Two cards totalling ``total``: the value itself (T for 0) and a king."""
    first = CARD_OF_VALUE[total] if total else "T"
    return [Card(first, suit), Card("K", suit)]


@pytest.mark.parametrize("player_total", range(10))
def test_every_cell_of_the_tableau(player_total: int) -> None:
    """Player total (this row) x Banker total x Player third card value or none."""
    for banker_total, third in itertools.product(range(10), [None, *range(10)]):
        check_cell(player_total, banker_total, third)


def check_cell(player_total: int, banker_total: int, third: int | None) -> None:
    cell = f"Player {player_total}, Banker {banker_total}, Player third {third}"
    natural = player_total >= 8 or banker_total >= 8
    # The rule functions, for every cell.
    if player_total <= 7:
        assert player_draws(player_total) is (PLAYER_RULE[player_total] == "D"), cell
    assert banker_draws(banker_total, third) is expected_banker_draws(banker_total, third), cell

    # The same cell dealt from a shoe, where the cell can occur.
    player_drew = not natural and player_total <= 5
    if player_drew != (third is not None):
        return  # the two-card totals decide whether the Player has a third card
    shoe = [*hand_of(player_total, "C"), *hand_of(banker_total, "D")]
    shoe = [shoe[0], shoe[2], shoe[1], shoe[3]]  # dealt P, B, P, B
    if third is not None:
        shoe.append(Card(CARD_OF_VALUE[third], "H"))
    shoe += [Card("9", "S"), Card("9", "S")]
    coup = resolve_coup(shoe)
    banker_drew = not natural and expected_banker_draws(banker_total, third)
    assert coup.natural is natural, cell
    assert len(coup.player) == 2 + player_drew, cell
    assert len(coup.banker) == 2 + banker_drew, cell
    assert coup.cards_used == 4 + player_drew + banker_drew, cell


def test_a_coup_from_the_issue() -> None:
    coup = resolve_coup([Card.parse(code) for code in ["9H", "2C", "KD", "5S", "3H"]])
    assert [c.code for c in coup.player] == ["9H", "KD"]
    assert [c.code for c in coup.banker] == ["2C", "5S"]
    assert (coup.player_total, coup.banker_total) == (9, 7)
    assert coup.outcome is Outcome.PLAYER
    assert coup.natural
    assert coup.cards_used == 4


def test_banker_three_stands_on_a_player_eight() -> None:
    # Player 2+3 = 5 draws an 8 -> 3; Banker 1+2 = 3 stands on an 8.
    coup = resolve_coup([Card.parse(c) for c in ["2C", "AD", "3H", "2S", "8D", "9C"]])
    assert [c.code for c in coup.player] == ["2C", "3H", "8D"]
    assert len(coup.banker) == 2
    assert coup.outcome is Outcome.TIE
    assert coup.cards_used == 5


def test_pairs_need_the_same_rank_not_the_same_value() -> None:
    coup = resolve_coup([Card.parse(c) for c in ["KC", "QD", "KH", "QS", "9C", "9D"]])
    assert coup.player_pair  # K-K
    assert coup.banker_pair  # Q-Q
    coup = resolve_coup([Card.parse(c) for c in ["KC", "QD", "QH", "KS", "9C", "9D"]])
    assert not coup.player_pair  # K-Q counts 0 each but is no pair
    assert not coup.banker_pair


cards_strategy = st.lists(st.sampled_from(ALL_CARDS), min_size=6, max_size=9)


@given(cards_strategy)
def test_any_long_enough_sequence_gives_a_coup_that_obeys_the_rules(cards: list[Card]) -> None:
    coup = resolve_coup(cards)
    assert 4 <= coup.cards_used <= 6
    player2, banker2 = hand_total(cards[0:3:2]), hand_total(cards[1:4:2])
    natural = player2 >= 8 or banker2 >= 8
    player_drew = not natural and player2 <= 5
    third = cards[4].value if player_drew else None
    banker_drew = not natural and expected_banker_draws(banker2, third)
    assert coup.natural is natural
    assert coup.player == tuple([cards[0], cards[2]] + ([cards[4]] if player_drew else []))
    banker_third = [cards[4 + player_drew]] if banker_drew else []
    assert coup.banker == tuple([cards[1], cards[3], *banker_third])
    assert coup.cards_used == 4 + player_drew + banker_drew
    assert coup.player_total == hand_total(coup.player)
    assert coup.banker_total == hand_total(coup.banker)
    if coup.player_total > coup.banker_total:
        assert coup.outcome is Outcome.PLAYER
    elif coup.player_total < coup.banker_total:
        assert coup.outcome is Outcome.BANKER
    else:
        assert coup.outcome is Outcome.TIE
    assert coup.player_pair is (cards[0].rank == cards[2].rank)
    assert coup.banker_pair is (cards[1].rank == cards[3].rank)
    # The dealing order: the first cards of the shoe, to P, B, P, B then the third cards.
    assert [card for _, card in coup.sequence] == cards[: coup.cards_used]
    assert [side for side, _ in coup.sequence][:4] == [Side.PLAYER, Side.BANKER] * 2


@given(cards_strategy)
@settings(max_examples=50)
def test_next_side_deals_the_same_coup_card_by_card(cards: list[Card]) -> None:
    coup = resolve_coup(cards)
    player: list[Card] = []
    banker: list[Card] = []
    for card in cards:
        side = next_side(player, banker)
        if side is None:
            break
        (player if side is Side.PLAYER else banker).append(card)
    assert next_side(player, banker) is None
    assert tuple(player) == coup.player
    assert tuple(banker) == coup.banker


@given(cards_strategy)
@settings(max_examples=50)
def test_too_few_cards_says_how_many_more_the_coup_needs(cards: list[Card]) -> None:
    used = resolve_coup(cards).cards_used
    for have in range(used):
        with pytest.raises(NotEnoughCards) as caught:
            resolve_coup(cards[:have])
        needed = caught.value.needed
        assert needed >= 1
        assert have + needed <= used
        if caught.value.exact:
            assert have + needed == used
        assert str(needed) in str(caught.value)


def test_next_side_rejects_hands_no_coup_can_produce() -> None:
    seven = Card("7", "C")
    with pytest.raises(ValueError):
        next_side([seven], [seven, seven])
    three = Card("3", "D")
    with pytest.raises(ValueError):
        next_side([three, three, three], [seven, seven])  # a 6 stands: no third card


def test_rule_functions_reject_impossible_totals() -> None:
    with pytest.raises(ValueError):
        player_draws(10)
    with pytest.raises(ValueError):
        banker_draws(-1, None)
    with pytest.raises(ValueError):
        banker_draws(3, 10)
