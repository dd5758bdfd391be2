"""Messages the broker can never take are quarantined, and the relay goes on (fake broker)."""

from __future__ import annotations

import hashlib
import logging

import aiokafka.errors
import pytest
from aiokafka.errors import CorruptRecordException, UnknownError

from contracts import DEAD_LETTERS, TABLE_EVENTS, MessageQuarantined, decode, encode
from services.shared.platform.relay.records import REFUSALS, InvalidRecordError
from tests.unit.platform.fakes import CounterApp, popo_env
from tests.unit.platform.relay_fakes import (
    PREFIX,
    FakeBroker,
    Plan,
    close_book,
    closed,
    relay_for,
    table_on,
)

EVENTS = PREFIX + TABLE_EVENTS
DEAD = PREFIX + DEAD_LETTERS


def quarantine_records(broker: FakeBroker) -> list[MessageQuarantined]:
    found = []
    for record in broker.appended(DEAD):
        message = decode(DEAD_LETTERS, record.value)
        assert isinstance(message, MessageQuarantined)
        found.append(message)
    return found


async def test_a_message_too_large_to_send_is_quarantined_before_sending(
    caplog: pytest.LogCaptureFixture,
) -> None:
    plan = Plan(CounterApp(env=popo_env()))
    a = table_on(0)
    plan.add(closed(a, "before"))
    plan.add(closed(a, "x" * 1_100_000, unchecked=True), closed(a, "beside"))  # > 1 MiB
    plan.add(closed(a, "after"))
    broker = FakeBroker()
    relay = relay_for(plan, broker)
    hooked: list[MessageQuarantined] = []
    relay.on_quarantined = hooked.extend
    published: list[str] = []
    relay.on_published = lambda messages: published.extend(m.type for m in messages)
    await relay.start()
    with caplog.at_level(logging.ERROR):
        assert await relay.publish_pending() == 4  # 3 messages + 1 quarantine record
    log = broker.logs[(EVENTS, 0)]
    assert [r.position for r in log] == [(2, 0), (3, 1), (4, 0)]  # in order, around the gap
    assert all(len(r.value) < 10_000 for batch in broker.logs.values() for r in batch)
    (quarantined,) = quarantine_records(broker)
    (record,) = broker.appended(DEAD)
    assert record.key == a.encode()  # the original's key
    assert record.headers["pb-source"] == b"counter"
    assert record.headers["pb-notification-id"] == b"3"
    assert record.headers["pb-message-index"] == b"0"
    assert record.headers["pb-type"] == b"MessageQuarantined"
    (notification,) = plan.app.process_recorder.select_notifications(start=3, limit=1)
    big = plan.mapper(plan.app.mapper.to_domain_event(notification))[0]
    value = encode(big)
    assert quarantined.message_type == "TableClosed"
    assert quarantined.message_id == big.event_id
    assert (quarantined.notification_id, quarantined.message_index) == (3, 0)
    assert quarantined.size == len(value)
    assert quarantined.sha256 == hashlib.sha256(value).hexdigest()
    assert quarantined.original_topic == EVENTS
    assert quarantined.table_id == a
    assert quarantined.service == "counter"
    assert "1048576" in quarantined.reason
    assert relay.quarantined == 1
    assert hooked == [quarantined]
    assert published.count("MessageQuarantined") == 1 and published.count("TableClosed") == 3
    assert "QUARANTINED TableClosed" in caplog.text
    assert broker.refusals == 0  # decided before sending
    assert plan.app.tracked_position("relay:counter") == 4


async def test_the_quarantine_record_is_the_same_when_published_again() -> None:
    plan = Plan(CounterApp(env=popo_env()))
    plan.add(closed(table_on(0), "x" * 1_100_000, unchecked=True))
    first, second = FakeBroker(), FakeBroker()
    relay = relay_for(plan, first)
    await relay.start()
    await relay.publish_pending()
    plan.app.record_position("again", 0)
    again = relay_for(plan, second)
    again.tracking_name = "again"
    await again.start()
    await again.publish_pending()
    assert [r.value for r in first.appended(DEAD)] == [r.value for r in second.appended(DEAD)]


