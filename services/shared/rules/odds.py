"""Exact odds of every bet for a full shoe or any remaining shoe, by full enumeration.

Method
    Cards are drawn without replacement from a finite shoe given as counts
    (13 per rank A..K, or 10 per baccarat value 0..9). Every coup is
    enumerated by card VALUE with integer weights: the number of ordered ways
    a value sequence can leave the shoe is the product of the counts still
    available at each draw. The four initial cards are enumerated as an
    unordered Player pair and an unordered Banker pair (55 x 55 states, each
    with its multiplicity); then, for each Player third card, the Banker's
    third card is summed out in O(1) with prefix sums over the Banker's final
    totals (minus the one card the Player just took). Weights of coups of 4, 5
    and 6 cards are brought to the common denominator N(N-1)...(N-5), so
    every probability is an exact ``Fraction``. Nothing is simulated.

Pairs
    A side's pair depends only on two fixed positions of the shoe (1st and
    3rd for the Player, 2nd and 4th for the Banker). Draws without replacement
    are exchangeable, so any two positions have the joint law of the first
    two: P(pair) = sum_r n_r (n_r - 1) / (N (N - 1)), which for d full decks is
    (4d - 1)/(52d - 1). It needs counts by rank; with counts by value only the
    pair figures are unknown and left out.

House edge
    The expected loss per unit staked (pushes count as staked and returned),
    from the paytable's exact odds: Banker at 19/20 before any rounding of
    individual payouts. Return to player is 1 - house edge.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Final

from services.shared.rules.cards import RANK_VALUES, RANKS, Card
from services.shared.rules.paytable import STANDARD, BetType, Paytable
from services.shared.rules.shoe import check_decks
from services.shared.rules.tableau import BANKER_DRAW_TABLE

MIN_CARDS: Final = 6
"""A shoe needs at least this many cards for every coup to be completable."""

PROBABILITY_KEYS: Final = ("player", "banker", "tie", "player_pair", "banker_pair")

# Value of each rank, in RANKS order (A..K).
_RANK_VALUE: Final = tuple(RANK_VALUES[rank] for rank in RANKS)


class InvalidCounts(ValueError):
    """Card counts that describe no shoe (wrong length, negative, too few cards)."""


@dataclass(frozen=True)
class ExactOdds:
    """Exact probabilities of a coup's results and the house edge of each bet.

    ``probabilities`` has the keys ``player``, ``banker``, ``tie`` and, when
    the counts were given by rank (``pairs_known``), ``player_pair`` and
    ``banker_pair``. ``house_edge`` and ``return_to_player`` are keyed by
    BetType, pair bets only when ``pairs_known``.
    """

    value_counts: tuple[int, ...]
    rank_counts: tuple[int, ...] | None
    paytable: Paytable
    probabilities: Mapping[str, Fraction]
    house_edge: Mapping[BetType, Fraction]
    return_to_player: Mapping[BetType, Fraction]

    @property
    def card_count(self) -> int:
        """How many cards the shoe holds."""
        return sum(self.value_counts)

    @property
    def pairs_known(self) -> bool:
        """Whether pair figures are present (counts were given by rank)."""
        return self.rank_counts is not None


def rank_counts_of(cards: Iterable[Card]) -> list[int]:
    """Counts of the 13 ranks A..K among ``cards`` (for example the cards left in a shoe)."""
    index = {rank: i for i, rank in enumerate(RANKS)}
    counts = [0] * len(RANKS)
    for card in cards:
        counts[index[card.rank]] += 1
    return counts


def full_shoe_counts(decks: int) -> list[int]:
    """Rank counts (A..K) of a full shoe of ``decks`` decks: 4 x decks each."""
    check_decks(decks)
    return [4 * decks] * len(RANKS)


def _check_counts(counts: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """Value counts (0..9) and, for 13 rank counts, the rank counts; raise InvalidCounts."""
    if len(counts) not in (10, 13):
        raise InvalidCounts(
            f"expected 13 counts (by rank A,2,...,10,J,Q,K) or 10 (by value 0..9), "
            f"got {len(counts)}"
        )
    for position, count in enumerate(counts):
        if isinstance(count, bool) or not isinstance(count, int):
            raise InvalidCounts(f"count #{position + 1} is not a whole number: {count!r}")
        if count < 0:
            raise InvalidCounts(f"count #{position + 1} is negative: {count}")
    total = sum(counts)
    if total < MIN_CARDS:
        raise InvalidCounts(
            f"a shoe needs at least {MIN_CARDS} cards so that any coup can finish, got {total}"
        )
    if len(counts) == 10:
        return tuple(counts), None
    values = [0] * 10
    for rank_index, count in enumerate(counts):
        values[_RANK_VALUE[rank_index]] += count
    return tuple(values), tuple(counts)


_PLAYER, _BANKER, _TIE = 0, 1, 2


def _winner(player_total: int, banker_total: int) -> int:
    """Index of the outcome (_PLAYER, _BANKER, _TIE) of two final totals."""
    if player_total > banker_total:
        return _PLAYER
    return _BANKER if banker_total > player_total else _TIE


def _banker_draws_alone(left: list[int], player_total: int, banker_total: int) -> list[int]:
    """Player stood, Banker draws: ways to a Player win, Banker win, Tie over ``left`` cards."""
    ways = [0, 0, 0]
    for value, count in enumerate(left):
        ways[_winner(player_total, (banker_total + value) % 10)] += count
    return ways


def _player_draws(
    left: list[int], cards_left: int, player_total: int, banker_total: int
) -> tuple[list[int], list[int]]:
    """Player draws from ``left``; ways of each outcome in 5-card and in 6-card coups.

    For each Player third card, the Banker either stands (a 5-card coup) or
    draws from the cards left minus that one (a 6-card coup); the Banker's
    draw is summed out in O(1) from ``below[f]``, the number of cards that
    would give the Banker a final total under ``f``.
    """
    below = [0] * 11
    running = 0
    for final in range(10):
        below[final] = running
        running += left[(final - banker_total) % 10]
    below[10] = running
    draws = BANKER_DRAW_TABLE[banker_total]
    five = [0, 0, 0]
    six = [0, 0, 0]
    for third, count in enumerate(left):
        if not count:
            continue
        player_final = (player_total + third) % 10
        if not draws[third]:
            five[_winner(player_final, banker_total)] += count
            continue
        lower = below[player_final]  # Banker ends under the Player: Player wins
        equal = below[player_final + 1] - lower
        higher = cards_left - lower - equal
        taken = (banker_total + third) % 10  # the Banker cannot draw the Player's third card
        if taken < player_final:
            lower -= 1
        elif taken == player_final:
            equal -= 1
        else:
            higher -= 1
        six[_PLAYER] += count * lower
        six[_BANKER] += count * higher
        six[_TIE] += count * equal
    return five, six


def outcome_weights(value_counts: Sequence[int]) -> tuple[int, int, int, int]:
    """Integer weights of Player win, Banker win and Tie, and their common denominator.

    ``value_counts`` are the cards of each value 0..9; the denominator is
    N(N-1)(N-2)(N-3)(N-4)(N-5) for N cards (N >= 6). A weight counts the
    ordered ways the coup's cards can leave the shoe, scaled to six cards.
    """
    left = list(value_counts)  # cards not yet dealt, by value; updated in place
    total = sum(left)
    if total < MIN_CARDS:
        raise InvalidCounts(f"a shoe needs at least {MIN_CARDS} cards, got {total}")
    cards_left = total - 4  # after the first four cards
    # Ordered ways, by number of cards in the coup (4, 5, 6) and by outcome.
    four, five, six = [0, 0, 0], [0, 0, 0], [0, 0, 0]
    # Player's two cards as an unordered pair of values x <= y, then the Banker's u <= w;
    # an unequal pair stands for two orders. Each count is taken before its card is removed.
    for x in range(10):
        if not left[x]:
            continue
        ways_x = left[x]
        left[x] -= 1
        for y in range(x, 10):
            if not left[y]:
                continue
            player_ways = ways_x * left[y] * (1 if x == y else 2)
            left[y] -= 1
            player_total = (x + y) % 10
            for u in range(10):
                if not left[u]:
                    continue
                ways_u = left[u]
                left[u] -= 1
                for w in range(u, 10):
                    if not left[w]:
                        continue
                    weight = player_ways * ways_u * left[w] * (1 if u == w else 2)
                    banker_total = (u + w) % 10
                    if (
                        player_total >= 8
                        or banker_total >= 8
                        or (player_total >= 6 and banker_total >= 6)
                    ):
                        four[_winner(player_total, banker_total)] += weight
                        continue
                    left[w] -= 1
                    if player_total >= 6:
                        ways = _banker_draws_alone(left, player_total, banker_total)
                        for outcome in (_PLAYER, _BANKER, _TIE):
                            five[outcome] += weight * ways[outcome]
                    else:
                        ways5, ways6 = _player_draws(left, cards_left, player_total, banker_total)
                        for outcome in (_PLAYER, _BANKER, _TIE):
                            five[outcome] += weight * ways5[outcome]
                            six[outcome] += weight * ways6[outcome]
                    left[w] += 1
                left[u] += 1
            left[y] += 1
        left[x] += 1
    scale4 = (total - 4) * (total - 5)
    scale5 = total - 5
    denominator = total * (total - 1) * (total - 2) * (total - 3) * scale4
    player, banker, tie = (
        four[outcome] * scale4 + five[outcome] * scale5 + six[outcome]
        for outcome in (_PLAYER, _BANKER, _TIE)
    )
    return player, banker, tie, denominator


def pair_probability(rank_counts: Sequence[int]) -> Fraction:
    """Exact probability that a side's first two cards share a rank (either side, same law)."""
    total = sum(rank_counts)
    if total < 2:
        raise InvalidCounts(f"a pair needs at least 2 cards, got {total}")
    same = sum(count * (count - 1) for count in rank_counts)
    return Fraction(same, total * (total - 1))


