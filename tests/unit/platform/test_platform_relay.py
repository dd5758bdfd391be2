"""The relay against an in-memory store and a fake producer (the Kafka run is in integration)."""

from typing import Any

import pytest

from contracts import TABLE_EVENTS, Message, TableClosed, decode
from services.shared.platform.relay import OutboxRelay, envelope
from services.shared.platform.settings import Settings
from tests.unit.platform.fakes import Counter, CounterApp, FakeProducer, popo_env


def to_messages(event: Any) -> list[Message]:
    if isinstance(event, Counter.Added):
        # one stored event -> `amount` messages, like a coup's settlement -> one per bet
        return [
            TableClosed(**envelope(event, i), table_id=event.table_id, reason=f"{event.amount}/{i}")
            for i in range(event.amount)
        ]
    return []


def make(app: CounterApp, producer: FakeProducer, batch: int = 2) -> tuple[OutboxRelay, Settings]:
    settings = Settings.from_env("counter", {"PB_TOPIC_PREFIX": "p."}, relay_batch_size=batch)
    return OutboxRelay(app, settings, to_messages, producer_factory=lambda: producer), settings


def fill(app: CounterApp, amounts: list[int]) -> None:
    counter = Counter(table_id="t1")
    for amount in amounts:
        counter.add(table_id="t1", amount=amount)
    app.save(counter)


def reasons(producer: FakeProducer) -> list[str]:
    out = []
    for record in producer.sent:
        message = decode(TABLE_EVENTS, record.value)
        assert isinstance(message, TableClosed)
        out.append(message.reason)
    return out


async def test_publishes_in_order_with_headers_and_records_its_position() -> None:
    app = CounterApp(env=popo_env())
    fill(app, [1, 2, 0, 3])
    producer = FakeProducer()
    relay, _ = make(app, producer)
    await relay.start()
    assert await relay.publish_pending() == 6
    assert reasons(producer) == ["1/0", "2/0", "2/1", "3/0", "3/1", "3/2"]
    first = producer.sent[0]
    assert first.topic == "p." + TABLE_EVENTS
    assert first.key == b"t1"
    headers = dict(first.headers)
    assert headers["pb-source"] == b"counter"
    assert headers["pb-notification-id"] == b"2"  # notification 1 is the Created event
    assert headers["pb-message-index"] == b"0"
    assert [dict(r.headers)["pb-message-index"] for r in producer.sent[1:3]] == [b"0", b"1"]
    assert app.tracked_position("relay:counter") == 5
    assert await relay.publish_pending() == 0


async def test_the_same_event_gives_the_same_message_ids() -> None:
    app = CounterApp(env=popo_env())
    fill(app, [2])
    first, second = FakeProducer(), FakeProducer()
    relay1, _ = make(app, first)
    await relay1.start()
    await relay1.publish_pending()
    app.record_position("other", 1)
    relay2 = OutboxRelay(
        app, relay1.settings, to_messages, producer_factory=lambda: second, tracking_name="again"
    )
    await relay2.start()
    await relay2.publish_pending()
    assert [r.value for r in first.sent] == [r.value for r in second.sent]


async def test_a_failed_batch_is_not_recorded_and_is_published_again() -> None:
    app = CounterApp(env=popo_env())
    fill(app, [1, 1, 1, 1, 1])
    broken = FakeProducer(fail_after=2)
    relay, settings = make(app, broken, batch=2)
    await relay.start()
    with pytest.raises(ConnectionError):
        await relay.publish_pending()
    # batches of 2 notifications: [created, +1] goes out, [+1, +1] fails half way
    assert app.tracked_position("relay:counter") == 2
    healthy = FakeProducer()
    restarted = OutboxRelay(app, settings, to_messages, producer_factory=lambda: healthy)
    await restarted.start()
    await restarted.publish_pending()
    everything = reasons(broken) + reasons(healthy)
    assert everything.count("1/0") >= 5  # nothing lost, duplicates allowed
    assert len(reasons(healthy)) == 4