async def test_a_batch_refused_as_too_large_is_split_and_only_the_refused_record_quarantined(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The topic takes batches of at most 1,000 bytes: the first batch (4 records) is refused;
    the relay replaces its producer, sends them one by one, quarantines the one refused alone,
    and from then on builds batches no larger than the topic accepted."""
    plan = Plan(CounterApp(env=popo_env()))
    a = table_on(0)
    plan.add(closed(a, "m0"), closed(a, "m1"), closed(a, "y" * 900), closed(a, "m3"))
    broker = FakeBroker(batch_capacity=4, max_message_bytes={EVENTS: 1_000})
    relay = relay_for(plan, broker)
    await relay.start()
    with caplog.at_level(logging.WARNING):
        assert await relay.publish_pending() == 4
    assert [r.position for r in broker.logs[(EVENTS, 0)]] == [(2, 0), (2, 1), (2, 3)]
    (quarantined,) = quarantine_records(broker)
    assert (quarantined.notification_id, quarantined.message_index) == (2, 2)
    assert "MessageSizeTooLargeError" in quarantined.reason
    assert relay.quarantined == 1
    assert broker.refusals == 2  # the batch of 4, then the large record alone
    assert len(broker.producers) == 3  # a new producer after each refusal
    assert all(p.stopped for p in broker.producers[:-1])
    # later batches stay within what the topic accepted: no refusal any more
    for n in range(3):
        plan.add(*[closed(a, f"later {n}.{i}") for i in range(6)])
    assert await relay.publish_pending() == 18
    assert broker.refusals == 2
    assert len(broker.logs[(EVENTS, 0)]) == 3 + 18
    log = broker.logs[(EVENTS, 0)]
    assert [r.position for r in log] == sorted(r.position for r in log)


async def test_an_invalid_record_refused_by_the_broker_is_quarantined() -> None:
    plan = Plan(CounterApp(env=popo_env()))
    a, b = table_on(0), table_on(1)
    plan.add(closed(a, "fine"), closed(a, "poison"), closed(b, "other partition"))
    plan.add(closed(a, "after"))
    broker = FakeBroker(invalid=lambda value: b"poison" in value)
    relay = relay_for(plan, broker)
    await relay.start()
    assert await relay.publish_pending() == 4
    assert [r.position for r in broker.logs[(EVENTS, 0)]] == [(2, 0), (3, 0)]
    assert [r.position for r in broker.logs[(EVENTS, 1)]] == [(2, 2)]
    (quarantined,) = quarantine_records(broker)
    assert (quarantined.notification_id, quarantined.message_index) == (2, 1)
    assert "InvalidRecordError" in quarantined.reason


async def test_a_marker_the_broker_refuses_is_quarantined_and_the_batch_goes_on() -> None:
    plan = Plan(CounterApp(env=popo_env()))
    a = table_on(0)
    plan.add(closed(a, "opened"), close_book(a))
    broker = FakeBroker(invalid=lambda value: value.startswith(b'{"type":"CloseBook"'))
    relay = relay_for(plan, broker)
    await relay.start()
    assert await relay.publish_pending() == 2
    (quarantined,) = quarantine_records(broker)
    assert quarantined.message_type == "CloseBook"
    assert [r.position for r in broker.logs[(EVENTS, 0)]] == [(2, 0)]


async def test_a_refused_quarantine_record_is_logged_and_the_relay_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    plan = Plan(CounterApp(env=popo_env()))
    a = table_on(0)
    plan.add(closed(a, "x" * 1_100_000, unchecked=True), closed(a, "after"))
    broker = FakeBroker(max_message_bytes={DEAD: 100})
    relay = relay_for(plan, broker)
    await relay.start()
    with caplog.at_level(logging.ERROR):
        assert await relay.publish_pending() == 1
    assert [r.position for r in broker.logs[(EVENTS, 0)]] == [(2, 1)]
    assert broker.appended(DEAD) == []
    assert "stays only in the event store, notification 2 message 0" in caplog.text
    assert relay.quarantined == 1
    assert plan.app.tracked_position("relay:counter") == 2


def test_the_broker_refusals_are_told_apart_from_transient_errors() -> None:
    assert aiokafka.errors.for_code(87) is InvalidRecordError  # aiokafka alone: UnknownError
    assert issubclass(aiokafka.errors.for_code(10), REFUSALS)  # MESSAGE_TOO_LARGE
    assert issubclass(aiokafka.errors.for_code(18), REFUSALS)  # RECORD_LIST_TOO_LARGE
    assert CorruptRecordException in REFUSALS
    assert not issubclass(UnknownError, REFUSALS)
    assert not issubclass(aiokafka.errors.for_code(32), REFUSALS)  # INVALID_TIMESTAMP
    assert not issubclass(aiokafka.errors.for_code(29), REFUSALS)  # TOPIC_AUTHORIZATION_FAILED
