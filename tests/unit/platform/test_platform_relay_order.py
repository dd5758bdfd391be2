"""The relay's order within a partition and its markers-first rule, against a fake broker."""

from __future__ import annotations

import logging

import pytest
from aiokafka.errors import InvalidTimestampError, KafkaTimeoutError, UnknownError

from contracts import BET_COMMANDS, DEAD_LETTERS, TABLE_EVENTS, bet_commands_topic
from tests.unit.platform.fakes import CounterApp, popo_env
from tests.unit.platform.relay_fakes import (
    PREFIX,
    FakeBroker,
    Plan,
    close_book,
    closed,
    consumer_view,
    relay_for,
    table_on,
)


async def test_each_partition_has_one_batch_in_flight_and_partitions_go_in_parallel() -> None:
    plan = Plan(CounterApp(env=popo_env()))
    a, b = table_on(0), table_on(1)
    for _ in range(10):
        plan.add(*[closed(a, f"a{i}") for i in range(5)], *[closed(b, f"b{i}") for i in range(5)])
    broker = FakeBroker(batch_capacity=3)
    relay = relay_for(plan, broker)
    await relay.start()
    assert await relay.publish_pending() == 100
    assert broker.most_in_flight_per_partition == 1  # the next batch waits for the ack
    assert broker.most_in_flight == 2  # the two partitions at the same time
    for partition in (0, 1):
        log = broker.logs[(PREFIX + TABLE_EVENTS, partition)]
        assert [r.position for r in log] == sorted(r.position for r in log)
        assert len(log) == 50
    assert plan.app.tracked_position("relay:counter") == 11


async def test_a_failed_batch_stops_its_partition_and_the_retry_leaves_no_gap() -> None:
    """The second batch of partition 0 fails: no later batch of that partition is sent; the
    position stays; the retry publishes again, and a consumer reading by position misses
    nothing in either partition."""
    plan = Plan(CounterApp(env=popo_env()))
    a, b = table_on(0), table_on(1)
    for n in range(6):
        plan.add(closed(a, f"a{n}"), closed(b, f"b{n}"), closed(a, f"a{n}'"))
    topic = PREFIX + TABLE_EVENTS
    broker = FakeBroker(batch_capacity=2)
    broker.fail_at[((topic, 0), 2)] = UnknownError()
    relay = relay_for(plan, broker)
    await relay.start()
    with pytest.raises(UnknownError):
        await relay.publish_pending()
    assert broker.sent[(topic, 0)] == 2  # nothing after the failed batch
    assert len(broker.logs[(topic, 0)]) == 2  # only the first batch of partition 0 went in
    assert plan.app.tracked_position("relay:counter") == 0
    assert len(broker.producers) == 1
    assert await relay.publish_pending() == 18
    assert len(broker.producers) == 2  # a failed batch: the retry starts with a new producer
    for partition in (0, 1):
        log = broker.logs[(topic, partition)]
        expected = sorted({r.position for r in log})
        assert consumer_view(log) == expected
    assert len(consumer_view(broker.logs[(topic, 0)])) == 12


async def test_markers_are_acknowledged_before_the_other_records_of_the_batch() -> None:
    plan = Plan(CounterApp(env=popo_env()))
    a, b = table_on(0), table_on(1)
    for n in range(5):
        # a table event first, the marker second: the relay still sends the marker first
        plan.add(closed(a, f"opened {n}"), close_book(a))
        plan.add(closed(b, f"opened {n}"), close_book(b))
    broker = FakeBroker(batch_capacity=3)
    relay = relay_for(plan, broker)
    await relay.start()
    assert await relay.publish_pending() == 20
    markers = PREFIX + BET_COMMANDS
    marker_acks = [
        n for n, (what, tp, _) in enumerate(broker.journal) if tp[0] == markers and what == "ack"
    ]
    other_sends = [
        n for n, (what, tp, _) in enumerate(broker.journal) if tp[0] != markers and what == "send"
    ]
    assert max(marker_acks) < min(other_sends)
    assert len(broker.appended(markers)) == 10
    # the message index stays the one of the stored event's message list
    assert {r.headers["pb-message-index"] for r in broker.appended(markers)} == {b"1"}
    assert plan.app.tracked_position("relay:counter") == 11


