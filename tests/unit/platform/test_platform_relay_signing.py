"""The relay signs what it publishes where a reader needs to know who wrote it: every record
for an owned topic a service reads, and the marks on bet-commands (fake broker, relay_fakes)."""

from __future__ import annotations

from typing import Any

from contracts import (
    BET_COMMANDS,
    BET_EVENTS,
    DEAD_LETTERS,
    TABLE_EVENTS,
    BetSettled,
    Message,
)
from services.shared.platform.kafka import key_partition
from services.shared.platform.relay import SIGNED_TOPICS, envelope
from services.shared.platform.security import Where, verify
from tests.unit.platform.fakes import CounterApp, popo_env
from tests.unit.platform.keys_fakes import KEYRING, SIGNERS
from tests.unit.platform.relay_fakes import (
    PREFIX,
    Appended,
    FakeBroker,
    Maker,
    Plan,
    close_book,
    closed,
    relay_for,
    table_on,
)


def settled(table: str) -> Maker:
    def make(event: Any, index: int) -> Message:
        return BetSettled(
            **envelope(event, index),
            table_id=table,
            bet_id=f"b{index}",
            coup_id="c1",
            bettor_id="x",
            bet_type="player",
            result="WIN",
            stake=100,
            payout=100,
            returned=200,
            currency="EUR",
        )

    return make


def verified(record: Appended, topic: str, partition: int | None = None) -> str | None:
    """Why ``record`` does not verify as dealing's, read in ``topic`` (logical) and
    ``partition`` (its own unless given), on the relay's cluster ("" with a fake broker)."""
    where = Where("", PREFIX + topic, record.partition if partition is None else partition)
    return verify(
        KEYRING,
        "dealing",
        where,
        record.key,
        record.value,
        int(record.headers["pb-notification-id"]),
        int(record.headers["pb-message-index"]),
        record.headers.get("pb-sig"),
    )


async def test_owned_topics_and_marks_are_signed_for_their_place_key_and_position() -> None:
    plan = Plan(CounterApp(env=popo_env()))
    plan.add(closed("t1", "a"), close_book("t1"), closed("t2", "b"))
    plan.add(settled("t1"), settled("t1"))
    broker = FakeBroker()
    relay = relay_for(plan, broker, signer=SIGNERS["dealing"])
    await relay.start()
    assert await relay.publish_pending() == 5
    events, marks = broker.appended(PREFIX + TABLE_EVENTS), broker.appended(PREFIX + BET_COMMANDS)
    assert len(events) == 2 and len(marks) == 1
    for record in events:
        assert record.partition == key_partition(record.key or b"", broker.partitions)
        assert verified(record, TABLE_EVENTS) is None
        assert "signed for topic" in str(verified(record, BET_COMMANDS))
        elsewhere = 1 - record.partition
        assert f"signed for partition {record.partition}" in str(
            verified(record, TABLE_EVENTS, elsewhere)
        )
    assert verified(marks[0], BET_COMMANDS) is None
    assert list(marks[0].headers)[:4] == [
        "pb-source",
        "pb-notification-id",
        "pb-message-index",
        "pb-type",
    ]
    # bet-events (owned, read by no service: 10,000 BetSettled a coup) is not signed by default
    assert BET_EVENTS not in SIGNED_TOPICS
    assert all("pb-sig" not in r.headers for r in broker.appended(PREFIX + BET_EVENTS))


async def test_a_cell_writes_the_topics_services_read_in_its_own_partition_only() -> None:
    """A partition cell signs and writes table-events and the marks in its partition, whatever
    the key (its answer about another partition's table goes back where the command was read);
    what no service reads (bet-events) goes where its key sends it."""
    plan = Plan(CounterApp(env=popo_env()))
    mine, other = table_on(1), table_on(0)
    plan.add(closed(mine, "a"), closed(other, "b"), close_book(other), settled(other))
    broker = FakeBroker()
    relay = relay_for(plan, broker, cell=1, signer=SIGNERS["dealing"])
    await relay.start()
    assert await relay.publish_pending() == 4
    written = [*broker.appended(PREFIX + TABLE_EVENTS), *broker.appended(PREFIX + BET_COMMANDS)]
    assert [r.partition for r in written] == [1, 1, 1]
    assert [verified(r, r.topic.removeprefix(PREFIX)) for r in written] == [None] * 3
    [bet] = broker.appended(PREFIX + BET_EVENTS)
    assert bet.partition == 0


async def test_bet_events_are_signed_when_asked() -> None:
    plan = Plan(CounterApp(env=popo_env()))
    plan.add(settled("t1"), settled("t1"))
    broker = FakeBroker()
    signed = SIGNED_TOPICS | {BET_EVENTS}
    relay = relay_for(plan, broker, signer=SIGNERS["dealing"], signed_topics=signed)
    await relay.start()
    assert await relay.publish_pending() == 2
    assert [verified(r, BET_EVENTS) for r in broker.appended(PREFIX + BET_EVENTS)] == [None, None]


async def test_without_a_signer_nothing_is_signed() -> None:
    plan = Plan(CounterApp(env=popo_env()))
    plan.add(closed("t1", "a"))
    broker = FakeBroker()
    relay = relay_for(plan, broker)
    await relay.start()
    assert await relay.publish_pending() == 1
    assert "pb-sig" not in broker.appended(PREFIX + TABLE_EVENTS)[0].headers


async def test_a_record_too_large_with_its_signature_is_quarantined_unsigned() -> None:
    plan = Plan(CounterApp(env=popo_env()))
    plan.add(closed("t1", "x" * 900))
    broker = FakeBroker()
    relay = relay_for(plan, broker, signer=SIGNERS["dealing"])
    await relay.start()
    # Fits without its signature (about 300 bytes), not with it.
    unsigned = relay_for(plan, FakeBroker())
    await unsigned.start()
    chunks = unsigned.encoder.chunks(unsigned._read_events(0), [0])
    (record,) = [r async for c in chunks for r in c.others]
    relay.encoder.max_record_bytes = record.size + 100
    assert await relay.publish_pending() == 1
    assert not broker.appended(PREFIX + TABLE_EVENTS)
    (quarantine,) = broker.appended(PREFIX + DEAD_LETTERS)
    assert "pb-sig" not in quarantine.headers  # dead letters are nobody's own topic
