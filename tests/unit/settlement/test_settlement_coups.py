"""Settling and refunding coups: exactly once, amounts recomputed from the cards."""

from __future__ import annotations

from collections import Counter

import pytest

from contracts import (
    BetAccepted,
    BetRefunded,
    BetSettled,
    CoupRefunded,
    CoupResolved,
    CoupSettled,
    PlaceBet,
)
from services.settlement.domain import BetBook
from services.shared.rules.cards import Card
from services.shared.rules.tableau import resolve_coup
from tests.payout_oracle import OFFERED
from tests.unit.dealing.harness import shuffled_order
from tests.unit.settlement.harness import (
    POPO,
    Dealing,
    Relay,
    bet,
    expected_returned,
    random_bets,
    settlement_app,
)


def deal_coups(count: int, seed: int) -> list[tuple[list[str], list[str]]]:
    """(player cards, banker cards) of ``count`` coups dealt from a shuffled shoe."""
    order = [Card.parse(c) for c in shuffled_order(8, seed)]
    coups = []
    position = 0
    for _ in range(count):
        result = resolve_coup(order[position : position + 6])
        coups.append(([c.code for c in result.player], [c.code for c in result.banker]))
        position += result.cards_used
    return coups


def check_settlements(
    relay: Relay, resolved: dict[str, CoupResolved], paytable: str = "standard"
) -> int:
    """Every accepted bet settled exactly once, with the amounts the cards give."""
    accepted = {m.bet_id: m for m in relay.of_type(BetAccepted) if isinstance(m, BetAccepted)}
    settled = [m for m in relay.of_type(BetSettled) if isinstance(m, BetSettled)]
    counts = Counter(m.bet_id for m in settled)
    assert set(counts) == set(accepted)
    assert set(counts.values()) == {1}
    for message in settled:
        placed = accepted[message.bet_id]
        coup = resolved[message.coup_id]
        assert message.stake == placed.amount
        assert message.returned == expected_returned(placed.bet_type, placed.amount, coup, paytable)
        assert message.payout == max(0, message.returned - message.stake)
        assert message.result == (
            "WIN"
            if message.returned > message.stake
            else "PUSH"
            if message.returned == message.stake
            else "LOSE"
        )
    for total in relay.of_type(CoupSettled):
        assert isinstance(total, CoupSettled)
        mine = [m for m in settled if m.coup_id == total.coup_id]
        assert total.bets == len(mine)
        assert total.staked == sum(m.stake for m in mine)
        assert total.paid == sum(m.returned for m in mine)
        assert total.house_result == total.staked - total.paid
    return len(settled)


def play(
    dealing: Dealing, coups: list[tuple[list[str], list[str]]], bets_per_coup: int, seed: int
) -> dict[str, CoupResolved]:
    resolved = {}
    for number, (player, banker) in enumerate(coups, start=1):
        coup_id = f"t1.coup-{number}"
        dealing.open_betting(coup_id, number)
        for placed in random_bets(coup_id, bets_per_coup, seed + number, list(dealing.limits)):
            dealing.app.place_bet(placed)
        dealing.close_betting(coup_id)
        resolved[coup_id] = dealing.resolve(coup_id, player, banker)
    return resolved


@pytest.mark.parametrize("paytable", list(OFFERED))
def test_every_accepted_bet_is_settled_once_from_the_cards(paytable: str) -> None:
    """Each paytable with every bet type it offers, side bets too: the amounts are the
    oracle's (tests.payout_oracle)."""
    dealing = Dealing(settlement_app(env=POPO))
    dealing.open_table(paytable=paytable, limits=dict.fromkeys(OFFERED[paytable], (100, 100_000)))
    resolved = play(dealing, deal_coups(30, seed=5), bets_per_coup=60, seed=1)
    # Dealing's messages delivered again (same tracking): no second effect.
    for message, tracking in list(dealing.sent):
        dealing.send(message, tracking)
    relay = Relay(dealing.app)
    relay.pump()
    settled = check_settlements(relay, resolved, paytable)
    assert settled > 600
    assert len(relay.of_type(CoupSettled)) == 30
    assert {m.result for m in relay.of_type(BetSettled)} == {"WIN", "LOSE", "PUSH"}
    won = {m.bet_type for m in relay.of_type(BetSettled) if m.result == "WIN"}
    assert len(won) >= len(OFFERED[paytable]) - 3  # the rare side bets may not come up


def test_a_bet_type_the_table_does_not_offer_is_refused_with_its_own_reason() -> None:
    dealing = Dealing(settlement_app(env=POPO))
    dealing.open_table(paytable="ez-baccarat", limits={"banker": (100, 1000), "dragon_7": (1, 50)})
    dealing.open_betting("c1")
    app = dealing.app
    assert app.place_bet(bet("b1", bet_type="dragon_7", amount=50)).accepted
    refused = app.place_bet(bet("b2", bet_type="panda_8", amount=50))  # EZ's, but not here
    assert refused.reason_code == "BET_TYPE_NOT_OFFERED"
    assert "offered: banker, dragon_7" in refused.message
    assert app.place_bet(bet("b3", bet_type="super_6", amount=50)).reason_code == (
        "BET_TYPE_NOT_OFFERED"
    )
    assert app.place_bet(bet("b4", bet_type="dragon", amount=50)).reason_code == (
        "UNKNOWN_BET_TYPE"
    )


