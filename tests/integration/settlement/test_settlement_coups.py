"""Settlement carried on from a durable store after a restart."""

from __future__ import annotations

from services.settlement.domain import BookStatus
from tests.unit.settlement.harness import (
    Dealing,
    Relay,
    bet,
    random_bets,
    settlement_app,
)
from tests.unit.settlement.test_settlement_coups import check_settlements, deal_coups, play


def test_restart_carries_on_from_the_store(store_env: dict[str, str]) -> None:
    first = settlement_app(env=store_env)
    dealing = Dealing(first)
    dealing.open_table()
    resolved = play(dealing, deal_coups(2, seed=12), bets_per_coup=25, seed=12)
    dealing.open_betting("t1.coup-3", 3)
    early = random_bets("t1.coup-3", 20, seed=99)
    answers = {b.bet_id: first.place_bet(b) for b in early}
    first.close()

    second = settlement_app(env=store_env)
    dealing.app = second
    # A resend after the restart gets the original answer and records nothing.
    before = second.recorder.max_notification_id()
    for placed in early:
        again = second.place_bet(placed)
        assert again.repeated and again.accepted == answers[placed.bet_id].accepted
    assert second.recorder.max_notification_id() == before
    # Dealing's last message again: the tracking record survived the restart.
    message, tracking = dealing.sent[-1]
    dealing.send(message, tracking)
    assert second.recorder.max_notification_id() == before
    late = random_bets("t1.coup-3", 40, seed=100)[20:]
    for placed in late:
        second.place_bet(placed)
    dealing.close_betting("t1.coup-3")
    resolved["t1.coup-3"] = dealing.resolve("t1.coup-3", ["4H", "4D"], ["KS", "9C"])
    relay = Relay(second)
    relay.pump()
    assert check_settlements(relay, resolved) > 40
    book = second.get_book("t1", "t1.coup-3")
    assert book is not None and book.status is BookStatus.SETTLED
    second.close()


def test_a_bet_refused_ahead_of_its_coup_stays_free_across_a_restart(
    store_env: dict[str, str],
) -> None:
    first = settlement_app(env=store_env)
    dealing = Dealing(first)
    dealing.open_table()
    dealing.open_betting("c1")
    assert first.place_bet(bet("early", coup_id="c2")).reason_code == "NO_SUCH_COUP"
    first.close()

    second = settlement_app(env=store_env)
    dealing.app = second
    dealing.close_betting("c1")
    dealing.open_betting("c2", number=2)
    answer = second.place_bet(bet("early", coup_id="c2"))
    assert answer.accepted and not answer.repeated
    second.close()

    third = settlement_app(env=store_env)
    resend = third.place_bet(bet("early", coup_id="c2"))
    assert resend.accepted and resend.repeated
    third.close()
