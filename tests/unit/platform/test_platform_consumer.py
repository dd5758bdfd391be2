"""The consumer runtime's exactly-once effect, header trust and dead letters, with fake Kafka.

Two topics serve as examples: table-commands (no owner: tracked by offset, CloseTable is an
external message) and table-events (owned by dealing: tracked by dealing's relay headers,
TableClosed is an internal message). Records with dealing's relay headers on table-events are
signed with dealing's test key (keys_fakes.py) unless a test says otherwise; signatures
themselves are tested in test_platform_consumer_signatures.py.
"""

import asyncio
import base64
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest
from aiokafka import ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaConnectionError

from contracts import (
    BET_COMMANDS,
    DEAD_LETTERS,
    TABLE_COMMANDS,
    TABLE_EVENTS,
    CloseBook,
    CloseTable,
    DeadLetter,
    OpenBook,
    PlaceBet,
    TableClosed,
    decode,
    encode,
)
from services.shared.platform.consumer import (
    BatchProcessor,
    Delivery,
    Subscription,
    intake,
    with_unit_of_work,
)
from services.shared.platform.consumer.intake import (
    CLAIM_SUFFIX,
    UNCLAIMED,
    UntrustedHeaders,
    relayed_position,
    topic_id_claim,
)
from services.shared.platform.consumer.processor import COMMIT_INTERVAL, RebalanceListener
from services.shared.platform.security import Where
from services.shared.platform.settings import Settings
from services.shared.platform.store import AppWorker, UnitOfWork
from tests.unit.platform.fakes import Counter, CounterApp, FakeConsumer, FakeProducer, popo_env
from tests.unit.platform.keys_fakes import KEYRING, signature

COMMANDS = "p." + TABLE_COMMANDS
EVENTS = "p." + TABLE_EVENTS
CLUSTER = "cluster-A"
TOPIC_ID = "id-A"
OFFSETS = f"{CLUSTER}:{COMMANDS}:{TOPIC_ID}:0"
"""Tracking name of table-commands partition 0 (offsets)."""
RELAYED = f"dealing:{TABLE_EVENTS}:0"
"""Tracking name of table-events partition 0 (dealing's notifications)."""


def record(
    offset: int,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] = (),
    partition: int = 0,
    topic: str = COMMANDS,
    timestamp: int = 0,
    timestamp_type: int = 0,
    signed: bool = True,
) -> ConsumerRecord[bytes, bytes]:
    """A record keyed by its table id (t1 unless the value names another); on table-events
    with dealing's relay headers, signed by dealing unless not ``signed``."""
    key = table_of(value).encode()
    if signed and topic == EVENTS and value is not None:
        try:
            position = relayed_position(headers, "dealing")
        except UntrustedHeaders:
            pass  # refused before its signature is looked at
        else:
            notification, index = divmod(position, 2**20)
            headers = [
                *headers,
                signature(
                    "dealing", Where(CLUSTER, topic, partition), key, value, notification, index
                ),
            ]
    return ConsumerRecord(
        topic=topic,
        partition=partition,
        offset=offset,
        timestamp=timestamp,
        timestamp_type=timestamp_type,
        key=key,
        value=value,
        checksum=None,
        serialized_key_size=len(key),
        serialized_value_size=len(value or b""),
        headers=tuple(headers),
    )


def table_of(value: bytes | None) -> str:
    try:
        found = json.loads(value or b"").get("table_id")
    except (ValueError, AttributeError):
        return "t1"
    return found if isinstance(found, str) else "t1"


def close(reason: str, table: str = "t1") -> bytes:
    """An external command (table-commands)."""
    return encode(CloseTable(table_id=table, reason=reason))


def closed(reason: str, table: str = "t1") -> bytes:
    """An internal event (table-events, published by dealing)."""
    return encode(TableClosed(table_id=table, reason=reason))


def relayed(
    notification: int | str, index: int | str = 0, source: bytes = b"dealing"
) -> list[tuple[str, bytes | None]]:
    """The headers of a message published by a relay (dealing's, unless ``source``)."""
    return [
        ("pb-source", source),
        ("pb-notification-id", str(notification).encode()),
        ("pb-message-index", str(index).encode()),
    ]


def event(
    offset: int, reason: str, notification: int, partition: int = 0, table: str = "t1"
) -> ConsumerRecord[bytes, bytes]:
    """TableClosed on table-events, as dealing's relay publishes it."""
    value = closed(reason, table)
    return record(offset, value, relayed(notification), partition=partition, topic=EVENTS)


