"""Hostile timing and replays, end to end: the close race under a flood of bets (also across a
settlement crash), old messages sent again, ids borrowed from other tables and bettors, a
void without a supervisor, a command topic deleted and created again.

Real Kafka, the three real services as subprocesses. The broker's order is the judge of a
bet's time: every PlaceBet appended before dealing's CloseBook mark in the table's partition
is judged on time, every one after it is BETTING_CLOSED, and each answer's ``placed_at`` is
the broker's append time of its record.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError

from contracts import (
    BET_COMMANDS,
    BOOK_EVENTS,
    SHOE_COMMANDS,
    SHOE_EVENTS,
    TABLE_COMMANDS,
    TABLE_EVENTS,
    BetAccepted,
    BetRefunded,
    BetRejected,
    BetsClosed,
    BetSettled,
    CardDrawn,
    CloseBetting,
    CommandRejected,
    CoupSettled,
    CoupVoided,
    OpenTable,
    PlaceBet,
    TableOpened,
    VoidCoup,
)
from services.dev.infra.kafka_clients import ADMIN
from services.shared.platform.consumer.topic_ids import TopicIdReader
from services.shared.platform.settings import Settings
from tests import kafka_logins
from tests.e2e.helpers import LIMITS, answers, bet, betting_opened, supervisor
from tests.e2e.hostile.attacker import INDEX, LOG_APPEND_TIME, HostileSystem, Raw, incidents
from tests.e2e.hostile.play import (
    accepted_all,
    crowd,
    crowd_goes_on,
    finish,
    honest_bets,
    last_answer,
    pause,
    play_coup,
    resolved,
    settled,
    table_apart,
    until,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SQLITE = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


async def flood(
    hostile: HostileSystem, table: str, coup: str, stop: asyncio.Event, sent: list[PlaceBet]
) -> None:
    """Bets on ``coup`` from ever new bettors, 10 every ~10 ms, until ``stop``."""
    while not stop.is_set():
        batch = [bet(table, coup, f"flood-{len(sent) + i}", "tie", 100) for i in range(10)]
        await hostile.sender.send_many(batch)
        await hostile.sender.flush()
        sent.extend(batch)
        await asyncio.sleep(0.01)


def mark(hostile: HostileSystem, table: str, kind: str, coup: str) -> Raw | None:
    """Dealing's OpenBook / CloseBook of ``coup`` in the table's partition of bet-commands."""
    return next(
        (
            raw
            for raw in hostile.attacker.seen(BET_COMMANDS, kind, table.encode())
            if (raw.document() or {}).get("coup_id") == coup
        ),
        None,
    )


@SQLITE
@pytest.mark.timeout(240)
@pytest.mark.parametrize("crash", [False, True], ids=["running", "settlement-killed"])
async def test_every_bet_before_the_close_mark_is_on_time_and_every_one_after_is_late(
    hostile: HostileSystem, crash: bool
) -> None:
    driver, crowd_table = await crowd(hostile)
    table = await table_apart(hostile, [crowd_table])
    opened = betting_opened(hostile, table)[0]
    coup = opened.coup_id
    honest = honest_bets(table, coup)
    await accepted_all(hostile, honest)

    stop, sent = asyncio.Event(), []
    flooding = asyncio.create_task(flood(hostile, table, coup, stop, sent))
    try:
        await until(hostile, lambda: len(sent) >= 200, 60, "200 bets in the flood")
        if crash:
            hostile.kill("settlement")
        await until(hostile, lambda: len(sent) >= 400, 60, "400 bets", watch=not crash)
        await hostile.sender.send_now(CloseBetting(table_id=table, coup_id=coup))
        await until(
            hostile, lambda: mark(hostile, table, "CloseBook", coup), 30, "the close", watch=False
        )
        closing = len(sent)
        await until(hostile, lambda: len(sent) >= closing + 200, 60, "200 more", watch=False)
    finally:
        stop.set()
        await flooding
    if crash:
        await hostile.restart("settlement")
    await until(
        hostile, lambda: all(answers(hostile, b.bet_id) for b in sent), 120, "every flood answer"
    )

    await hostile.attacker.catch_up()
    close = mark(hostile, table, "CloseBook", coup)
    book = mark(hostile, table, "OpenBook", coup)
    assert close is not None and book is not None and close.timestamp_type == LOG_APPEND_TIME
    closed_at = datetime.fromtimestamp(close.timestamp / 1000, UTC)
    records = {
        (raw.document() or {}).get("bet_id"): raw
        for raw in hostile.attacker.seen(BET_COMMANDS, "PlaceBet", table.encode())
    }
    on_time, late = [], []
    for command in sent:
        record = records[command.bet_id]
        [answer] = {m.event_id: m for m in answers(hostile, command.bet_id)}.values()
        assert answer.placed_at == datetime.fromtimestamp(record.timestamp / 1000, UTC), (
            "placed_at is not the broker's append time"
        )
        assert record.offset > book.offset
        if record.offset < close.offset:
            assert isinstance(answer, BetAccepted), (record.offset, close.offset, answer)
            assert answer.placed_at is not None and answer.placed_at <= closed_at
            on_time.append(answer)
        else:
            assert isinstance(answer, BetRejected), (record.offset, close.offset, answer)
            assert answer.reason_code == "BETTING_CLOSED", answer
            assert answer.placed_at is not None and answer.placed_at >= closed_at
            late.append(answer)
    assert on_time and late, (len(on_time), len(late))
    await until(hostile, lambda: settled(hostile, coup), 60, "the coup settled")
    [closed] = {m.event_id: m for m in hostile.seen(BetsClosed) if m.coup_id == coup}.values()
    assert closed.bets == len(on_time) + len(honest)
    assert closed.staked == sum(a.amount for a in on_time) + sum(int(b.amount) for b in honest)
    await play_coup(hostile, table, 2)
    await crowd_goes_on(hostile, crowd_table)
    await finish(hostile, driver, [table])


@SQLITE
@pytest.mark.timeout(180)
async def test_replayed_messages_have_no_second_effect(hostile: HostileSystem) -> None:
    """Old records sent again, byte for byte (their relay headers too) or with new relay
    headers past the owner's last one: no second bet, card, settlement or refund (the signed
    void sent again is refused as a replay)."""
    driver, crowd_table = await crowd(hostile)
    table = await table_apart(hostile, [crowd_table])
    first = await play_coup(hostile, table, 1)
    await until(hostile, lambda: coup_started(hostile, table, 2), 60, "coup 2")
    second = betting_opened(hostile, table)[1]
    voided = honest_bets(table, second.coup_id)
    await accepted_all(hostile, voided)
    void = supervisor(hostile).void(table, second.coup_id, "test")
    await hostile.sender.send_now(void)
    await until(
        hostile,
        lambda: {b.bet_id for b in voided} <= {m.bet_id for m in hostile.seen(BetRefunded)},
        60,
        "the void refunded",
    )
    await hostile.attacker.catch_up()
    key = table.encode()

    def effects() -> dict[str, int]:
        kinds = (BetAccepted, BetSettled, CoupSettled, BetRefunded, CoupVoided, CardDrawn)
        return {
            kind.__name__: len(
                {m.event_id for m in hostile.seen(kind) if getattr(m, "table_id", None) == table}
            )
            for kind in kinds
        }

    before = effects()
    replayed = 0
    for topic in (BET_COMMANDS, TABLE_COMMANDS, TABLE_EVENTS, SHOE_EVENTS, BOOK_EVENTS):
        for raw in hostile.attacker.seen(topic, key=key):
            await hostile.attacker.send(topic, raw.value, key=raw.key, headers=raw.headers)
            replayed += 1
    for topic in (TABLE_EVENTS, SHOE_EVENTS, BOOK_EVENTS, SHOE_COMMANDS):
        for raw in hostile.attacker.seen(topic, key=key):
            kind = raw.type_name or "?"
            if kind in ("TableOpened", "BettingOpened") or raw.header(INDEX) is None:
                continue  # what opens a coup again is not a replay of the past
            headers = await hostile.attacker.relay_headers(topic, kind)
            await hostile.attacker.send(topic, raw.value, key=raw.key, headers=headers)
            replayed += 1
    assert replayed > 50
    await hostile.sender.send_now(void)  # the signed void again (table-commands is not spied)

    def replays() -> list[CommandRejected]:
        return [m for m in hostile.seen(CommandRejected) if m.command_id == void.event_id]

    # Dealing reaches the void behind the replayed records; then a while for any second effect.
    await until(hostile, replays, 60, "the void sent again refused")
    await pause(hostile, 5.0)
    assert effects() == before
    assert {m.reason_code for m in replays()} == {"AUTHORIZATION_REPLAYED"}, replays()
    assert not [i for i in incidents(hostile) if i.table_id == table], incidents(hostile)
    assert len({m.event_id for m in hostile.seen(CoupSettled) if m.coup_id == first.coup_id}) == 1
    await play_coup(hostile, table, 3)
    await crowd_goes_on(hostile, crowd_table)
    await finish(hostile, driver, [table])


def coup_started(hostile: HostileSystem, table: str, number: int) -> bool:
    return len(betting_opened(hostile, table)) >= number


@SQLITE
@pytest.mark.timeout(180)
async def test_borrowed_ids_and_an_unsupervised_void_are_refused(hostile: HostileSystem) -> None:
    driver, crowd_table = await crowd(hostile, betting_window_ms=2000)
    table = await table_apart(hostile, [crowd_table])
    opened = betting_opened(hostile, table)[0]
    coup = opened.coup_id
    honest = honest_bets(table, coup)
    await accepted_all(hostile, honest)
    victim = honest[1]

    crowd_coup = betting_opened(hostile, crowd_table)[-1].coup_id
    other_tables = [
        bet(table, crowd_coup, "mallory", "banker", 1000),  # another table's coup
        bet(crowd_table, coup, "mallory", "banker", 1000),  # this coup at another table
    ]
    stolen = victim.model_copy(
        update={"event_id": uuid.uuid4(), "bettor_id": "mallory", "amount": 100_000}
    )
    same_again = victim.model_copy(update={"event_id": uuid.uuid4()})
    miskeyed = bet(table, coup, "frank", "tie", 700)
    for command in other_tables:
        await hostile.sender.send_now(command)
    await hostile.sender.send_now(stolen)
    await hostile.sender.send_now(same_again)
    await hostile.attacker.send(BET_COMMANDS, encode_bet(miskeyed), key=crowd_table.encode())
    unsupervised = [
        VoidCoup(table_id=table, coup_id=coup, reason="no supervisor"),
        VoidCoup(table_id=table, coup_id=coup, supervisor_id="   ", reason="blank supervisor"),
    ]
    for void in unsupervised:
        await hostile.sender.send_now(void)
    await until(
        hostile,
        lambda: (
            {v.event_id for v in unsupervised}
            <= {m.command_id for m in hostile.seen(CommandRejected)}
            and any(m.reason_code == "DUPLICATE_BET_ID" for m in rejections(hostile, victim.bet_id))
            and answers(hostile, miskeyed.bet_id)
            and all(answers(hostile, b.bet_id) for b in other_tables)
        ),
        60,
        "the refusals",
    )
    for command in other_tables:
        answer = last_answer(hostile, command.bet_id)
        assert isinstance(answer, BetRejected) and answer.reason_code == "NO_SUCH_COUP", answer
    for void in unsupervised:
        [rejected] = [m for m in hostile.seen(CommandRejected) if m.command_id == void.event_id]
        assert rejected.reason_code == "SUPERVISOR_REQUIRED", rejected
    assert not [m for m in hostile.seen(CoupVoided) if m.coup_id == coup]
    assert isinstance(last_answer(hostile, miskeyed.bet_id), BetAccepted | BetRejected)

    await hostile.sender.send_now(CloseBetting(table_id=table, coup_id=coup))
    await until(hostile, lambda: settled(hostile, coup), 60, "the coup settled")
    [settlement] = {
        m.event_id: m for m in hostile.seen(BetSettled) if m.bet_id == victim.bet_id
    }.values()
    assert (settlement.bettor_id, settlement.stake) == (victim.bettor_id, int(victim.amount))
    await play_coup(hostile, table, 2)
    await crowd_goes_on(hostile, crowd_table)
    await finish(hostile, driver, [table])


def rejections(hostile: HostileSystem, bet_id: str) -> list[BetRejected]:
    return [m for m in hostile.seen(BetRejected) if m.bet_id == bet_id]


def encode_bet(command: PlaceBet) -> bytes:
    return command.model_dump_json().encode()


@SQLITE
@pytest.mark.timeout(180)
async def test_a_command_topic_deleted_and_created_again_is_read_from_its_start(
    hostile: HostileSystem,
) -> None:
    """Offsets name a place in ONE log: after table-commands is deleted and created again, its
    first commands must not be taken for the old topic's handled ones."""
    driver, crowd_table = await crowd(hostile)
    for index in range(20):  # move the old topic's offsets on, in every partition
        await hostile.sender.send(
            CloseBetting(table_id=f"ghost-{index}", coup_id=f"ghost-{index}.coup-1")
        )
    await hostile.sender.flush()
    await until(
        hostile,
        lambda: len({m.table_id for m in hostile.seen(CommandRejected)}) >= 20,
        60,
        "the old topic's commands handled",
    )
    topic = hostile.settings.topic_prefix + TABLE_COMMANDS
    await _delete_and_create_again(hostile.settings.bootstrap, topic, 3)

    table = f"reborn-{uuid.uuid4().hex[:8]}"
    await hostile.sender.send_now(
        OpenTable(
            table_id=table,
            decks=1,
            limits=LIMITS,
            currency="EUR",
            betting_window_ms=60_000,
            cut_card_from_end=14,
        )
    )
    await until(
        hostile,
        lambda: any(m.table_id == table for m in hostile.seen(TableOpened)),
        90,
        "the table opened by the new topic's first command",
    )
    await play_coup(hostile, table, 1)
    await crowd_goes_on(hostile, crowd_table)
    assert resolved(hostile, table)
    await finish(hostile, driver, [table])


