"""The consumer on an SQLite store."""

from pathlib import Path

from contracts import (
    BET_COMMANDS,
    PlaceBet,
    encode,
)
from tests.unit.platform.fakes import CounterApp
from tests.unit.platform.test_platform_consumer import CLUSTER, TOPIC_ID, Harness, record, relayed


async def test_pb_headers_on_a_topic_without_owner_are_ignored(tmp_path: Path) -> None:
    """The overflow attack on bet-commands: a position past 2**63 used to rewind forever."""
    env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "s.db")}
    h = Harness(CounterApp(env=env))
    bets = "p." + BET_COMMANDS
    bet = encode(
        PlaceBet(
            table_id="t1",
            bet_id="b1",
            coup_id="c1",
            bettor_id="mallory",
            bet_type="player",
            amount=100,
            currency="EUR",
        )
    )
    forged = relayed("99999999999999999999")
    await h.feed(record(0, bet, forged, topic=bets), record(1, bet, forged, topic=bets))
    assert h.total == 2 and not h.dead_letters()
    name = f"{CLUSTER}:{bets}:{TOPIC_ID}:0"
    assert h.app.tracked_position(name) == 2  # offset + 1
    await h.feed(record(1, bet, forged, topic=bets))  # redelivered: no second effect
    assert h.total == 2 and h.runtime.stats.duplicates == 1