async def test_a_batch_stops_after_enough_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    from services.shared.platform.relay import records as relay_module

    monkeypatch.setattr(relay_module, "MAX_MESSAGES_PER_BATCH", 3)
    app = CounterApp(env=popo_env())
    fill(app, [2, 2, 2])
    producer = FakeProducer()
    relay, _ = make(app, producer, batch=100)
    await relay.start()
    events = relay._read_events(0)
    done = [0]
    batch = [
        r
        async for chunk in relay.encoder.chunks(events, done)
        for r in chunk.markers + chunk.others
    ]
    assert (len(batch), done[0]) == (4, 3)  # created (0), +2, +2: stops once 3 are reached
    assert await relay.publish_pending() == 6
    assert reasons(producer) == ["2/0", "2/1"] * 3


async def test_events_saved_while_running_are_mapped_without_decoding_and_alike() -> None:
    """The save listener hands the relay the events just saved; the bytes are the same
    as a relay that reads them back from the store."""
    app = CounterApp(env=popo_env())
    live, replayed = FakeProducer(), FakeProducer()
    relay, settings = make(app, live, batch=100)
    await relay.start()
    decoded: list[int] = []
    to_domain_event = app.mapper.to_domain_event

    def counting(notification: Any) -> Any:
        decoded.append(notification.id)
        return to_domain_event(notification)

    app.mapper.to_domain_event = counting  # type: ignore[method-assign]
    fill(app, [3, 1])
    assert await relay.publish_pending() == 4
    assert decoded == []  # every event came from the save listener
    assert relay._fresh == {}  # nothing kept once published
    again = OutboxRelay(
        app, settings, to_messages, producer_factory=lambda: replayed, tracking_name="again"
    )
    await again.start()
    assert await again.publish_pending() == 4
    assert decoded == [1, 2, 3]  # this one read the store
    assert [(r.key, r.value, r.headers) for r in live.sent] == [
        (r.key, r.value, r.headers) for r in replayed.sent
    ]


async def test_chunks_are_sent_in_order_and_the_position_waits_for_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A big event goes out in chunks (sent while the next is encoded), in order; the
    position is recorded only once every chunk is acknowledged."""
    from services.shared.platform.relay import records as relay_module

    monkeypatch.setattr(relay_module, "CHUNK_MESSAGES", 2)
    app = CounterApp(env=popo_env())
    fill(app, [5, 3])
    producer = FakeProducer(fail_after=6)
    relay, _ = make(app, producer, batch=100)
    await relay.start()
    with pytest.raises(ConnectionError):
        await relay.publish_pending()  # the 7th send fails: nothing is recorded
    assert app.tracked_position("relay:counter") == 0
    healthy = FakeProducer()
    restarted, _ = make(app, healthy, batch=100)
    await restarted.start()
    assert await restarted.publish_pending() == 8
    assert reasons(healthy) == ["5/0", "5/1", "5/2", "5/3", "5/4", "3/0", "3/1", "3/2"]
    assert [dict(r.headers)["pb-message-index"] for r in healthy.sent[:5]] == [
        str(i).encode() for i in range(5)
    ]
    assert app.tracked_position("relay:counter") == 3


async def test_a_position_recorded_already_is_not_a_failure() -> None:
    """A commit of the relay's position that reported a failure may have landed: recording it
    again must not stop the relay (the store refuses a second record of one position)."""
    app = CounterApp(env=popo_env())
    fill(app, [1, 2])
    producer = FakeProducer()
    relay, _ = make(app, producer)
    await relay.start()
    assert await relay.publish_pending() == 3
    counter = Counter(table_id="t2")
    counter.add(table_id="t2", amount=1)
    app.save(counter)
    assert await relay.publish_pending() == 1
    # as if the last record had landed though its commit reported a failure
    relay._recorded = 0
    assert await relay.publish_pending() == 0  # records it again, reads nothing: no error
    assert app.tracked_position("relay:counter") == relay.position
    relay.position += 1  # a position the store does not have is still recorded
    await relay.stop()
    assert app.tracked_position("relay:counter") == relay.position