ON_0, ON_1 = "t2", "t1"
"""Tables murmur2 puts on partitions 0 and 1 of a topic of two (``Harness(partitions=2)``)."""


class Harness:
    def __init__(
        self,
        app: CounterApp | None = None,
        prefix: str = "p.",
        cluster: str = CLUSTER,
        topic_id: str | dict[str, str] = TOPIC_ID,
        failures: int = 0,
        partitions: int = 1,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.app = app or CounterApp(env=popo_env())
        self.now = 0.0  # the processor's clock, unless given: a commit interval per reading
        self.settings = Settings.from_env("counter", {"PB_TOPIC_PREFIX": prefix})
        self.worker = AppWorker("counter")
        self.producer = FakeProducer()
        self.calls = 0
        self.failures = failures  # "flaky" messages fail this many times, then pass
        self.id_reads: list[list[str]] = []
        self.ids = topic_id

        self.marks: list[Delivery] = []  # dealing's OpenBook / CloseBook taken

        def handle(uow: UnitOfWork, delivery: Delivery) -> None:
            self.calls += 1
            message = delivery.message
            if isinstance(message, OpenBook | CloseBook):
                self.marks.append(delivery)
                return
            assert isinstance(message, CloseTable | TableClosed | PlaceBet)
            reason = message.reason if isinstance(message, CloseTable | TableClosed) else "1"
            if reason == "boom":
                raise ValueError("no such amount")
            if reason == "flaky":
                if self.failures > 0:
                    self.failures -= 1
                    raise RuntimeError("the store says no")
                reason = "1000"
            counter = uow.get(Counter.create_id("t1"), Counter)
            if counter is None:
                counter = Counter(table_id="t1")
                uow.add(counter)
            counter.add(table_id="t1", amount=int(reason))

        async def topic_ids(topics: Iterable[str]) -> dict[str, str]:
            names = sorted(topics)
            self.id_reads.append(names)
            if isinstance(self.ids, str):
                return dict.fromkeys(names, self.ids)
            return {name: self.ids[name] for name in names}

        handler = with_unit_of_work(self.app, handle)
        self.runtime = BatchProcessor(
            self.app,
            self.settings,
            [
                Subscription(TABLE_COMMANDS, handler),
                Subscription(TABLE_EVENTS, handler),
                Subscription(BET_COMMANDS, handler),
            ],
            self.worker,
            producer=self.producer,
            cluster_id=cluster,
            topic_ids=topic_ids,
            keyring=KEYRING,
            clock=clock or self._tick,
        )
        self.kafka = FakeConsumer(partitions=partitions)
        self.runtime.consumer = self.kafka
        self.stop_changes: list[tuple[str, int, bool]] = []
        self.runtime.stops.on_change = lambda t, p, s: self.stop_changes.append((t, p, s))

    def _tick(self) -> float:
        self.now += COMMIT_INTERVAL
        return self.now

    async def feed(
        self, *records: ConsumerRecord[bytes, bytes], stopping: asyncio.Event | None = None
    ) -> None:
        fetched: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] = {}
        for r in records:
            fetched.setdefault(TopicPartition(r.topic, r.partition), []).append(r)
        self.kafka.assigned.update(fetched)
        await self.runtime.process(fetched, stopping or asyncio.Event())

    @property
    def total(self) -> int:
        try:
            counter: Counter = self.app.repository.get(Counter.create_id("t1"))
        except Exception:
            return 0
        return counter.total

    def dead_letters(self) -> list[DeadLetter]:
        out = []
        for sent in self.producer.sent:
            assert sent.topic == "p." + DEAD_LETTERS
            letter = decode(DEAD_LETTERS, sent.value)
            assert isinstance(letter, DeadLetter)
            out.append(letter)
        return out


# ---- exactly once ------------------------------------------------------------------------


async def test_a_batch_is_handled_once_and_offsets_committed() -> None:
    h = Harness()
    await h.feed(record(0, close("1")), record(1, close("2")), record(2, close("3")))
    assert h.total == 6
    assert h.kafka.committed == {TopicPartition(COMMANDS, 0): 3}
    assert h.app.tracked_position(OFFSETS) == 3


