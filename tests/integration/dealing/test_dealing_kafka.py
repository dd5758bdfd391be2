"""Dealing with the real shoe over real Kafka: a whole shoe, a restart mid-shoe, the reveal.

Settlement runs too: dealing asks for a coup's cards only on its BetsClosed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts import (
    BOOK_EVENTS,
    SHOE_EVENTS,
    TABLE_COMMANDS,
    TABLE_EVENTS,
    BetsClosed,
    BettingClosed,
    BettingOpened,
    CardDealt,
    CardDrawn,
    CloseTable,
    CoupResolved,
    ShoeClosed,
    TableClosed,
)
from services.dealing.service import build_service as build_dealing
from services.settlement.service import build_service as build_settlement
from services.shared.rules.cards import Card
from services.shared.rules.shoe import verify_commitment
from services.shared.rules.tableau import resolve_coup
from services.shoe.service import build_service as build_shoe
from tests.integration.platform.kafka_tools import send_messages, settings_for
from tests.integration.settlement.test_settlement_kafka import TopicReader, table_command

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_shoe_is_dealt_across_a_restart_and_matches_the_reveal(
    tmp_path: Path, kafka_bootstrap: str, request: pytest.FixtureRequest, store: str
) -> None:
    postgres = request.getfixturevalue("postgres_env") if store == "postgres" else None
    dealing_settings = settings_for(
        "dealing", kafka_bootstrap, data_dir=tmp_path, postgres_env=postgres
    )
    prefix = dealing_settings.topic_prefix.rstrip(".")
    shoe_settings = settings_for(
        "shoe", kafka_bootstrap, data_dir=tmp_path, postgres_env=postgres, prefix=prefix
    )
    settlement_settings = settings_for(
        "settlement", kafka_bootstrap, data_dir=tmp_path, postgres_env=postgres, prefix=prefix
    )
    async with (
        build_shoe(shoe_settings) as shoe,
        build_settlement(settlement_settings) as settlement,
    ):
        await shoe.wait_ready()
        await settlement.wait_ready()
        async with (
            TopicReader(dealing_settings, TABLE_EVENTS) as table_events,
            TopicReader(dealing_settings, SHOE_EVENTS) as shoe_events,
            TopicReader(dealing_settings, BOOK_EVENTS) as book_events,
        ):
            async with build_dealing(dealing_settings) as dealing:
                await dealing.wait_ready()
                await send_messages(
                    dealing_settings,
                    TABLE_COMMANDS,
                    [table_command(betting_window_ms=50, cut_card_from_end=14)],
                )
                await table_events.wait_until(lambda: len(table_events.of_type(CoupResolved)) >= 3)
            # Dealing stopped (mid-coup, most likely); a new instance on the same store goes on.
            async with build_dealing(dealing_settings) as dealing:
                await dealing.wait_ready()
                await shoe_events.wait_until(lambda: shoe_events.of_type(ShoeClosed) != [], 120)
                await send_messages(
                    dealing_settings, TABLE_COMMANDS, [CloseTable(table_id="vip-1")]
                )
                await table_events.wait_until(lambda: table_events.of_type(TableClosed) != [], 60)

    reveal = shoe_events.of_type(ShoeClosed)[0]
    order = [Card.parse(c) for c in reveal.order]
    assert verify_commitment(order, bytes.fromhex(reveal.salt), reveal.commitment)
    shoe_id = reveal.shoe_id
    dealt = {(m.coup_id, m.position): m for m in table_events.of_type(CardDealt)}  # dedupe
    for card in dealt.values():
        if card.shoe_id == shoe_id:
            assert reveal.order[card.position] == card.card
    drawn = [m for m in shoe_events.of_type(CardDrawn) if m.shoe_id == shoe_id]
    for draw in drawn:
        assert reveal.order[draw.position] == draw.card
    resolved = {m.coup_id: m for m in table_events.of_type(CoupResolved) if m.shoe_id == shoe_id}
    for coup_id, coup in resolved.items():
        cards = sorted(
            (m for m in dealt.values() if m.coup_id == coup_id), key=lambda m: m.position
        )
        result = resolve_coup([Card.parse(m.card) for m in cards])
        assert result.outcome.value == coup.outcome
        assert [c.code for c in result.player] == coup.player_cards
    opened = {m.coup_id: m for m in table_events.of_type(BettingOpened) if m.shoe_id == shoe_id}
    numbers = sorted(m.coup_number for m in opened.values())
    assert numbers == list(range(1, len(numbers) + 1))
    last = [m for m in opened.values() if m.last_of_shoe]
    assert len(last) == 1 and last[0].coup_number == numbers[-1]
    assert set(resolved) == set(opened)  # every coup of the shoe was resolved
    # Every coup dealt was dealt after settlement closed its book.
    books_closed = {m.coup_id for m in book_events.of_type(BetsClosed)}
    assert set(resolved) <= books_closed
    assert books_closed <= {m.coup_id for m in table_events.of_type(BettingClosed)}
