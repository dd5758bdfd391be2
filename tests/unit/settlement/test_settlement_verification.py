"""Settlement believes cards, not claims: a CoupResolved pays only what the shoe's cards give."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import BetSettled, CoupResolved, CoupSettled, IncidentRaised
from services.settlement.application import SettlementApplication
from services.settlement.books import MAX_BOOK_EXPOSURE
from services.settlement.verification import Claim, check_claim
from services.shared.rules.cards import ALL_CARDS, Card
from services.shared.rules.tableau import resolve_coup
from tests.unit.settlement.harness import (
    CLOSES_AT,
    PLACED_AT,
    POPO,
    Dealing,
    Relay,
    bet,
    claim,
    settlement_app,
)

PLAYER, BANKER = ["9H", "KD"], ["2S", "3C"]  # a natural 9 against 5: Player wins
ORDER = ["9H", "2S", "KD", "3C"]
MICROSECOND = timedelta(microseconds=1)


def table() -> Dealing:
    dealing = Dealing(settlement_app(env=POPO))
    dealing.open_table()
    dealing.open_betting("c1")
    return dealing


def bets(app: SettlementApplication) -> None:
    assert app.place_bet(bet("p", bettor_id="alice", bet_type="player", amount=1000)).accepted
    assert app.place_bet(bet("t", bettor_id="bob", bet_type="tie", amount=1000)).accepted
    assert app.place_bet(bet("pp", bettor_id="bob", bet_type="player_pair", amount=500)).accepted


def forged(**changes: object) -> CoupResolved:
    return claim("t1", "c1", 1, PLAYER, BANKER).model_copy(update=changes)


def incidents(relay: Relay) -> list[str]:
    return [m.code for m in relay.of_type(IncidentRaised)]


def returned(relay: Relay) -> dict[str, int]:
    return {m.bet_id: m.returned for m in relay.of_type(BetSettled)}


def test_a_forged_outcome_is_refused_and_the_true_result_is_paid_when_it_comes() -> None:
    dealing = table()
    bets(dealing.app)
    dealing.close_betting("c1")
    dealing.draw("c1", ORDER)
    # "Tie, with both pairs", on the real cards: nothing is paid on it.
    dealing.send(forged(outcome="TIE", player_pair=True, banker_pair=True, banker_total=9))
    relay = Relay(dealing.app)
    relay.pump()
    assert relay.of_type(BetSettled) == []
    assert incidents(relay) == ["OUTCOME_MISMATCH"]
    dealing.resolve("c1", PLAYER, BANKER, draw=False)  # the genuine claim
    relay.pump()
    assert returned(relay) == {"p": 2000, "t": 0, "pp": 0}


def test_consistent_cards_the_shoe_did_not_draw_are_refused() -> None:
    dealing = table()
    bets(dealing.app)
    dealing.close_betting("c1")
    dealing.draw("c1", ORDER)
    # A tie with both pairs that the tableau allows, but not the shoe's cards.
    fake = claim("t1", "c1", 1, ["5H", "5D", "KH"], ["5C", "5S", "KS"])
    assert check_claim(Claim.of(fake), 1, "s1", Claim.of(fake).dealing_order) is None
    dealing.send(fake)
    relay = Relay(dealing.app)
    relay.pump()
    assert incidents(relay) == ["CARDS_MISMATCH"] and relay.of_type(BetSettled) == []
    dealing.resolve("c1", PLAYER, BANKER, draw=False)
    relay.pump()
    assert returned(relay)["p"] == 2000


def test_a_claim_whose_cards_are_not_in_yet_waits_for_them() -> None:
    dealing = table()
    bets(dealing.app)
    dealing.close_betting("c1")
    dealing.resolve("c1", PLAYER, BANKER, draw=False)  # read before the shoe's cards
    relay = Relay(dealing.app)
    relay.pump()
    assert relay.of_type(CoupSettled) == [] and incidents(relay) == []
    dealing.draw("c1", ORDER[:3])
    assert relay.pump() == []
    dealing.draw("c1", ORDER[3:])
    relay.pump()
    assert returned(relay) == {"p": 2000, "t": 0, "pp": 0} and incidents(relay) == []


def test_a_waiting_forgery_is_refused_when_the_cards_come_and_the_true_claim_pays() -> None:
    dealing = table()
    bets(dealing.app)
    dealing.close_betting("c1")
    dealing.send(claim("t1", "c1", 1, ["5H", "5D", "KH"], ["5C", "5S", "KS"]))
    dealing.resolve("c1", PLAYER, BANKER, draw=False)
    relay = Relay(dealing.app)
    relay.pump()
    assert relay.of_type(BetSettled) == []
    dealing.draw("c1", ORDER)
    relay.pump()
    assert incidents(relay) == ["CARDS_MISMATCH"]
    assert returned(relay) == {"p": 2000, "t": 0, "pp": 0}


def test_cards_appended_before_betting_closed_are_refused_and_the_shoes_own_are_taken() -> None:
    # A forger holding the shoe's key sends cards while bets are taken: the broker appended
    # them before dealing's close mark, so they cannot be the shoe's. Refused at the close.
    dealing = table()
    bets(dealing.app)
    dealing.draw("c1", ["5H", "5D", "5C", "5S"], at=PLACED_AT)
    dealing.close_betting("c1")
    dealing.resolve("c1", PLAYER, BANKER)  # the shoe's cards, after the close, then the claim
    relay = Relay(dealing.app)
    relay.pump()
    assert incidents(relay) == ["UNEXPECTED_CARD"] * 4
    assert returned(relay) == {"p": 2000, "t": 0, "pp": 0}


@pytest.mark.parametrize("mark_first", [True, False], ids=["mark-read-first", "cards-read-first"])
@pytest.mark.parametrize(
    ("setting", "skew"),
    [(None, timedelta(milliseconds=100)), ("2s", timedelta(seconds=2)), ("0", timedelta(0))],
    ids=["default-100ms", "2s", "none"],
)
def test_brokers_clocks_may_disagree_by_the_set_skew_and_no_more(
    setting: str | None, skew: timedelta, mark_first: bool
) -> None:
    """The shoe's cards are appended by one partition leader, the close mark by another: a
    genuine card stamped up to PB_BROKER_CLOCK_SKEW before the mark (a leader's clock behind)
    is taken, one stamped a microsecond earlier still refused, whichever is read first."""
    for appended, taken in ((CLOSES_AT - skew, True), (CLOSES_AT - skew - MICROSECOND, False)):
        env = POPO if setting is None else {**POPO, "PB_BROKER_CLOCK_SKEW": setting}
        dealing = Dealing(settlement_app(env=env))
        dealing.open_table()
        dealing.open_betting("c1")
        bets(dealing.app)
        if mark_first:
            dealing.close_betting("c1", at=CLOSES_AT)
        dealing.draw("c1", ORDER, at=appended)
        if not mark_first:
            dealing.close_betting("c1", at=CLOSES_AT)
        dealing.resolve("c1", PLAYER, BANKER, draw=False)
        relay = Relay(dealing.app)
        relay.pump()
        if taken:
            assert incidents(relay) == [] and returned(relay) == {"p": 2000, "t": 0, "pp": 0}
        else:
            assert incidents(relay) == ["UNEXPECTED_CARD"] * 4 and returned(relay) == {}


def test_a_result_for_an_unknown_coup_or_another_shoe_or_number_is_refused() -> None:
    dealing = table()
    dealing.close_betting("c1")
    dealing.draw("c1", ORDER)
    dealing.send(claim("t1", "c9", 1, PLAYER, BANKER))
    dealing.send(forged(shoe_id="s2"))
    dealing.send(forged(coup_number=2))
    relay = Relay(dealing.app)
    relay.pump()
    assert incidents(relay) == ["UNEXPECTED_RESOLUTION"] * 3
    assert relay.of_type(CoupSettled) == []


def test_an_impossible_coup_is_refused() -> None:
    dealing = table()
    dealing.close_betting("c1")
    # A natural on the Player side: the Banker may not draw a third card.
    dealing.send(claim("t1", "c1", 1, PLAYER, ["2S", "3C", "4D"]))
    relay = Relay(dealing.app)
    relay.pump()
    assert incidents(relay) == ["IMPOSSIBLE_COUP"]


def test_a_second_card_at_a_position_is_a_conflict_and_the_first_stays() -> None:
    dealing = table()
    dealing.close_betting("c1")
    [first] = dealing.draw("c1", ["9H"])
    other = first.model_copy(update={"card": "8H", "event_id": UUID(int=first.event_id.int ^ 1)})
    dealing.send(other, placed_at=CLOSES_AT + timedelta(seconds=2))
    book = dealing.app.get_book("t1", "c1")
    assert book is not None and book.drawn_cards == ["9H"]
    relay = Relay(dealing.app)
    relay.pump()
    assert incidents(relay) == ["CONFLICTING_CARD"]


def test_a_settled_coup_refuses_a_later_claim_with_other_facts() -> None:
    dealing = table()
    bets(dealing.app)
    dealing.close_betting("c1")
    dealing.resolve("c1", PLAYER, BANKER)
    dealing.send(forged(outcome="TIE"))
    relay = Relay(dealing.app)
    relay.pump()
    assert len(relay.of_type(CoupSettled)) == 1
    assert incidents(relay) == ["UNEXPECTED_RESOLUTION"]


def test_what_one_coup_could_pay_back_stays_below_the_exact_integer_limit() -> None:
    dealing = Dealing(settlement_app(env=POPO))
    big = 10**14
    dealing.open_table(limits={"player": (1, big), "banker": (1, big), "player_pair": (1, big)})
    dealing.open_betting("c1")
    count = MAX_BOOK_EXPOSURE // (2 * big)  # a Player bet returns at most twice its stake
    for n in range(count):
        assert dealing.app.place_bet(bet(f"b{n}", bettor_id=f"p{n}", amount=big)).accepted
    over = dealing.app.place_bet(bet("over", bettor_id="x", amount=big))
    assert over.reason_code == "ABOVE_MAXIMUM" and "for one coup" in over.message
    left = MAX_BOOK_EXPOSURE - count * 2 * big
    pair = bet("pair", bettor_id="z", bet_type="player_pair", amount=left // 12 + 1)
    assert dealing.app.place_bet(pair).reason_code == "ABOVE_MAXIMUM"  # 12 times its stake
    assert dealing.app.place_bet(bet("fits", bettor_id="y", amount=left // 2)).accepted


cards = st.sampled_from(ALL_CARDS).map(lambda card: card.code)


@settings(max_examples=300)
@given(st.lists(cards, min_size=6, max_size=6), st.data())
def test_the_true_claim_of_any_coup_holds_and_any_changed_fact_is_refused(
    shoe: list[str], data: st.DataObject
) -> None:
    result = resolve_coup([Card.parse(code) for code in shoe])
    player = [card.code for card in result.player]
    banker = [card.code for card in result.banker]
    true = Claim.of(claim("t1", "c1", 1, player, banker))
    drawn = list(true.dealing_order)
    assert drawn == shoe[: result.cards_used]
    assert check_claim(true, 1, "s1", drawn) is None
    fact = data.draw(
        st.sampled_from(
            ["player_total", "banker_total", "outcome", "natural", "player_pair", "banker_pair"]
        )
    )
    values = {
        "player_total": (true.player_total + 1) % 10,
        "banker_total": (true.banker_total + 1) % 10,
        "outcome": "TIE" if true.outcome != "TIE" else "BANKER",
        "natural": not true.natural,
        "player_pair": not true.player_pair,
        "banker_pair": not true.banker_pair,
    }
    record = true.record() | {fact: values[fact]}
    refused = check_claim(Claim.from_record(record), 1, "s1", drawn)
    assert refused is not None and refused.code == "OUTCOME_MISMATCH"
    other = data.draw(cards.filter(lambda code: code != drawn[0]))
    refused = check_claim(true, 1, "s1", [other, *drawn[1:]])
    assert refused is not None and refused.code == "CARDS_MISMATCH"
