"""Partition confusion, end to end: a table's history is one partition (murmur2 of its id).

Real Kafka, the three real services as subprocesses, partitioned (``PB_PARTITIONED``: a cell
per partition, each with its own store, relay and positions) or one process reading every
partition. The operator's and the gateway's own principals write a table's commands and bets
to another partition than the table's, or without its key: each gets its answer
(``CommandRejected`` / ``BetRejected``, ``WRONG_PARTITION`` / ``WRONG_KEY``) and nothing
changes; a genuine signed record copied to another partition is a dead letter (its signature
binds its partition) and advances no position there; the tables deal and settle on.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from uuid import uuid4

import pytest

from contracts import (
    BET_COMMANDS,
    TABLE_COMMANDS,
    TABLE_EVENTS,
    BetRejected,
    CloseBetting,
    CloseTable,
    CommandRejected,
    DeadLetter,
    Message,
    OpenTable,
    TableClosed,
    TableOpened,
    encode,
)
from services.dev.demo.processes import ServiceSettings
from services.shared.platform.kafka import table_partition
from tests.e2e.helpers import LIMITS, answers, bet, betting_opened
from tests.e2e.hostile.attacker import HostileSystem, relay_position
from tests.e2e.hostile.play import (
    crowd,
    crowd_goes_on,
    finish,
    play_coup,
    table_apart,
    until,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PARTITIONS = 3
"""The topics' partitions (PB_TOPIC_PARTITIONS of the e2e runs)."""

MODES = pytest.mark.parametrize(
    ("store", "mode"), [("sqlite", "partitioned"), ("sqlite", "one process")], indirect=True
)


@pytest.fixture
def mode(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "partitioned"))


@pytest.fixture
def system_settings(system_settings: ServiceSettings, mode: str) -> ServiceSettings:
    if mode != "partitioned":
        return system_settings
    extra = {**system_settings.extra, "PB_PARTITIONED": "yes"}
    return dataclasses.replace(system_settings, extra=extra)


def refusals(system: HostileSystem, kind: type[Message], ids: set[Any]) -> dict[Any, str]:
    """Command id (CommandRejected) or bet id (BetRejected) -> the reason code, of ``ids``."""
    if kind is CommandRejected:
        return {
            m.command_id: m.reason_code for m in system.seen(CommandRejected) if m.command_id in ids
        }
    return {m.bet_id: m.reason_code for m in system.seen(BetRejected) if m.bet_id in ids}


@MODES
@pytest.mark.timeout(300)
async def test_a_tables_commands_and_bets_in_another_partition_are_refused(
    hostile: HostileSystem, mode: str
) -> None:
    driver, table = await crowd(hostile)
    home = table_partition(table, PARTITIONS)
    elsewhere = (home + 1) % PARTITIONS
    opened = betting_opened(hostile, table)[-1]
    # As the operator: the crowd table's commands, sent to another partition (once made
    # dealing's cell there open, close and reshuffle the table, and skip the genuine cell's
    # facts as duplicates) and without a key.
    reopen = OpenTable(
        table_id=table,
        decks=1,
        limits=LIMITS,
        currency="EUR",
        betting_window_ms=60_000,
        cut_card_from_end=14,
    )
    commands: list[tuple[Message, bytes | None, str]] = [
        (reopen, table.encode(), "WRONG_PARTITION"),
        (CloseTable(table_id=table, reason="forged"), table.encode(), "WRONG_PARTITION"),
        (CloseBetting(table_id=table, coup_id=opened.coup_id), table.encode(), "WRONG_PARTITION"),
        (reopen.model_copy(update={"event_id": uuid4()}), None, "WRONG_KEY"),
        (CloseTable(table_id=table, reason="keyless"), None, "WRONG_KEY"),
    ]
    for command, key, _ in commands:
        target = elsewhere if key is not None else None
        await hostile.sender.send_raw(TABLE_COMMANDS, encode(command), key, partition=target)
    # As the gateway: bets on the crowd's open coup, to another partition and without a key.
    misplaced = bet(table, opened.coup_id, "mallory", "player", 1000)
    keyless = bet(table, opened.coup_id, "mallory", "banker", 1000)
    await hostile.sender.send_raw(
        BET_COMMANDS, encode(misplaced), table.encode(), partition=elsewhere
    )
    await hostile.sender.send_raw(BET_COMMANDS, encode(keyless), None)

    expected = {command.event_id: code for command, _, code in commands}
    bets = {misplaced.bet_id: "WRONG_PARTITION", keyless.bet_id: "WRONG_KEY"}
    await until(
        hostile,
        lambda: (
            refusals(hostile, CommandRejected, set(expected)) == expected
            and refusals(hostile, BetRejected, set(bets)) == bets
        ),
        60,
        f"every misplaced command and bet refused ({mode})",
    )
    assert len(answers(hostile, misplaced.bet_id)) == 1  # refused, never judged
    for rejection in hostile.seen(CommandRejected):
        if rejection.command_id in expected:
            assert "murmur2" in rejection.message, rejection.message
    await crowd_goes_on(hostile, table, 3)
    assert len({m.event_id for m in hostile.seen(TableOpened) if m.table_id == table}) == 1
    assert not [m for m in hostile.seen(TableClosed) if m.table_id == table]
    await finish(hostile, driver)


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
@pytest.mark.timeout(300)
async def test_a_record_copied_from_another_cell_is_refused_and_skips_nothing(
    hostile: HostileSystem,
) -> None:
    """Each cell numbers its records in its own log: dealing's cell of the crowd's partition
    is far ahead of a quiet table's. Its genuine, signed record copied to the quiet table's
    partition is refused (its signature names its partition), so the quiet table's next
    facts are not taken for duplicates: its coups are dealt and settled."""
    driver, crowd_table = await crowd(hostile)
    quiet = await table_apart(hostile, [crowd_table])
    home, other = (table_partition(t, PARTITIONS) for t in (crowd_table, quiet))
    await crowd_goes_on(hostile, crowd_table, 5)
    attacker = hostile.attacker
    await attacker.catch_up()
    latest = attacker.records[(TABLE_EVENTS, home)][-1]
    ahead = relay_position(latest.headers)
    behind = relay_position(attacker.records[(TABLE_EVENTS, other)][-1].headers)
    assert ahead is not None and behind is not None and ahead[1] > behind[1] + 30, (ahead, behind)
    copy = await attacker.send(
        TABLE_EVENTS, latest.value, key=latest.key, headers=latest.headers, partition=other
    )

    def letter() -> list[DeadLetter]:
        return [
            m
            for m in hostile.seen(DeadLetter)
            if m.original_topic == hostile.settings.topic_prefix + TABLE_EVENTS
            and (m.partition, m.offset) == (other, copy.offset)
        ]

    await play_coup(hostile, quiet, 1)  # its facts are not skipped as duplicates
    await play_coup(hostile, quiet, 2)
    await until(hostile, letter, 60, "the copy dead-lettered")
    assert f"signature: signed for partition {home}, not {other}" in letter()[0].error
    await finish(hostile, driver, [quiet])
