"""`up`'s platforms: a bet sent again goes the way its first send went (never a second writer
of the gateway's bet ids on Kafka), and with several operators each has its own gateway
service, secrets and wallet, and each bettor bets through its operator's."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from services.dev.demo.bettors import BetKind, PlannedBet
from services.dev.demo.gateway import routed


def planned(bet_id: str, kind: BetKind, amount: str = "500") -> PlannedBet:
    return PlannedBet(
        bet_id, "t1", "t1.c1", "bettor-1", "player", Decimal(amount), "EUR", kind, None
    )


def test_a_repeat_goes_the_way_of_the_bet_it_repeats() -> None:
    valid, odd = planned("b1", BetKind.VALID), planned("b2", BetKind.BAD_AMOUNT, "2.5")
    again, odd_again = replace(valid, kind=BetKind.REPEAT), replace(odd, kind=BetKind.REPEAT)
    http, kafka = routed([valid, odd, again, odd_again])
    assert [b.bet_id for b in http] == ["b1", "b1"]  # the API answers it as the first time
    assert [b.bet_id for b in kafka] == ["b2", "b2"]
    assert routed([again], over_http={"b1"}) == ([again], [])  # sent in an earlier batch
