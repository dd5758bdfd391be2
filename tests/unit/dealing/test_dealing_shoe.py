"""A whole shoe dealt from a known order: coups, cut card, last coup, new shoe."""

from __future__ import annotations

from contracts import (
    BettingOpened,
    CardDealt,
    CloseShoe,
    CoupResolved,
    DrawCards,
    ShuffleShoe,
)
from services.dealing.application import DealingApplication
from services.shared.rules.cards import Card
from services.shared.rules.shoe import burn_count, cut_card_index
from services.shared.rules.tableau import resolve_coup
from tests.unit.dealing.harness import Driver, ScriptedShoe, open_table, shuffled_order

POPO = {"PERSISTENCE_MODULE": "eventsourcing.popo"}


def play_until_new_shoe(driver: Driver, limit: int = 100) -> None:
    for _ in range(limit):
        driver.close_betting_and_pump()
        if len(driver.of_type(ShuffleShoe)) >= 2:
            return
    raise AssertionError("the shoe never ended")


def test_a_whole_shoe_is_dealt_by_the_tableau_in_shoe_order() -> None:
    order = shuffled_order(1, seed=7)
    app = DealingApplication(env=POPO)
    driver = Driver(app, ScriptedShoe([order, shuffled_order(1, seed=8)]))
    app.handle(open_table(cut_card_from_end=14))
    driver.pump()
    play_until_new_shoe(driver)

    resolved = [m for m in driver.of_type(CoupResolved) if m.shoe_id == "t1.shoe-1"]
    assert resolved, "no coup was resolved"
    position = 1 + burn_count(Card.parse(order[0]))
    for coup in resolved:
        assert isinstance(coup, CoupResolved)
        expected = resolve_coup([Card.parse(c) for c in order[position : position + 6]])
        assert coup.player_cards == [c.code for c in expected.player]
        assert coup.banker_cards == [c.code for c in expected.banker]
        assert (coup.player_total, coup.banker_total) == (
            expected.player_total,
            expected.banker_total,
        )
        assert coup.outcome == expected.outcome.value
        assert coup.natural == expected.natural
        assert (coup.player_pair, coup.banker_pair) == (expected.player_pair, expected.banker_pair)
        dealt = [
            m
            for m in driver.of_type(CardDealt)
            if isinstance(m, CardDealt) and m.coup_id == coup.coup_id
        ]
        assert [m.position for m in dealt] == list(range(position, position + len(dealt)))
        assert [(m.side, m.card) for m in dealt] == [
            (side.value, card.code) for side, card in expected.sequence
        ]
        position += expected.cards_used

    # The cut card came out in the coup that drew position cut_card_index; exactly one
    # more coup was played (last_of_shoe), then the shoe was closed and a new one asked for.
    cut = cut_card_index(len(order), 14)
    opened = [m for m in driver.of_type(BettingOpened) if m.shoe_id == "t1.shoe-1"]
    assert [m.last_of_shoe for m in opened] == [False] * (len(opened) - 1) + [True]
    dealt_positions = {
        m.coup_id: [d.position for d in driver.of_type(CardDealt) if d.coup_id == m.coup_id]
        for m in opened
        if isinstance(m, BettingOpened)
    }
    cut_coup = next(c for c, positions in dealt_positions.items() if cut <= max(positions))
    assert cut_coup == opened[-2].coup_id
    kinds = [type(m).__name__ for m in driver.published]
    second_shuffle = [i for i, k in enumerate(kinds) if k == "ShuffleShoe"][1]
    close_shoe = kinds.index("CloseShoe")
    last_resolved = driver.published.index(resolved[-1])
    assert last_resolved < close_shoe < second_shuffle
    assert resolved[-1].coup_id == opened[-1].coup_id
    new_shoe = driver.published[second_shuffle]
    assert isinstance(new_shoe, ShuffleShoe) and new_shoe.shoe_id == "t1.shoe-2"
    close = driver.published[close_shoe]
    assert isinstance(close, CloseShoe) and close.shoe_id == "t1.shoe-1"

    # The new shoe starts a new coup after its burn.
    driver.pump()
    latest = driver.of_type(BettingOpened)[-1]
    assert isinstance(latest, BettingOpened)
    assert latest.shoe_id == "t1.shoe-2" and not latest.last_of_shoe


def test_cards_are_requested_four_then_one_at_a_time() -> None:
    app = DealingApplication(env=POPO)
    driver = Driver(app, ScriptedShoe([shuffled_order(1, seed=3)]))
    app.handle(open_table())
    driver.pump()
    for _ in range(5):
        driver.close_betting_and_pump()
    draws = [m for m in driver.of_type(DrawCards) if isinstance(m, DrawCards)]
    by_coup: dict[str, list[int]] = {}
    for draw in draws:
        by_coup.setdefault(draw.coup_id, []).append(draw.count)
    for counts in by_coup.values():
        assert counts[0] == 4 and all(c == 1 for c in counts[1:]) and len(counts) <= 3


def test_coup_numbers_and_ids_increase() -> None:
    app = DealingApplication(env=POPO)
    driver = Driver(app, ScriptedShoe([shuffled_order(2, seed=11)]))
    app.handle(open_table(decks=2))
    driver.pump()
    for _ in range(4):
        driver.close_betting_and_pump()
    opened = [m for m in driver.of_type(BettingOpened) if isinstance(m, BettingOpened)]
    assert [m.coup_number for m in opened] == [1, 2, 3, 4, 5]
    assert len({m.coup_id for m in opened}) == 5