async def test_offsets_are_committed_when_idle_or_once_an_interval_while_busy() -> None:
    now = [0.0]
    h = Harness(clock=lambda: now[0])
    tp = TopicPartition(COMMANDS, 0)
    await h.feed(record(0, close("1")))
    assert h.kafka.committed == {tp: 1}  # the first fetch commits
    now[0] += COMMIT_INTERVAL / 2
    await h.feed(record(1, close("2")), record(2, close("3")))
    assert h.total == 6 and h.app.tracked_position(OFFSETS) == 3  # in the store ...
    assert h.kafka.committed == {tp: 1}  # ... the offsets wait: busy, within the interval
    now[0] += COMMIT_INTERVAL / 2
    await h.feed(record(3, close("4")))
    assert h.kafka.committed == {tp: 4}  # an interval since the last commit
    await h.feed(record(4, close("5")))
    assert h.kafka.committed == {tp: 4}
    await h.runtime.commit_pending()  # a fetch brought nothing: idle
    assert h.kafka.committed == {tp: 5}


async def test_a_stopping_service_or_a_revoked_partition_commits_at_once() -> None:
    h = Harness(clock=lambda: 0.0)
    tp = TopicPartition(COMMANDS, 0)
    await h.feed(record(0, close("1")))
    await h.feed(record(1, close("2")))
    assert h.kafka.committed == {tp: 1}
    await RebalanceListener(h.runtime).on_partitions_revoked({tp})
    assert h.kafka.committed == {tp: 2}  # where the next owner starts
    await h.feed(record(2, close("3")))
    stopping = asyncio.Event()
    stopping.set()  # set while the fetch was handled
    await h.feed(record(3, close("4")), stopping=stopping)
    assert h.kafka.committed == {tp: 4}


async def test_a_partition_stopping_commits_at_once() -> None:
    h = Harness(clock=lambda: 0.0)
    tp = TopicPartition(EVENTS, 0)
    await h.feed(event(0, "1", 1), event(1, "2", 2))
    assert h.kafka.committed == {tp: 2}
    await h.feed(event(2, "5", 3), event(3, "boom", 4))  # within the interval, but it stops
    assert h.total == 8 and h.kafka.committed == {tp: 3}


async def test_a_failed_fetch_is_read_again_from_its_first_records() -> None:
    h = Harness()
    h.runtime._retry_delay = 0.0
    h.producer.fail_after = 0  # the dead letters cannot be written
    records = [record(5, close("1")), record(6, b"not json{")]
    h.kafka.assigned.add(TopicPartition(COMMANDS, 0))
    await h.runtime.consume(records, h.kafka, asyncio.Event())
    assert h.total == 0 and h.kafka.committed == {}
    assert h.kafka.sought == [(TopicPartition(COMMANDS, 0), 5)]


async def test_offsets_a_failed_commit_held_are_committed_by_the_next() -> None:
    h = Harness(clock=lambda: 0.0)
    tp = TopicPartition(COMMANDS, 0)
    real = h.kafka.commit

    async def broker_gone(offsets: dict[object, int]) -> None:
        raise KafkaConnectionError("broker gone")

    h.kafka.commit = broker_gone  # type: ignore[method-assign]
    await h.feed(record(0, close("1")))
    assert h.kafka.committed == {}
    h.kafka.commit = real  # type: ignore[method-assign]
    await h.runtime.commit_pending()  # the next fetch brings nothing
    assert h.kafka.committed == {tp: 1}


async def test_offsets_of_a_partition_no_longer_assigned_are_not_committed() -> None:
    h = Harness(clock=lambda: 0.0, partitions=2)
    ours, theirs = TopicPartition(COMMANDS, 0), TopicPartition(COMMANDS, 1)
    await h.feed(record(0, close("1", ON_0)))
    await h.feed(record(1, close("2", ON_0)), record(0, close("10", ON_1), partition=1))
    h.kafka.assigned.discard(theirs)  # a rebalance gave it to another member meanwhile
    await h.runtime.commit_pending()
    assert h.kafka.committed == {ours: 2}


async def test_the_same_message_delivered_twice_has_one_effect() -> None:
    h = Harness()
    await h.feed(record(0, close("5")))
    await h.feed(record(0, close("5")), record(1, close("1")))
    assert h.total == 6
    assert h.runtime.stats.duplicates == 1


