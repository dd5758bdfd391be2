"""Control characters in a bet through the running service, on SQLite and PostgreSQL (whose text
columns refuse NUL): a bet id holding one is not a readable id, a dead letter; a bettor id
holding one is answered INVALID_BETTOR_ID, a text amount INVALID_AMOUNT (the bet id can be read),
never with the character in the answer; a time UTC cannot hold (year 1 at +01:00) is answered
INVALID_ENVELOPE (it once raised an OverflowError that made the consumer read the partition
again, forever); the bets around them in the partition are answered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts import (
    BET_COMMANDS,
    BET_EVENTS,
    DEAD_LETTERS,
    BetAccepted,
    BetRejected,
    DeadLetter,
    PlaceBet,
    encode,
)
from services.settlement.service import build_service
from tests.integration.platform.kafka_tools import send_raw, settings_for
from tests.integration.settlement.test_settlement_kafka import TopicReader, open_for_bets

pytestmark = [pytest.mark.kafka]


def place_bet(table: str, coup: str, bet_id: str, **fields: object) -> bytes:
    """A PlaceBet's JSON with ``fields`` replaced as given (not checked by the contract)."""
    bet = PlaceBet(
        table_id=table,
        bet_id="placeholder",
        coup_id=coup,
        bettor_id="bettor-1",
        bet_type="player",
        amount=100,
        currency="EUR",
    )
    document = {**json.loads(encode(bet)), "bet_id": bet_id, **fields}
    return json.dumps(document).encode()


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_control_character_in_an_id_is_a_dead_letter_and_the_partition_goes_on(
    tmp_path: Path, kafka_bootstrap: str, request: pytest.FixtureRequest, store: str
) -> None:
    postgres = request.getfixturevalue("postgres_env") if store == "postgres" else None
    settings = settings_for("settlement", kafka_bootstrap, data_dir=tmp_path, postgres_env=postgres)
    table, coup = "nul-1", "nul-1.coup-1"
    key = table.encode()
    records = [
        place_bet(table, coup, "before"),
        place_bet(table, coup, "nul\x00id"),  # PostgreSQL's text refuses it
        place_bet(table, coup, "line\nfeed"),
        place_bet(table, coup, "ok-id", bettor_id="bettor\x00x"),
        place_bet(table, coup, "nul-amount", amount="1\x00"),  # answered: INVALID_AMOUNT
        place_bet(table, coup, "year-one", occurred_at="0001-01-01T00:00:00+01:00"),
        place_bet(table, coup, "after"),
    ]
    async with build_service(settings) as host:
        await host.wait_ready()
        async with (
            TopicReader(settings, BET_EVENTS) as bet_events,
            TopicReader(settings, DEAD_LETTERS) as dead_letters,
        ):
            await open_for_bets(settings, table, coup)
            await send_raw(settings, BET_COMMANDS, [(key, value) for value in records])
            await bet_events.wait_until(lambda: len(bet_events.messages) >= 5, timeout=60)
            await dead_letters.wait_until(lambda: len(dead_letters.messages) >= 2, timeout=60)
    answered = {
        m.bet_id: m for m in bet_events.messages if isinstance(m, BetAccepted | BetRejected)
    }
    assert set(answered) == {"before", "ok-id", "nul-amount", "year-one", "after"}
    assert isinstance(answered["before"], BetAccepted)
    assert isinstance(answered["after"], BetAccepted)
    refused = answered["nul-amount"]
    assert isinstance(refused, BetRejected) and refused.reason_code == "INVALID_AMOUNT"
    assert "\x00" not in refused.message and "'1\\x00'" in refused.message
    year_one = answered["year-one"]
    assert isinstance(year_one, BetRejected) and year_one.reason_code == "INVALID_ENVELOPE"
    assert "occurred_at" in year_one.message and "a time UTC can hold" in year_one.message
    bettor = answered["ok-id"]  # its bet id can be read: answered, the bad field named
    assert isinstance(bettor, BetRejected) and bettor.reason_code == "INVALID_BETTOR_ID"
    assert "\x00" not in bettor.bettor_id + bettor.message
    letters = [m for m in dead_letters.messages if isinstance(m, DeadLetter)]
    assert sorted(letter.error.split(": ")[1].split(" ")[0] for letter in letters) == [
        "bet_id",
        "bet_id",
    ], [letter.error for letter in letters]
    assert all("control character" in letter.error for letter in letters)
