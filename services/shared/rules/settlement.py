"""Settlement of one bet on a resolved coup: WIN, LOSE or PUSH, in integer minor units.

:func:`bet_case` reads off the coup's cards which case of a bet type it is (or None: the bet
loses); the paytable says what that case pays (0: a push). Player and Banker push on a tie; a
pair bet wins when that side's first two cards share a rank; the other side bets are in
:data:`services.shared.rules.paytable.CASES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

from services.shared.rules.paytable import WIN, BetType, Paytable
from services.shared.rules.tableau import CoupResult, Outcome


class BetResult(StrEnum):
    """What happened to a bet."""

    WIN = "WIN"
    LOSE = "LOSE"
    PUSH = "PUSH"


@dataclass(frozen=True)
class BetSettlement:
    """A settled bet: ``payout`` is the net win (0 unless WIN), ``returned`` what goes back."""

    result: BetResult
    stake: int
    payout: int
    returned: int

    @property
    def net(self) -> int:
        """Gain of the bettor: +payout on WIN, 0 on PUSH, -stake on LOSE."""
        return self.returned - self.stake


@dataclass(frozen=True, slots=True)
class Payoff:
    """What a bet type gets on a coup: its ``case`` (None: it lost), the ``odds`` paid on it
    (net win per unit staked) and so the ``result``."""

    result: BetResult
    odds: Fraction
    case: str | None


LOST = Payoff(BetResult.LOSE, Fraction(0), None)


def bet_case(bet_type: BetType, coup: CoupResult) -> str | None:
    """The case of ``bet_type`` this coup is (one of ``CASES[bet_type]``), or None: it loses."""
    outcome, player, banker = coup.outcome, coup.player_total, coup.banker_total
    bet = BetType(bet_type)
    if bet is BetType.PLAYER or bet is BetType.BANKER:
        if outcome is Outcome.TIE:
            return "tie"
        if outcome.value != bet.value.upper():
            return None
        if bet is BetType.BANKER and banker == 6:
            return "six"
        if bet is BetType.BANKER and banker == 7 and len(coup.banker) == 3:
            return "three_card_seven"
        return WIN
    if bet is BetType.PERFECT_PAIR:
        perfect = (coup.player[0] == coup.player[1]) + (coup.banker[0] == coup.banker[1])
        return (None, "one", "both")[perfect]
    if bet is BetType.DRAGON_BONUS_PLAYER or bet is BetType.DRAGON_BONUS_BANKER:
        side = Outcome.PLAYER if bet is BetType.DRAGON_BONUS_PLAYER else Outcome.BANKER
        if coup.natural:  # both hands stood on two cards: a win here is a natural's
            if outcome is Outcome.TIE:
                return "natural_tie"
            return "natural_win" if outcome is side else None
        margin = player - banker if side is Outcome.PLAYER else banker - player
        return f"by_{margin}" if margin >= 4 else None
    won = {
        BetType.TIE: outcome is Outcome.TIE,
        BetType.PLAYER_PAIR: coup.player_pair,
        BetType.BANKER_PAIR: coup.banker_pair,
        BetType.EITHER_PAIR: coup.player_pair or coup.banker_pair,
        BetType.BIG: coup.cards_used >= 5,
        BetType.SMALL: coup.cards_used == 4,
        BetType.SUPER_6: outcome is Outcome.BANKER and banker == 6,
        BetType.DRAGON_7: outcome is Outcome.BANKER and banker == 7 and len(coup.banker) == 3,
        BetType.PANDA_8: outcome is Outcome.PLAYER and player == 8 and len(coup.player) == 3,
    }[bet]
    return WIN if won else None


def payoff(bet_type: BetType, coup: CoupResult, paytable: Paytable) -> Payoff:
    """What ``bet_type`` gets on this coup under ``paytable`` (KeyError: not offered)."""
    pays = paytable.pays[BetType(bet_type)]
    case = bet_case(bet_type, coup)
    if case is None:
        return LOST
    odds = pays[case]
    return Payoff(BetResult.WIN if odds else BetResult.PUSH, odds, case)


def settle_stake(stake: int, payoff: Payoff, paytable: Paytable) -> BetSettlement:
    """Settle ``stake`` minor units on a bet that got ``payoff`` (paytable: its rounding)."""
    if isinstance(stake, bool) or not isinstance(stake, int) or stake <= 0:
        raise ValueError(f"a stake is a positive whole number of minor units, not {stake!r}")
    if payoff.result is BetResult.WIN:
        payout = paytable.win_amount(stake, payoff.odds)
        return BetSettlement(BetResult.WIN, stake, payout, stake + payout)
    if payoff.result is BetResult.PUSH:
        return BetSettlement(BetResult.PUSH, stake, 0, stake)
    return BetSettlement(BetResult.LOSE, stake, 0, 0)


def settle_bet(
    bet_type: BetType, stake: int, coup: CoupResult, paytable: Paytable
) -> BetSettlement:
    """Settle ``stake`` minor units on ``bet_type`` for this coup under ``paytable``."""
    return settle_stake(stake, payoff(bet_type, coup, paytable), paytable)