async def test_a_marker_after_streamed_records_opens_the_next_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A big batch streams its records in chunks; a later notification with a marker is
    then not sent after them in the same batch: it starts the next batch, markers first."""
    from services.shared.platform.relay import records as relay_module

    monkeypatch.setattr(relay_module, "CHUNK_MESSAGES", 4)
    plan = Plan(CounterApp(env=popo_env()))
    a = table_on(0)
    plan.add(*[closed(a, f"bet {i}") for i in range(6)])  # notification 2: streamed
    plan.add(closed(a, "next coup"), close_book(a))  # notification 3: has a marker
    plan.add(closed(a, "after"))  # notification 4
    broker = FakeBroker(batch_capacity=2)
    relay = relay_for(plan, broker)
    recorded: list[int] = []
    record_position = plan.app.record_position

    def spy(name: str, notification_id: int) -> None:
        recorded.append(notification_id)
        record_position(name, notification_id)

    plan.app.record_position = spy  # type: ignore[method-assign]
    await relay.start()
    assert await relay.publish_pending() == 9
    assert recorded == [2, 4]  # the first batch ended before notification 3
    markers = PREFIX + BET_COMMANDS
    marker_ack = next(
        n for n, (what, tp, _) in enumerate(broker.journal) if tp[0] == markers and what == "ack"
    )
    later = [
        n
        for n, (what, tp, _) in enumerate(broker.journal)
        if what == "send" and tp[0] != markers and n > marker_ack
    ]
    before = [
        n for n, (what, tp, _) in enumerate(broker.journal) if what == "send" and n < marker_ack
    ]
    assert later  # "next coup" and "after" went after the marker's ack
    log = broker.logs[(PREFIX + TABLE_EVENTS, 0)]
    assert [r.position for r in log] == [(2, i) for i in range(6)] + [(3, 0), (4, 0)]
    assert before


@pytest.mark.parametrize(
    "failure",
    [UnknownError(), InvalidTimestampError(), KafkaTimeoutError()],
    ids=["unknown server error", "timestamp out of range", "timeout"],
)
async def test_a_transient_failure_is_retried_and_quarantines_nothing(
    failure: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    plan = Plan(CounterApp(env=popo_env()))
    a = table_on(0)
    for n in range(3):
        plan.add(closed(a, f"m{n}"))
    broker = FakeBroker(failures=[failure, type(failure)()])
    relay = relay_for(plan, broker)
    await relay.start()
    with caplog.at_level(logging.ERROR):
        for _ in range(2):
            with pytest.raises(type(failure)):
                await relay.publish_pending()
        assert await relay.publish_pending() == 3
    assert relay.quarantined == 0
    assert broker.appended(PREFIX + DEAD_LETTERS) == []
    assert [r.position for r in broker.appended(PREFIX + TABLE_EVENTS)] == [(2, 0), (3, 0), (4, 0)]
    assert "QUARANTINED" not in caplog.text


async def test_a_marker_goes_to_every_operators_topic_before_the_other_records() -> None:
    """Operators (B2B): dealing's marks are written to each configured operator's
    bet-commands topic (same key, value and index), all acknowledged before the rest."""
    from services.shared.platform.relay import OutboxRelay
    from services.shared.platform.settings import Settings

    plan = Plan(CounterApp(env=popo_env()))
    a = table_on(0)
    for n in range(3):
        plan.add(closed(a, f"opened {n}"), close_book(a))
    broker = FakeBroker(batch_capacity=3)
    settings = Settings.from_env(
        "counter", {"PB_TOPIC_PREFIX": PREFIX, "PB_OPERATORS": "acme,bravo"}
    )
    relay = OutboxRelay(plan.app, settings, plan.mapper, producer_factory=broker.producer)
    await relay.start()
    assert await relay.publish_pending() == 9  # 3 table events, 3 marks on each of 2 topics
    topics = [PREFIX + bet_commands_topic(op) for op in ("acme", "bravo")]
    assert not broker.appended(PREFIX + BET_COMMANDS)  # the house is not served here
    copies = [
        [(r.key, r.value, r.headers["pb-message-index"]) for r in broker.appended(t)]
        for t in topics
    ]
    assert len(copies[0]) == 3 and copies[0] == copies[1]
    marker_acks = [
        n for n, (what, tp, _) in enumerate(broker.journal) if tp[0] in topics and what == "ack"
    ]
    other_sends = [
        n
        for n, (what, tp, _) in enumerate(broker.journal)
        if tp[0] not in topics and what == "send"
    ]
    assert max(marker_acks) < min(other_sends)
