"""The dashboard runs for weeks: what it keeps per table stays bounded, its totals do not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from contracts import (
    BetAccepted,
    BetLimitSpec,
    BetSettled,
    BettingOpened,
    CoupResolved,
    CoupSettled,
    Message,
    ShoeShuffled,
    TableOpened,
)
from services.tools.dashboard.model import COUPS_KEPT, DashboardModel
from services.tools.dashboard.panels import SHOES_KEPT

T = "table-1"
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def coup_messages(number: int) -> list[Message]:
    coup_id, shoe_id = f"c{number}", f"s{number // 50}"
    at = T0 + timedelta(seconds=number)
    messages: list[Message] = []
    if number % 50 == 0:
        messages.append(
            ShoeShuffled(
                table_id=T,
                shoe_id=shoe_id,
                decks=8,
                card_count=416,
                commitment="0" * 64,
                commitment_scheme="sha256",
                cut_card_index=400,
            )
        )
    messages.append(
        BettingOpened(
            table_id=T,
            coup_id=coup_id,
            coup_number=number + 1,
            shoe_id=shoe_id,
            closes_at=at,
            last_of_shoe=False,
        )
    )
    messages.append(
        BetAccepted(
            table_id=T,
            bet_id=f"b{number}",
            coup_id=coup_id,
            bettor_id="x",
            bet_type="player",
            amount=1000,
            currency="EUR",
        )
    )
    messages.append(
        CoupResolved(
            occurred_at=at,
            table_id=T,
            coup_id=coup_id,
            coup_number=number + 1,
            shoe_id=shoe_id,
            player_cards=["8S", "KD"],
            banker_cards=["3H", "4C"],
            player_total=8,
            banker_total=7,
            outcome="PLAYER",
            natural=True,
            player_pair=False,
            banker_pair=False,
        )
    )
    messages.append(
        BetSettled(
            table_id=T,
            bet_id=f"b{number}",
            coup_id=coup_id,
            bettor_id="x",
            bet_type="player",
            result="WIN",
            stake=1000,
            payout=1000,
            returned=2000,
            currency="EUR",
        )
    )
    messages.append(
        CoupSettled(
            table_id=T,
            coup_id=coup_id,
            bets=1,
            staked=1000,
            paid=2000,
            house_result=-1000,
            currency="EUR",
        )
    )
    return messages


def test_the_views_keep_the_last_coups_and_shoes_of_a_table_and_the_totals_all() -> None:
    model = DashboardModel(clock=lambda: T0.timestamp())
    model.apply(
        TableOpened(
            table_id=T,
            decks=8,
            paytable="standard",
            limits={"player": BetLimitSpec(minimum=100, maximum=10_000)},
            currency="EUR",
            betting_window_ms=1000,
            cut_card_from_end=16,
        )
    )
    coups = 2 * COUPS_KEPT + 7
    for number in range(coups):
        for message in coup_messages(number):
            model.apply(message)
    history = model.history
    assert len(history.coups) == COUPS_KEPT
    assert len(history.books) == COUPS_KEPT
    assert len(history.tables[T].coups) == COUPS_KEPT
    assert len(history.shoes) <= SHOES_KEPT
    assert len(model.tables[T].settled_bets) <= COUPS_KEPT
    [table] = model.snapshot()["tables"]
    assert table["coups_resolved"] == coups
    assert (table["staked"], table["paid"]) == (1000 * coups, 2000 * coups)
    assert table["coup"]["coup_id"] == f"c{coups - 1}" and table["coup"]["phase"] == "settled"
    assert len(table["roads"]["bead_plate"]) == coups % 50  # the coups of the shoe in play


def test_the_event_ids_kept_for_redeliveries_are_bounded() -> None:
    model = DashboardModel(clock=lambda: T0.timestamp())
    model.feed.seen.limit = 50
    for number in range(40):
        for message in coup_messages(number):
            model.apply(message)
    assert len(model.feed.seen) == 50
