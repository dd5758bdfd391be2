"""Settlement of one bet on a resolved coup: WIN, LOSE or PUSH, in integer minor units.

Player and Banker bets push (the stake is returned) on a tie; a Tie bet wins
only on a tie; a pair bet wins when that side's first two cards share a rank.
Only the coup's outcome and pair flags matter, so any object with those three
attributes (a :class:`CoupResult`, a decoded message) can be settled.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from services.shared.rules.paytable import BetType, Paytable
from services.shared.rules.tableau import Outcome


class BetResult(StrEnum):
    """What happened to a bet."""

    WIN = "WIN"
    LOSE = "LOSE"
    PUSH = "PUSH"


class CoupOutcomeLike(Protocol):
    """The facts of a coup that settle bets; ``outcome`` is "PLAYER", "BANKER" or "TIE"."""

    @property
    def outcome(self) -> str: ...

    @property
    def player_pair(self) -> bool: ...

    @property
    def banker_pair(self) -> bool: ...


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


def bet_result(bet_type: BetType, coup: CoupOutcomeLike) -> BetResult:
    """WIN, LOSE or PUSH for a bet of this type on this coup."""
    outcome = Outcome(coup.outcome)
    bet_type = BetType(bet_type)
    if bet_type is BetType.PLAYER or bet_type is BetType.BANKER:
        if outcome is Outcome.TIE:
            return BetResult.PUSH
        won = outcome.value == bet_type.value.upper()
    elif bet_type is BetType.TIE:
        won = outcome is Outcome.TIE
    elif bet_type is BetType.PLAYER_PAIR:
        won = coup.player_pair
    else:
        won = coup.banker_pair
    return BetResult.WIN if won else BetResult.LOSE


def settle_bet(
    bet_type: BetType, stake: int, coup: CoupOutcomeLike, paytable: Paytable
) -> BetSettlement:
    """Settle ``stake`` minor units on ``bet_type`` for this coup under ``paytable``."""
    if isinstance(stake, bool) or not isinstance(stake, int) or stake <= 0:
        raise ValueError(f"a stake is a positive whole number of minor units, not {stake!r}")
    result = bet_result(bet_type, coup)
    if result is BetResult.WIN:
        payout = paytable.win_amount(BetType(bet_type), stake)
        return BetSettlement(result, stake, payout, stake + payout)
    if result is BetResult.PUSH:
        return BetSettlement(result, stake, 0, stake)
    return BetSettlement(result, stake, 0, 0)
