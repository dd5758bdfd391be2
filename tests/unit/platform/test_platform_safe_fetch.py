"""kafka.SafeFetch against a consumer that fails as aiokafka does on a record it cannot parse:
a fetch drains the partitions one after another, so the records it took from those before the
failure are lost with it (their positions moved on); a batch is parsed from its start, so a
record after the bad one in its batch cannot be read either; a failed read leaves the
partition's position where it was."""

from __future__ import annotations

from typing import Any

from aiokafka import ConsumerRecord, TopicPartition

from services.shared.platform.kafka import SafeFetch, UnreadableRecord

GOOD, BAD = TopicPartition("t", 0), TopicPartition("t", 1)
BATCHES = {GOOD: [range(0, 5)], BAD: [range(0, 4), range(4, 6)]}  # BAD's offset 2 is forged


class PoisonedConsumer:
    def __init__(self) -> None:
        self.positions = {GOOD: 0, BAD: 0}
        self.committed_offsets: dict[TopicPartition, int] = {GOOD: 0, BAD: 0}

    def assignment(self) -> set[TopicPartition]:
        return set(self.positions)

    def paused(self) -> set[TopicPartition]:
        return set()

    def highwater(self, tp: TopicPartition) -> int:
        return BATCHES[tp][-1].stop

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
            taken: list[ConsumerRecord[Any, Any]] = []
            for batch in BATCHES[tp]:
                if batch.stop <= self.positions[tp] or len(taken) == (max_records or 99):
                    continue
                for offset in batch:  # parsed from the batch's start, as far as is read
                    if len(taken) == (max_records or 99):
                        break
                    if tp == BAD and offset == 2:
                        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
                    if offset >= self.positions[tp]:
                        taken.append(
                            ConsumerRecord(
                                "t", tp.partition, offset, 0, 0, b"k", b"v", None, 1, 1, ()
                            )
                        )
            if taken:
                found[tp] = taken
                self.positions[tp] = taken[-1].offset + 1  # this partition's, before the next
        return found


async def _read_all(fetch: SafeFetch, consumer: PoisonedConsumer) -> list[tuple[int, int, str]]:
    seen: list[tuple[int, int, str]] = []
    for _ in range(20):
        for record in await fetch(consumer, 0, 500):  # type: ignore[arg-type]
            kind = "unreadable" if isinstance(record, UnreadableRecord) else "record"
            seen.append((record.partition, record.offset, kind))
    return seen


EXPECTED = [(0, n, "record") for n in range(5)] + [
    (1, 0, "record"),
    (1, 1, "record"),
    (1, 2, "unreadable"),
    (1, 3, "unreadable"),  # after it in its batch
    (1, 4, "record"),
    (1, 5, "record"),
]


async def test_each_record_comes_once_and_those_that_cannot_be_read_by_their_place() -> None:
    consumer = PoisonedConsumer()
    assert sorted(await _read_all(SafeFetch(), consumer)) == EXPECTED


async def test_a_reader_without_a_group_goes_back_to_where_it_stood() -> None:
    consumer = PoisonedConsumer()
    consumer.committed_offsets = {}  # it commits nothing: committed() is never asked
    assert sorted(await _read_all(SafeFetch(snapshot=True), consumer)) == EXPECTED
