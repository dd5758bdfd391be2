"""The demo with several operators (PB_OPERATORS): each simulated bettor plays through one
operator's gateway topic, and the demo follows every operator's bet events."""

from __future__ import annotations

from collections import Counter

from contracts import PlaceBet, bet_commands_topic, bet_events_topic
from services.dev.demo.bus import CommandSender, event_topics, operator_of

OPERATORS = ("acme", "bravo")


def _bet(bettor_id: str) -> PlaceBet:
    return PlaceBet(
        table_id="t1",
        coup_id="t1.c1",
        bet_id=f"{bettor_id}-1",
        bettor_id=bettor_id,
        bet_type="player",
        amount=100,
        currency="EUR",
    )


async def test_each_bettor_bets_through_one_operators_topic_and_both_are_used() -> None:
    sender = CommandSender("127.0.0.1:1", "run.", operators=OPERATORS)  # never started
    bettors = [f"bettor-{n}" for n in range(20)]
    topics = {b: sender.topic(_bet(b)) for b in bettors}
    assert all(topics[b] == "run." + bet_commands_topic(operator_of(b, OPERATORS)) for b in bettors)
    assert set(Counter(topics.values())) == {"run." + bet_commands_topic(op) for op in OPERATORS}
    assert sender.topic(_bet("bettor-3")) == topics["bettor-3"]  # stable


def test_the_demo_follows_every_operators_bet_events() -> None:
    followed = event_topics(OPERATORS)
    assert {bet_events_topic(op) for op in OPERATORS} <= set(followed)
    assert bet_events_topic("house") not in followed