async def test_a_republished_relay_message_has_one_effect() -> None:
    h = Harness()
    await h.feed(
        record(0, closed("5"), relayed(7), topic=EVENTS),
        record(1, closed("1"), relayed(7, 1), topic=EVENTS),
    )
    # the relay crashed before recording its position and published both again
    await h.feed(
        record(2, closed("5"), relayed(7), topic=EVENTS),
        record(3, closed("1"), relayed(7, 1), topic=EVENTS),
    )
    await h.feed(event(4, "2", 8))
    assert h.total == 8
    assert h.runtime.stats.duplicates == 2
    assert h.app.tracked_position(RELAYED) == 8 * 2**20


async def test_partitions_are_tracked_separately() -> None:
    h = Harness(partitions=2)
    await h.feed(record(5, close("1", ON_0)), record(2, close("10", ON_1), partition=1))
    await h.feed(record(3, close("100", ON_1), partition=1))
    assert h.total == 111


async def test_a_store_reused_with_a_new_prefix_or_kafka_handles_its_commands() -> None:
    first = Harness(prefix="p.")
    await first.feed(record(0, close("1")), record(1, close("2")))
    assert first.total == 3
    # Same store, new topic prefix: offsets 0 and 1 of the new topic are new commands.
    renamed = Harness(first.app, prefix="q.")
    await renamed.feed(
        record(0, close("10"), topic="q." + TABLE_COMMANDS),
        record(1, close("20"), topic="q." + TABLE_COMMANDS),
    )
    assert renamed.total == 33 and renamed.runtime.stats.duplicates == 0
    # Same store and prefix, another Kafka cluster (its topics start at offset 0 again).
    moved = Harness(first.app, prefix="p.", cluster="cluster-B")
    await moved.feed(record(0, close("100")))
    assert moved.total == 133 and moved.runtime.stats.duplicates == 0
    # And the first log's positions still hold: a redelivery there has no second effect.
    again = Harness(first.app, prefix="p.")
    await again.feed(record(1, close("2")))
    assert again.total == 133 and again.runtime.stats.duplicates == 1


async def test_a_delivery_carries_the_record_timestamp_and_its_type() -> None:
    from datetime import UTC, datetime

    from services.shared.platform.consumer import CREATE_TIME, LOG_APPEND_TIME

    h = Harness()
    seen: list[Delivery] = []

    def handle(deliveries: Sequence[Delivery], tracking: object) -> None:
        seen.extend(deliveries)

    h.runtime.subscriptions[TABLE_COMMANDS] = Subscription(TABLE_COMMANDS, handle)
    appended = datetime(2026, 11, 30, 4, 0, 1, 250000, tzinfo=UTC)
    millis = int(appended.timestamp() * 1000)
    await h.feed(
        record(0, close("1"), timestamp=millis, timestamp_type=LOG_APPEND_TIME),
        record(1, close("2"), timestamp=millis, timestamp_type=CREATE_TIME),
    )
    assert [(d.timestamp, d.timestamp_type) for d in seen] == [
        (millis, LOG_APPEND_TIME),
        (millis, CREATE_TIME),
    ]
    assert seen[0].appended_at == appended
    assert seen[1].appended_at is None  # a producer's timestamp is not the broker's
    assert seen[0].source is None  # no owner: the pb-source header means nothing here


# ---- header trust ------------------------------------------------------------------------


async def test_a_forged_source_on_an_owned_topic_is_a_dead_letter_never_a_position() -> None:
    h = Harness()
    await h.feed(event(0, "1", 5))
    # Someone else writes table-events with a huge notification id, as if from elsewhere.
    evil = record(1, closed("50"), relayed(8000000000000, source=b"evil"), topic=EVENTS)
    await h.feed(evil, event(2, "2", 6))
    assert h.total == 3  # dealing's next message is handled: nothing was skipped
    assert h.app.tracked_position(RELAYED) == 6 * 2**20
    [letter] = h.dead_letters()
    assert letter.offset == 1
    assert letter.error.startswith("untrusted headers: header pb-source is b'evil'")
    assert "only dealing publishes here" in letter.error
    assert letter.headers["pb-notification-id"] == "8000000000000"
    assert h.kafka.committed == {TopicPartition(EVENTS, 0): 3}


