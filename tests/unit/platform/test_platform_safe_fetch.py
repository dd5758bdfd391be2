"""kafka.SafeFetch against a consumer that fails as aiokafka does on a record it cannot parse:
the records one fetch took from other partitions are lost with the failure (their positions
moved on), and every fetch that reaches the record fails again."""

from __future__ import annotations

from typing import Any

from aiokafka import ConsumerRecord, TopicPartition

from services.shared.platform.kafka import SafeFetch, UnreadableRecord

GOOD, BAD = TopicPartition("t", 0), TopicPartition("t", 1)


class PoisonedConsumer:
    """Five records a partition; ``BAD``'s offset 2 cannot be parsed. A fetch drains the
    partitions in order, moving each one's position as it goes, and raises on the record."""

    def __init__(self) -> None:
        self.positions = {GOOD: 0, BAD: 0}
        self.committed_offsets = {GOOD: 0, BAD: 0}

    def assignment(self) -> set[TopicPartition]:
        return set(self.positions)

    def paused(self) -> set[TopicPartition]:
        return set()

    async def position(self, tp: TopicPartition) -> int:
        return self.positions[tp]

    async def committed(self, tp: TopicPartition) -> int:
        return self.committed_offsets[tp]

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    async def seek_to_beginning(self, tp: TopicPartition) -> None:
        self.positions[tp] = 0

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int, max_records: int | None
    ) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
        found: dict[TopicPartition, list[ConsumerRecord[Any, Any]]] = {}
        for tp in partitions or (GOOD, BAD):
            start = self.positions[tp]
            for offset in range(start, min(5, start + (max_records or 5))):
                if tp == BAD and offset == 2:
                    raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
                record = ConsumerRecord(
                    tp.topic, tp.partition, offset, 0, 0, b"k", b"v", None, 1, 1, ()
                )
                found.setdefault(tp, []).append(record)
                self.positions[tp] = offset + 1
        return found


async def _read_all(fetch: SafeFetch, consumer: PoisonedConsumer) -> list[tuple[int, int, str]]:
    seen: list[tuple[int, int, str]] = []
    for _ in range(20):
        for record in await fetch(consumer, 0, 500):  # type: ignore[arg-type]
            kind = "unreadable" if isinstance(record, UnreadableRecord) else "record"
            seen.append((record.partition, record.offset, kind))
    return seen


async def test_each_record_comes_once_and_the_unreadable_one_by_its_place() -> None:
    consumer = PoisonedConsumer()
    seen = await _read_all(SafeFetch(), consumer)
    assert sorted(seen) == [(0, n, "record") for n in range(5)] + [
        (1, 0, "record"),
        (1, 1, "record"),
        (1, 2, "unreadable"),
        (1, 3, "record"),
        (1, 4, "record"),
    ]


async def test_a_reader_without_a_group_goes_back_to_where_it_stood() -> None:
    consumer = PoisonedConsumer()
    consumer.committed_offsets = {}  # it commits nothing: committed() is never asked
    seen = await _read_all(SafeFetch(snapshot=True), consumer)
    assert len(seen) == len(set(seen)) == 10
    assert (1, 2, "unreadable") in seen