def test_a_book_never_takes_a_bet_type_its_paytable_does_not_offer() -> None:
    """An OpenBook naming limits beyond its paytable's bet types (dealing refuses such a
    table): those bets are refused, none could be settled."""
    dealing = Dealing(settlement_app(env=POPO))
    dealing.open_table(limits={"player": (100, 1000), "dragon_7": (1, 50)})
    dealing.open_betting("c1")
    refused = dealing.app.place_bet(bet("b1", bet_type="dragon_7", amount=50))
    assert refused.reason_code == "BET_TYPE_NOT_OFFERED"


def test_a_second_coup_resolved_under_a_new_position_settles_nothing() -> None:
    dealing = Dealing(settlement_app(env=POPO))
    dealing.open_table()
    resolved = play(dealing, deal_coups(1, seed=2), bets_per_coup=10, seed=2)
    dealing.send(next(iter(resolved.values())))  # e.g. dealing republished it as new
    relay = Relay(dealing.app)
    relay.pump()
    assert len(relay.of_type(CoupSettled)) == 1
    check_settlements(relay, resolved)


def test_a_whole_coup_is_settled_in_one_transaction() -> None:
    dealing = Dealing(settlement_app(env=POPO))
    dealing.open_table()
    dealing.open_betting("c1")
    for placed in random_bets("c1", 200, seed=3):
        dealing.app.place_bet(placed)
    dealing.close_betting("c1")
    dealing.draw("c1", ["9H", "2C", "KD", "3S"])  # the shoe's cards come first
    before = dealing.app.recorder.max_notification_id() or 0
    dealing.resolve("c1", ["9H", "KD"], ["2C", "3S"], draw=False)
    after = dealing.app.recorder.max_notification_id() or 0
    assert after == before + 1  # one stored event for the whole coup


def test_void_before_settlement_refunds_the_stakes() -> None:
    dealing = Dealing(settlement_app(env=POPO))
    dealing.open_table()
    dealing.open_betting("c1")
    placed = [b for b in random_bets("c1", 30, seed=4) if dealing.app.place_bet(b).accepted]
    dealing.close_betting("c1")
    dealing.void("c1", was_resolved=False)
    dealing.void("c1", was_resolved=False)  # voided again: nothing more
    dealing.resolve("c1", ["9H", "KD"], ["2C", "3S"])  # too late: nothing
    relay = Relay(dealing.app)
    relay.pump()
    refunds = [m for m in relay.of_type(BetRefunded) if isinstance(m, BetRefunded)]
    assert sorted(m.bet_id for m in refunds) == sorted(b.bet_id for b in placed)
    stakes = {b.bet_id: int(b.amount) for b in placed}
    for refund in refunds:
        assert refund.stake == refund.refunded == refund.adjustment == stakes[refund.bet_id]
    (total,) = relay.of_type(CoupRefunded)
    assert isinstance(total, CoupRefunded)
    assert total.bets == len(placed) and total.refunded == sum(stakes.values())
    assert relay.of_type(BetSettled) == [] and relay.of_type(CoupSettled) == []


def test_void_after_settlement_reverses_what_was_paid() -> None:
    dealing = Dealing(settlement_app(env=POPO))
    dealing.open_table()
    resolved = play(dealing, deal_coups(1, seed=9), bets_per_coup=40, seed=9)
    dealing.void("t1.coup-1", was_resolved=True)
    relay = Relay(dealing.app)
    relay.pump()
    returned = {m.bet_id: m.returned for m in relay.of_type(BetSettled)}
    refunds = [m for m in relay.of_type(BetRefunded) if isinstance(m, BetRefunded)]
    assert len(refunds) == len(returned) > 0
    for refund in refunds:
        assert refund.refunded == refund.stake
        assert refund.adjustment == refund.stake - returned[refund.bet_id]
    # After the reversal each bettor ends exactly where they started plus their stake back.
    assert {m.coup_id for m in refunds} == set(resolved)


def test_a_failed_batch_records_nothing_and_leaves_no_trace_in_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dealing = Dealing(settlement_app(env=POPO))
    dealing.open_table()
    dealing.open_betting("c1")
    app = dealing.app
    assert app.place_bet(bet("b0")).accepted

    def broken(self: BetBook, *args: object) -> None:
        raise RuntimeError("poison")

    monkeypatch.setattr(BetBook, "draft_reject", broken)
    batch: list[PlaceBet] = [bet("b1"), bet("b2", amount=1)]  # b2 is refused -> reject() raises
    before = app.recorder.max_notification_id()
    with pytest.raises(RuntimeError):
        app.handle_batch(batch, None)
    assert app.recorder.max_notification_id() == before
    assert app.bet_answer("b1") is None
    monkeypatch.undo()
    book = app.get_book("t1", "c1")
    assert book is not None and sorted(book.bets) == [("house", "b0")]
    assert app.place_bet(bet("b1")).accepted  # not a "repeat": the failed batch left nothing
    assert app.place_bet(bet("b1")).repeated
    book = app.get_book("t1", "c1")
    assert book is not None and sorted(book.bets) == [("house", "b0"), ("house", "b1")]


def test_a_batch_is_one_transaction_with_its_tracking_record() -> None:
    from eventsourcing.persistence import Tracking

    dealing = Dealing(settlement_app(env=POPO))
    dealing.open_table()
    dealing.open_betting("c1")
    app = dealing.app
    batch = random_bets("c1", 50, seed=8)
    app.handle_batch(batch, Tracking("punto-banco.bet-commands:0", 50))
    assert app.tracked_position("punto-banco.bet-commands:0") == 50
    answers = [app.bet_answer(b.bet_id) for b in batch]
    assert all(a is not None for a in answers)
    book = app.get_book("t1", "c1")
    assert book is not None
    assert book.bet_count == sum(1 for a in answers if a is not None and a.accepted)