async def test_records_on_an_owned_topic_with_bad_headers_are_dead_letters() -> None:
    h = Harness()
    bad = [
        [],  # an external producer writing an owned topic
        [*relayed(9), ("pb-notification-id", b"10")],  # repeated
        relayed("99999999999999999999"),  # 20 digits: would overflow a bigint
        relayed(9, 2**20),  # index out of range
        relayed("-9"),
        relayed(" 9"),
        relayed("09"),
        [("pb-source", b"dealing"), ("pb-notification-id", None), ("pb-message-index", b"0")],
        relayed(2**43),  # 2**43 * 2**20 = 2**63: does not fit
    ]
    await h.feed(
        *[record(i, closed("100"), headers, topic=EVENTS) for i, headers in enumerate(bad)]
    )
    assert h.total == 0 and h.calls == 0
    letters = h.dead_letters()
    assert [d.offset for d in letters] == list(range(len(bad)))
    errors = [d.error for d in letters]
    assert "header pb-source is missing" in errors[0]
    assert "appears more than once" in errors[1]
    assert "not a decimal number (1-15 digits" in errors[2]
    assert "not below 1048576" in errors[3]
    assert all("not a decimal number" in e for e in errors[4:7])
    assert "has no value" in errors[7]
    assert "does not fit 63 bits" in errors[8]
    assert h.app.tracked_position(RELAYED) == 0  # no position came from them
    # The largest position that fits is accepted.
    top = (2**63 - 1) >> 20
    await h.feed(record(20, closed("1"), relayed(top, 2**20 - 1), topic=EVENTS))
    assert h.total == 1
    assert h.app.tracked_position(RELAYED) == 2**63 - 1


# ---- topic ids ---------------------------------------------------------------------------


async def test_a_topic_created_again_under_the_same_name_has_its_records_handled() -> None:
    first = Harness()
    await first.feed(record(0, close("1")), record(1, close("2")))
    recreated = Harness(first.app, topic_id="id-B")  # same cluster, prefix and name
    await recreated.feed(record(0, close("10")), record(1, close("20")))
    assert recreated.total == 33 and recreated.runtime.stats.duplicates == 0
    assert first.app.tracked_position(f"{CLUSTER}:{COMMANDS}:id-B:0") == 2


async def test_offsets_going_back_make_the_consumer_read_the_topic_id_again() -> None:
    h = Harness(topic_id={COMMANDS: "id-A"})
    await h.feed(record(0, close("1")), record(1, close("2")), record(2, close("3")))
    assert h.id_reads == [[COMMANDS]]
    # Same assignment, same topic id: offsets back at 0 are a redelivery.
    await h.feed(record(0, close("1")))
    assert h.id_reads == [[COMMANDS], [COMMANDS]]
    assert h.total == 6 and h.runtime.stats.duplicates == 1
    # The topic was deleted and created again between two metadata refreshes.
    h.ids = {COMMANDS: "id-B"}
    await h.feed(record(0, close("100")))
    assert h.total == 106


async def test_a_new_assignment_reads_the_topic_ids_again() -> None:
    h = Harness()
    await h.feed(record(0, close("1")))
    await h.feed(record(1, close("1")))
    assert len(h.id_reads) == 1

    await RebalanceListener(h.runtime).on_partitions_assigned({TopicPartition(COMMANDS, 0)})
    await h.feed(record(2, close("1")))
    assert len(h.id_reads) == 2 and h.runtime.ready.is_set()


async def test_a_store_written_before_topic_ids_keeps_its_positions_once() -> None:
    h = Harness()
    legacy = f"{CLUSTER}:{COMMANDS}:0"
    h.app.record_position(legacy, 3)  # offsets 0-2 were handled, named without a topic id
    h.kafka.highwaters[TopicPartition(COMMANDS, 0)] = 4
    await h.feed(*[record(i, close(str(10**i))) for i in range(4)])
    assert h.total == 1000 and h.runtime.stats.duplicates == 3
    assert h.app.tracked_position(OFFSETS) == 4
    assert h.app.tracked_position(legacy + CLAIM_SUFFIX) == topic_id_claim(TOPIC_ID)
    # The topic is deleted and created again: its new id does not take the old position.
    recreated = Harness(h.app, topic_id="id-B")
    recreated.kafka.highwaters[TopicPartition(COMMANDS, 0)] = 10
    await recreated.feed(*[record(i, close("1")) for i in range(5)])
    assert recreated.total == 1005 and recreated.runtime.stats.duplicates == 0