def exact_odds(counts: Sequence[int], paytable: Paytable = STANDARD) -> ExactOdds:
    """Exact odds for a shoe holding ``counts`` cards: 13 per rank (A..K) or 10 per value (0..9)."""
    value_counts, rank_counts = _check_counts(counts)
    player, banker, tie, denominator = outcome_weights(value_counts)
    probabilities: dict[str, Fraction] = {
        "player": Fraction(player, denominator),
        "banker": Fraction(banker, denominator),
        "tie": Fraction(tie, denominator),
    }
    if rank_counts is not None:
        pair = pair_probability(rank_counts)
        probabilities["player_pair"] = pair
        probabilities["banker_pair"] = pair
    edge = house_edges(probabilities, paytable)
    return ExactOdds(
        value_counts=value_counts,
        rank_counts=rank_counts,
        paytable=paytable,
        probabilities=MappingProxyType(probabilities),
        house_edge=MappingProxyType(edge),
        return_to_player=MappingProxyType({bet: 1 - loss for bet, loss in edge.items()}),
    )


def house_edges(
    probabilities: Mapping[str, Fraction], paytable: Paytable
) -> dict[BetType, Fraction]:
    """Expected loss per unit staked of each bet whose probabilities are known."""
    p_player, p_banker, p_tie = (probabilities[key] for key in ("player", "banker", "tie"))
    odds = paytable.odds
    edge = {
        BetType.PLAYER: p_banker - p_player * odds[BetType.PLAYER],
        BetType.BANKER: p_player - p_banker * odds[BetType.BANKER],
        BetType.TIE: (1 - p_tie) - p_tie * odds[BetType.TIE],
    }
    for bet in (BetType.PLAYER_PAIR, BetType.BANKER_PAIR):
        if bet.value in probabilities:
            win = probabilities[bet.value]
            edge[bet] = (1 - win) - win * odds[bet]
    return edge


def full_shoe_odds(decks: int, paytable: Paytable = STANDARD) -> ExactOdds:
    """Exact odds of the first coup of a full shoe of ``decks`` decks (1 to 8)."""
    return exact_odds(full_shoe_counts(decks), paytable)
