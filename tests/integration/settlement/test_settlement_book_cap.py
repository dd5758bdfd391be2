"""The book cap's count rebuilt from a durable store after a restart."""

from __future__ import annotations

from services.settlement.bet_index import BetAnswer
from tests.unit.settlement.harness import bet, settlement_app
from tests.unit.settlement.test_settlement_book_cap import FULL, capped


def test_the_count_is_rebuilt_from_the_books_events_after_a_restart(
    store_env: dict[str, str],
) -> None:
    first = capped(store_env, 3).app
    first.handle_batch([bet("b0", bettor_id="p0"), bet("b1", bettor_id="p1")], None)
    first.close()
    again = settlement_app(env={**store_env, "PB_MAX_BETS_PER_COUP": "3"})
    assert again.place_bet(bet("b2", bettor_id="p2")).accepted
    assert again.place_bet(bet("b3", bettor_id="p3")).reason_code == "BOOK_FULL"
    again.close()
    # Answers are recorded, never judged again: a smaller cap later refuses new bets only.
    smaller = settlement_app(env={**store_env, "PB_MAX_BETS_PER_COUP": "1"})
    book = smaller.get_book("t1", "c1")
    assert book is not None and book.bet_count == 3
    assert smaller.place_bet(bet("b0", bettor_id="p0")) == BetAnswer("b0", True, repeated=True)
    assert smaller.place_bet(bet("b4", bettor_id="p4")).message.startswith(FULL)
    smaller.close()