async def test_a_log_that_ends_before_the_legacy_position_does_not_take_it() -> None:
    h = Harness()
    legacy = f"{CLUSTER}:{COMMANDS}:0"
    h.app.record_position(legacy, 50)
    h.kafka.highwaters[TopicPartition(COMMANDS, 0)] = 2  # a new topic: offsets 0 and 1
    await h.feed(record(0, close("1")), record(1, close("2")))
    assert h.total == 3 and h.runtime.stats.duplicates == 0
    assert h.app.tracked_position(legacy + CLAIM_SUFFIX) == UNCLAIMED


# ---- dead letters and handler failures ---------------------------------------------------


async def test_malformed_messages_become_dead_letters_and_the_rest_is_served() -> None:
    h = Harness()
    await h.feed(
        record(0, b"not json{"),
        record(1, close("2")),
        record(2, b'{"type": "CloseTable", "table_id": "t1", "reason": 3}'),
        record(3, None),
        record(4, close("4")),
    )
    assert h.total == 6
    letters = h.dead_letters()
    assert [(d.offset, d.original_topic, d.service) for d in letters] == [
        (0, COMMANDS, "counter"),
        (2, COMMANDS, "counter"),
        (3, COMMANDS, "counter"),
    ]
    assert base64.b64decode(letters[0].payload_b64) == b"not json{"
    assert "not JSON" in letters[0].error
    assert "reason" in letters[1].error
    assert letters[0].table_id == "t1"
    assert letters[2].payload_size is None  # a null value
    assert h.kafka.committed == {TopicPartition(COMMANDS, 0): 5}
    # redelivery of the whole batch: no second effect, no second dead letter
    await h.feed(record(0, b"not json{"), record(1, close("2")))
    assert h.total == 6
    assert len(h.dead_letters()) == 3


async def test_a_record_decoding_fails_on_by_a_bug_is_a_dead_letter_not_a_frozen_partition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An error decode should have said as a ContractError (an OverflowError once did) would
    be raised again by every reading of the record: it is dead-lettered and the rest served."""
    real = intake.decode

    def decode(topic: str, data: bytes) -> Any:
        if b'"boom"' in data:
            raise OverflowError("date value out of range")
        return real(topic, data)

    monkeypatch.setattr(intake, "decode", decode)
    h = Harness()
    await h.feed(record(0, close("1")), record(1, close("boom")), record(2, close("3")))
    assert h.total == 4  # the two others' (the counter adds each close's reason)
    (letter,) = h.dead_letters()
    assert letter.offset == 1 and "OverflowError('date value out of range')" in letter.error
    assert h.kafka.committed == {TopicPartition(COMMANDS, 0): 3}


async def test_a_refused_bet_whose_answer_fails_by_a_bug_is_a_dead_letter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A PlaceBet the contract refuses is answered (``refused_bet``); should making the answer
    raise, the record is dead-lettered, not read again for ever."""

    def broken(error: Any, key: Any) -> Any:
        raise TypeError("a bug")

    monkeypatch.setattr(intake, "refused_bet", broken)
    h = Harness()
    bad = {
        **json.loads(
            encode(
                PlaceBet(
                    table_id="t1",
                    bet_id="b1",
                    coup_id="c",
                    bettor_id="p",
                    bet_type="player",
                    amount=1,
                    currency="EUR",
                )
            )
        ),
        "odds": 2,
    }
    await h.feed(
        record(0, json.dumps(bad).encode(), topic="p." + BET_COMMANDS), record(1, close("3"))
    )
    (letter,) = h.dead_letters()
    assert letter.offset == 0 and "odds" in letter.error
    assert h.total == 3


async def test_an_external_message_its_handler_fails_on_is_dead_lettered() -> None:
    h = Harness()
    await h.feed(record(0, close("1")), record(1, close("boom")), record(2, close("2")))
    assert h.total == 3
    letters = h.dead_letters()
    assert [d.offset for d in letters] == [1]
    assert letters[0].error.startswith("handler failed: ValueError")
    assert h.app.tracked_position(OFFSETS) == 3
    assert not len(h.runtime.stops)


async def test_a_per_message_handler_failing_half_way_applies_nothing_twice() -> None:
    from eventsourcing.persistence import Tracking

    h = Harness()
    applied: list[str] = []

    def handle(deliveries: Sequence[Delivery], tracking: Tracking) -> None:
        for delivery in deliveries:  # one transaction per message, each with its own tracking
            message = delivery.message
            assert isinstance(message, CloseTable)
            if message.reason == "boom":
                raise ValueError("bad")
            with h.app.unit_of_work(delivery.tracking):
                applied.append(message.reason)

    h.runtime.subscriptions[TABLE_COMMANDS] = Subscription(TABLE_COMMANDS, handle)
    await h.feed(
        record(0, close("1")),
        record(1, close("2")),
        record(2, close("boom")),
        record(3, close("4")),
    )
    assert applied == ["1", "2", "4"]
    assert [d.offset for d in h.dead_letters()] == [2]
    assert h.app.tracked_position(OFFSETS) == 4