async def _delete_and_create_again(bootstrap: str, topic: str, partitions: int) -> None:
    """Delete ``topic`` and create it again; return once the broker serves the NEW topic (a
    new topic id, every partition led). A create may time out on a loaded broker yet be
    done, or be refused while the old topic is still being deleted; and a topic the
    controller made is served a moment later: a producer sending before that gets
    UnknownTopicOrPartition until its send times out (seen once on a loaded machine)); and
    where the broker creates topics on a client's metadata request, a consumer may make it
    first, with one partition."""
    env = {"KAFKA_BOOTSTRAP_SERVERS": bootstrap, **kafka_logins.env(ADMIN)}
    ids = TopicIdReader(Settings.from_env("dealing", env))
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **kafka_logins.options())
    await ids.start()
    await admin.start()
    try:
        old_id = (await ids.topic_ids([topic]))[topic]
        await admin.delete_topics([topic])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 90
        described: object = None
        while True:
            with contextlib.suppress(KafkaError, TimeoutError):
                # aiokafka does not raise a topic's error (e.g. "marked for deletion"): the
                # answer is read below, from the broker's metadata.
                await admin.create_topics([NewTopic(topic, partitions, 1)])
            current = (await ids.describe([topic])).topic_ids.get(topic)
            if current not in (None, old_id) and await _served(admin, topic, partitions):
                return
            with contextlib.suppress(KafkaError, TimeoutError):
                described = await admin.describe_topics([topic])
                if current not in (None, old_id) and _partitions(described, topic) != partitions:
                    # A client's metadata request made it first (a broker with
                    # auto.create.topics.enable), with the broker's default partitions:
                    # not the topic this test means. Delete it and try again.
                    await admin.delete_topics([topic])
            assert loop.time() < deadline, (
                f"{topic} was not served again (id {current}, old {old_id}): {described}"
            )
            await asyncio.sleep(0.5)
    finally:
        with contextlib.suppress(Exception):
            await admin.close()
        await ids.close()


def _partitions(described: list[dict[str, Any]], topic: str) -> int | None:
    """How many partitions ``topic`` has in a describe_topics answer (None: not there)."""
    for entry in described:
        if entry["topic"] == topic and entry["error_code"] == 0:
            return len(entry["partitions"])
    return None


async def _served(admin: AIOKafkaAdminClient, topic: str, partitions: int) -> bool:
    """True once the broker's metadata has ``topic`` with each partition led."""
    try:
        described = await admin.describe_topics([topic])
    except (KafkaError, TimeoutError):
        return False
    return any(
        entry["topic"] == topic
        and entry["error_code"] == 0
        and len(entry["partitions"]) == partitions
        and all(partition["leader"] >= 0 for partition in entry["partitions"])
        for entry in described
    )
