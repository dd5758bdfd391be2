"""Exact odds of every bet type for a full shoe or any remaining shoe, by full enumeration.

Method
    Cards are drawn without replacement from a finite shoe given as counts
    (52 per card, 13 per rank A..K, or 10 per baccarat value 0..9). Every coup
    is enumerated by card VALUE with integer weights: the number of ordered
    ways a value sequence can leave the shoe is the product of the counts
    still available at each draw. The four initial cards are enumerated as an
    unordered Player pair and an unordered Banker pair (55 x 55 states, each
    with its multiplicity), then the Player's third card, then the Banker's.
    The weights are kept as a table of final totals (Player x Banker) for each
    way a coup can go (:class:`CoupWeights`: a natural; both stand; only the
    Banker draws; only the Player draws; both draw), brought to the common
    denominator N(N-1)...(N-5), so every probability is an exact ``Fraction``
    (for 8 decks the weights are the "combinations" published for baccarat).
    Nothing is simulated. Every bet type on the totals (Player, Banker, Tie,
    Dragon Bonus, Big/Small, Super 6, Dragon 7, Panda 8) is read off those tables.

Pairs
    A side's pair depends only on two fixed positions of the shoe (1st and
    3rd for the Player, 2nd and 4th for the Banker). Draws without replacement
    are exchangeable, so any positions have the joint law of the first ones:
    P(pair) = sum_r n_r (n_r - 1) / (N (N - 1)), which for d full decks is
    (4d - 1)/(52d - 1); both pairs likewise over four positions. Counts by
    rank give the pair bets; a Perfect Pair (same rank and suit) needs counts
    by card. Figures the counts cannot tell are left out.

House edge
    The expected loss per unit staked (pushes count as staked and returned),
    from the paytable's exact odds of each case, before any rounding of
    individual payouts. Return to player is 1 - house edge.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Final

from services.shared.rules.cards import ALL_CARDS, RANK_VALUES, RANKS, Card
from services.shared.rules.paytable import MARGINS, STANDARD, WIN, BetType, Paytable
from services.shared.rules.shoe import check_decks
from services.shared.rules.tableau import BANKER_DRAW_TABLE

MIN_CARDS: Final = 6
"""A shoe needs at least this many cards for every coup to be completable."""

PROBABILITY_KEYS: Final = ("player", "banker", "tie")
"""The outcomes in :attr:`ExactOdds.probabilities` (beside each side bet's chance to win)."""

_RANK_VALUE: Final = tuple(RANK_VALUES[rank] for rank in RANKS)  # A..K
_CARD_INDEX: Final = {card: index for index, card in enumerate(ALL_CARDS)}
_RANK_OF_CARD: Final = tuple(RANKS.index(card.rank) for card in ALL_CARDS)
_PAIR_BETS: Final = (BetType.PLAYER_PAIR, BetType.BANKER_PAIR, BetType.EITHER_PAIR)


class InvalidCounts(ValueError):
    """Card counts that describe no shoe (wrong length, negative, too few cards)."""


Table = tuple[tuple[int, ...], ...]
"""Weights by final totals: ``table[player_total][banker_total]``."""


@dataclass(frozen=True)
class CoupWeights:
    """Integer weights of the coup's final totals, over the common ``denominator``
    N(N-1)...(N-5), for each way the coup goes: ``natural`` (4 cards, a natural), ``stood``
    (4 cards, both stand), ``banker_drew`` (5: the Player stood), ``player_drew`` (5: the
    Banker stood) and ``both_drew`` (6 cards)."""

    denominator: int
    natural: Table
    stood: Table
    banker_drew: Table
    player_drew: Table
    both_drew: Table

    def cells(self) -> Iterable[tuple[bool, int, int, int, int, int]]:
        """(natural, Player's cards, Banker's cards, Player total, Banker total, weight) of
        every weight."""
        for table, natural, player_cards, banker_cards in (
            (self.natural, True, 2, 2),
            (self.stood, False, 2, 2),
            (self.banker_drew, False, 2, 3),
            (self.player_drew, False, 3, 2),
            (self.both_drew, False, 3, 3),
        ):
            for player, row in enumerate(table):
                for banker, weight in enumerate(row):
                    if weight:
                        yield natural, player_cards, banker_cards, player, banker, weight


@dataclass(frozen=True)
class ExactOdds:
    """Exact probabilities of every case of each bet type, and the house edge of each bet.

    ``cases[bet][case]`` is the probability of that case (``paytable.CASES``) for every bet
    type the counts can tell: all of them with counts by card (``suits_known``); all but the
    Perfect Pair with counts by rank (``pairs_known``); neither pairs with counts by value.
    ``probabilities`` holds the outcomes ``player``, ``banker``, ``tie`` and each side bet's
    chance to win under the paytable (:meth:`win_probability`); ``house_edge`` and
    ``return_to_player`` are keyed by the paytable's bet types whose figures are known.
    """

    value_counts: tuple[int, ...]
    rank_counts: tuple[int, ...] | None
    card_counts: tuple[int, ...] | None
    paytable: Paytable
    cases: Mapping[BetType, Mapping[str, Fraction]]
    probabilities: Mapping[str, Fraction]
    house_edge: Mapping[BetType, Fraction]
    return_to_player: Mapping[BetType, Fraction]

    def win_probability(self, bet: BetType) -> Fraction | None:
        """The chance ``bet`` wins under the paytable (a push is no win; None: not known)."""
        known = self.cases.get(bet)
        return None if known is None else _wins(known, self.paytable.pays[bet])

    @property
    def card_count(self) -> int:
        """How many cards the shoe holds."""
        return sum(self.value_counts)

    @property
    def pairs_known(self) -> bool:
        """Whether the pair bets' figures are present (counts by rank or by card)."""
        return self.rank_counts is not None

    @property
    def suits_known(self) -> bool:
        """Whether the Perfect Pair's figures are present (counts by card)."""
        return self.card_counts is not None


def rank_counts_of(cards: Iterable[Card]) -> list[int]:
    """Counts of the 13 ranks A..K among ``cards`` (for example the cards left in a shoe)."""
    index = {rank: i for i, rank in enumerate(RANKS)}
    counts = [0] * len(RANKS)
    for card in cards:
        counts[index[card.rank]] += 1
    return counts


def card_counts_of(cards: Iterable[Card]) -> list[int]:
    """Counts of the 52 cards among ``cards``, in ``ALL_CARDS`` order (clubs A..K, then
    diamonds, hearts, spades)."""
    counts = [0] * len(ALL_CARDS)
    for card in cards:
        counts[_CARD_INDEX[card]] += 1
    return counts


def full_shoe_counts(decks: int) -> list[int]:
    """Card counts (52, ``ALL_CARDS`` order) of a full shoe of ``decks`` decks."""
    check_decks(decks)
    return [decks] * len(ALL_CARDS)


def _check_counts(
    counts: Sequence[int],
) -> tuple[tuple[int, ...], tuple[int, ...] | None, tuple[int, ...] | None]:
    """Value counts (0..9), rank counts and card counts as far as given; raise InvalidCounts."""
    if len(counts) not in (10, 13, 52):
        raise InvalidCounts(
            f"expected 52 counts (by card, clubs A..K then diamonds, hearts, spades), 13 (by "
            f"rank A,2,...,10,J,Q,K) or 10 (by value 0..9), got {len(counts)}"
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
        return tuple(counts), None, None
    cards = tuple(counts) if len(counts) == 52 else None
    ranks = list(counts)
    if cards is not None:
        ranks = [0] * len(RANKS)
        for card, count in enumerate(cards):
            ranks[_RANK_OF_CARD[card]] += count
    values = [0] * 10
    for rank_index, count in enumerate(ranks):
        values[_RANK_VALUE[rank_index]] += count
    return tuple(values), tuple(ranks), cards


_SHIFTED: Final = tuple(tuple((start + value) % 10 for value in range(10)) for start in range(10))
"""``_SHIFTED[total][value]``: the total after a card of ``value``."""


def _draw(row: list[int], left: Sequence[int], start: int, weight: int) -> None:
    """Add ``weight`` times each card left to the final total it gives a hand on ``start``."""
    for final, count in zip(_SHIFTED[start], left, strict=True):
        if count:
            row[final] += weight * count


def coup_weights(value_counts: Sequence[int]) -> CoupWeights:
    """The weights of every coup's final totals for a shoe of ``value_counts`` (by value 0..9).

    A weight counts the ordered ways the coup's cards can leave the shoe, scaled to six cards.
    """
    left = list(value_counts)  # cards not yet dealt, by value; updated in place
    total = sum(left)
    if total < MIN_CARDS:
        raise InvalidCounts(f"a shoe needs at least {MIN_CARDS} cards, got {total}")
    tables = [[[0] * 10 for _ in range(10)] for _ in range(5)]
    natural, stood, banker_drew, player_drew, both_drew = tables
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
            player = (x + y) % 10
            for u in range(10):
                if not left[u]:
                    continue
                ways_u = left[u]
                left[u] -= 1
                for w in range(u, 10):
                    if not left[w]:
                        continue
                    weight = player_ways * ways_u * left[w] * (1 if u == w else 2)
                    banker = (u + w) % 10
                    if player >= 8 or banker >= 8:
                        natural[player][banker] += weight
                        continue
                    if player >= 6 and banker >= 6:
                        stood[player][banker] += weight
                        continue
                    left[w] -= 1
                    if player >= 6:  # the Player stands, the Banker (0-5) draws
                        _draw(banker_drew[player], left, banker, weight)
                    else:
                        draws = BANKER_DRAW_TABLE[banker]
                        for third, count in enumerate(left):
                            if not count:
                                continue
                            final = (player + third) % 10
                            if not draws[third]:
                                player_drew[final][banker] += weight * count
                                continue
                            left[third] -= 1
                            _draw(both_drew[final], left, banker, weight * count)
                            left[third] += 1
                    left[w] += 1
                left[u] += 1
            left[y] += 1
        left[x] += 1
    scale4 = (total - 4) * (total - 5)
    scale5 = total - 5
    scales = (scale4, scale4, scale5, scale5, 1)

    def frozen(table: list[list[int]], scale: int) -> Table:
        return tuple(tuple(weight * scale for weight in row) for row in table)

    natural_t, stood_t, banker_t, player_t, both_t = (
        frozen(table, scale) for table, scale in zip(tables, scales, strict=True)
    )
    denominator = total * (total - 1) * (total - 2) * (total - 3) * scale4
    return CoupWeights(denominator, natural_t, stood_t, banker_t, player_t, both_t)


def case_weights(weights: CoupWeights) -> dict[BetType, dict[str, int]]:
    """The weight of each case of every bet type decided by the totals (all but the pairs):
    the cases of ``settlement.bet_case``, counted over the tables instead of read off cards."""
    found: dict[BetType, dict[str, int]] = {bet: {} for bet in BetType if bet not in _PAIR_BETS}
    del found[BetType.PERFECT_PAIR]

    def add(bet: BetType, case: str, weight: int) -> None:
        found[bet][case] = found[bet].get(case, 0) + weight

    for natural, player_cards, banker_cards, player, banker, weight in weights.cells():
        add(BetType.SMALL if player_cards + banker_cards == 4 else BetType.BIG, WIN, weight)
        if player == banker:
            add(BetType.PLAYER, "tie", weight)
            add(BetType.BANKER, "tie", weight)
            add(BetType.TIE, WIN, weight)
            if natural:
                add(BetType.DRAGON_BONUS_PLAYER, "natural_tie", weight)
                add(BetType.DRAGON_BONUS_BANKER, "natural_tie", weight)
            continue
        if player > banker:
            add(BetType.PLAYER, WIN, weight)
            if player == 8 and player_cards == 3:
                add(BetType.PANDA_8, WIN, weight)
            dragon, margin = BetType.DRAGON_BONUS_PLAYER, player - banker
        else:
            case = WIN
            if banker == 6:
                case = "six"
                add(BetType.SUPER_6, WIN, weight)
            elif banker == 7 and banker_cards == 3:
                case = "three_card_seven"
                add(BetType.DRAGON_7, WIN, weight)
            add(BetType.BANKER, case, weight)
            dragon, margin = BetType.DRAGON_BONUS_BANKER, banker - player
        if natural:
            add(dragon, "natural_win", weight)
        elif margin >= min(MARGINS):
            add(dragon, f"by_{margin}", weight)
    return found


def _pair_cases(counts: Sequence[int]) -> tuple[Fraction, Fraction]:
    """P(a side's first two cards are alike) and P(both sides' are), alike meaning the same
    entry of ``counts`` (a rank, or a card)."""
    total = sum(counts)
    two = [count * (count - 1) for count in counts]
    same = sum(two)
    four = sum(t * (count - 2) * (count - 3) for t, count in zip(two, counts, strict=True))
    both = four + same * same - sum(t * t for t in two)
    return (
        Fraction(same, total * (total - 1)),
        Fraction(both, total * (total - 1) * (total - 2) * (total - 3)),
    )


def exact_odds(counts: Sequence[int], paytable: Paytable = STANDARD) -> ExactOdds:
    """Exact odds for a shoe holding ``counts`` cards: 52 per card (``ALL_CARDS`` order),
    13 per rank (A..K) or 10 per value (0..9)."""
    value_counts, rank_counts, card_counts = _check_counts(counts)
    weights = coup_weights(value_counts)
    denominator = weights.denominator
    cases: dict[BetType, dict[str, Fraction]] = {
        bet: {case: Fraction(weight, denominator) for case, weight in found.items()}
        for bet, found in case_weights(weights).items()
    }
    if rank_counts is not None:
        pair, both = _pair_cases(rank_counts)
        cases[BetType.PLAYER_PAIR] = {WIN: pair}
        cases[BetType.BANKER_PAIR] = {WIN: pair}
        cases[BetType.EITHER_PAIR] = {WIN: 2 * pair - both}
    if card_counts is not None:
        perfect, both = _pair_cases(card_counts)
        cases[BetType.PERFECT_PAIR] = {"one": 2 * perfect - 2 * both, "both": both}
    outcome = cases[BetType.PLAYER]
    probabilities = {
        "player": outcome.get(WIN, Fraction(0)),
        "banker": sum(cases[BetType.BANKER].values(), Fraction(0)) - outcome.get("tie", 0),
        "tie": outcome.get("tie", Fraction(0)),
    }
    edge: dict[BetType, Fraction] = {}
    for bet in paytable.offered:
        known = cases.get(bet)
        if known is None:
            continue
        pays = paytable.pays[bet]
        edge[bet] = 1 - sum((p * (1 + pays[case]) for case, p in known.items()), Fraction(0))
        if bet.value not in probabilities:
            probabilities[bet.value] = _wins(known, pays)
    return ExactOdds(
        value_counts=value_counts,
        rank_counts=rank_counts,
        card_counts=card_counts,
        paytable=paytable,
        cases=MappingProxyType({bet: MappingProxyType(found) for bet, found in cases.items()}),
        probabilities=MappingProxyType(probabilities),
        house_edge=MappingProxyType(edge),
        return_to_player=MappingProxyType({bet: 1 - loss for bet, loss in edge.items()}),
    )


def _wins(cases: Mapping[str, Fraction], pays: Mapping[str, Fraction]) -> Fraction:
    """The chance of the ``cases`` that pay (a push is no win)."""
    return sum((p for case, p in cases.items() if pays[case]), Fraction(0))


def full_shoe_odds(decks: int, paytable: Paytable = STANDARD) -> ExactOdds:
    """Exact odds of the first coup of a full shoe of ``decks`` decks (1 to 8)."""
    return exact_odds(full_shoe_counts(decks), paytable)