async def test_an_internal_message_its_handler_fails_on_stops_its_partition() -> None:
    h = Harness()
    tp = TopicPartition(EVENTS, 0)
    await h.feed(event(10, "1", 1), event(11, "boom", 2), event(12, "2", 3))
    assert h.total == 1  # the one before it is handled, nothing after it
    assert not h.dead_letters()
    assert h.app.tracked_position(RELAYED) == 1 * 2**20  # not advanced past it
    assert h.kafka.committed == {tp: 11}
    assert tp in h.kafka.paused and h.kafka.sought[-1] == (tp, 11)
    stopped = h.runtime.stops.get(tp)
    assert stopped is not None
    assert (stopped.topic, stopped.offset, stopped.message_type) == (
        TABLE_EVENTS,
        11,
        "TableClosed",
    )
    assert stopped.table_id == "t1" and "ValueError" in stopped.error
    assert h.stop_changes == [(TABLE_EVENTS, 0, True)]
    assert "stopped at offset 11 (TableClosed, table t1)" in stopped.describe()
    # Until its retry is due, records of that partition wait (none are handled).
    await h.feed(event(11, "boom", 2))
    assert h.runtime.stats.stops == 1


async def test_other_partitions_go_on_while_one_is_stopped() -> None:
    h = Harness(partitions=2)
    await h.feed(
        event(0, "boom", 1, partition=0, table=ON_0),
        event(0, "5", 1, partition=1, table=ON_1),
        record(0, close("7", ON_0)),
    )
    assert h.total == 12
    assert h.kafka.committed == {
        TopicPartition(EVENTS, 0): 0,
        TopicPartition(EVENTS, 1): 1,
        TopicPartition(COMMANDS, 0): 1,
    }
    assert [s.partition for s in h.runtime.stops] == [0]


async def test_a_stopped_partition_retries_the_same_record_until_it_is_taken() -> None:
    h = Harness(failures=4)  # the batch of two, then alone: three stops, then it passes
    h.runtime.stops.first_delay = 0.0
    tp = TopicPartition(EVENTS, 0)
    bad_json = record(2, b"not json", relayed(4), topic=EVENTS)
    await h.feed(event(0, "1", 1), event(1, "flaky", 2), bad_json)
    for attempt in (2, 3):
        h.runtime.resume_due()
        assert tp not in h.kafka.paused
        await h.feed(event(1, "flaky", 2), bad_json)
        stopped = h.runtime.stops.get(tp)
        assert stopped is not None and stopped.attempts == attempt
        assert tp in h.kafka.paused
    assert h.total == 1
    h.runtime.resume_due()
    await h.feed(event(1, "flaky", 2), bad_json, event(3, "2", 5))
    assert h.total == 1003  # taken once, and the rest goes on
    assert tp not in h.runtime.stops
    assert h.stop_changes == [(TABLE_EVENTS, 0, True), (TABLE_EVENTS, 0, False)]
    assert h.kafka.committed[tp] == 4
    assert h.app.tracked_position(RELAYED) == 5 * 2**20
    assert [d.offset for d in h.dead_letters()] == [2]  # once, whatever the tries


async def test_a_stopped_partition_taken_over_by_another_member_is_no_longer_stopped() -> None:
    h = Harness()
    await h.feed(event(0, "boom", 1))
    await RebalanceListener(h.runtime).on_partitions_revoked({TopicPartition(EVENTS, 0)})
    assert not len(h.runtime.stops)
    assert h.stop_changes == [(TABLE_EVENTS, 0, True), (TABLE_EVENTS, 0, False)]


def test_the_retry_delay_doubles_up_to_30_seconds() -> None:
    from services.shared.platform.consumer.stops import PartitionStops

    stops = PartitionStops()
    tp = TopicPartition(EVENTS, 0)
    delays = [stops.stop(tp, TABLE_EVENTS, 7, "CoupResolved", "t1", "x").delay for _ in range(8)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert stops.due() == []
    assert stops.waiting(tp)
