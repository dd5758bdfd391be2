"""An oracle of payouts for tests, written apart from the rules engine and as plainly as can be.

From the cards of a coup in shoe order it deals the hands itself (the tableau written out once
more) and says what a stake on each bet type returns under each paytable, in integer arithmetic,
from the rules of docs/paytables.md: nothing here imports the engine.
"""

from __future__ import annotations

POINTS = {"A": 1, "T": 0, "J": 0, "Q": 0, "K": 0, **{str(n): n for n in range(2, 10)}}
MAIN = ["player", "banker", "tie"]
PAIRS = ["player_pair", "banker_pair", "either_pair", "perfect_pair"]
DRAGON_BONUS = ["dragon_bonus_player", "dragon_bonus_banker"]
OFFERED = {
    "standard": MAIN + PAIRS + DRAGON_BONUS + ["big", "small"],
    "tie-9-to-1": MAIN + PAIRS + DRAGON_BONUS + ["big", "small"],
    "no-commission": MAIN + PAIRS + DRAGON_BONUS + ["big", "small", "super_6"],
    "ez-baccarat": MAIN + PAIRS + DRAGON_BONUS + ["dragon_7", "panda_8"],
}
"""The bet types each paytable offers."""


def points(hand: list[str]) -> int:
    return sum(POINTS[card[0]] for card in hand) % 10


def dealt(cards: list[str]) -> tuple[list[str], list[str]]:
    """The Player's and the Banker's hands: P, B, P, B, then the third cards by the tableau."""
    player, banker, rest = [cards[0], cards[2]], [cards[1], cards[3]], cards[4:]
    if points(player) >= 8 or points(banker) >= 8:
        return player, banker
    third = None
    if points(player) <= 5:
        player.append(rest.pop(0))
        third = POINTS[player[2][0]]
    b = points(banker)
    if third is None:
        draws = b <= 5
    else:
        draws = (
            b <= 2
            or (b == 3 and third != 8)
            or (b == 4 and third in (2, 3, 4, 5, 6, 7))
            or (b == 5 and third in (4, 5, 6, 7))
            or (b == 6 and third in (6, 7))
        )
    if draws:
        banker.append(rest.pop(0))
    return player, banker


def oracle_payout(bet: str, stake: int, cards: list[str], paytable: str) -> tuple[str, int]:
    """(result, net win) of ``stake`` on ``bet`` for the coup these cards (in shoe order) make."""
    player, banker = dealt(cards)
    p, b = points(player), points(banker)
    natural = len(player) == len(banker) == 2 and (p >= 8 or b >= 8)
    player_pair, banker_pair = player[0][0] == player[1][0], banker[0][0] == banker[1][0]
    perfect = (player[0] == player[1]) + (banker[0] == banker[1])

    def win(numerator: int, denominator: int = 1) -> tuple[str, int]:
        return ("WIN", stake * numerator // denominator)

    lose, push = ("LOSE", 0), ("PUSH", 0)
    if bet in ("player", "banker") and p == b:
        return push
    if bet == "player":
        return win(1) if p > b else lose
    if bet == "banker":
        if b < p:
            return lose
        if paytable in ("standard", "tie-9-to-1"):
            return win(19, 20)
        if paytable == "no-commission":
            return win(1, 2) if b == 6 else win(1)
        return push if (b == 7 and len(banker) == 3) else win(1)
    if bet == "tie":
        return win(9 if paytable == "tie-9-to-1" else 8) if p == b else lose
    if bet in DRAGON_BONUS:
        mine, theirs = (p, b) if bet == "dragon_bonus_player" else (b, p)
        if natural:
            return win(1) if mine > theirs else push if mine == theirs else lose
        pays = {9: 30, 8: 10, 7: 6, 6: 4, 5: 2, 4: 1}
        return win(pays[mine - theirs]) if mine - theirs >= 4 else lose
    won = {
        "player_pair": (player_pair, 11, 1),
        "banker_pair": (banker_pair, 11, 1),
        "either_pair": (player_pair or banker_pair, 5, 1),
        "perfect_pair": (perfect > 0, 250 if perfect == 2 else 25, 1),
        "big": (len(player) + len(banker) >= 5, 54, 100),
        "small": (len(player) + len(banker) == 4, 3, 2),
        "super_6": (b > p and b == 6, 12, 1),
        "dragon_7": (b > p and b == 7 and len(banker) == 3, 40, 1),
        "panda_8": (p > b and p == 8 and len(player) == 3, 25, 1),
    }
    hit, numerator, denominator = won[bet]
    return win(numerator, denominator) if hit else lose


def oracle_returned(bet: str, stake: int, cards: list[str], paytable: str) -> int:
    """What the bettor gets back (stake included) for ``stake`` on ``bet``."""
    result, payout = oracle_payout(bet, stake, cards, paytable)
    return 0 if result == "LOSE" else stake + payout
