"""The tracking name of each partition a consumer reads (the naming rules: ``tracking.py``).

An owned topic's partition is named after its owner; any other partition after the
cluster, the real topic name and the topic's Kafka topic id. The ids are read once per
assignment (``forget`` on every rebalance) and again when a partition's offsets go back
without the consumer seeking them (``handled_to`` / ``rewound``): a topic deleted and
created again under the same name restarts its offsets at 0 with a new id, and aiokafka
(which fetches by name) does not say so. The first time a name is used, a position the
store recorded before topic ids is carried over (``tracking.adopt_legacy_position``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

from aiokafka import TopicPartition

from contracts import TOPIC_OWNERS
from services.shared.platform.consumer.tracking import (
    adopt_legacy_position,
    offset_tracking_name,
    relayed_tracking_name,
)
from services.shared.platform.store.application import ServiceApplication
from services.shared.platform.store.worker import AppWorker

log = logging.getLogger(__name__)

TopicIdFetcher = Callable[[Iterable[str]], Awaitable[dict[str, str]]]
"""Kafka topic names -> their topic ids (``TopicIdReader.topic_ids``)."""


class PartitionNames:
    """Tracking names of one consumer's partitions; ``cluster_id`` and ``fetch`` set at start."""

    def __init__(
        self,
        app: ServiceApplication,
        worker: AppWorker,
        cluster_id: str | None = None,
        fetch: TopicIdFetcher | None = None,
    ) -> None:
        self.app = app
        self.worker = worker
        self.cluster_id = cluster_id
        self.fetch = fetch
        self.topic_ids: dict[str, str] = {}  # Kafka topic -> id, for the current assignment
        self._names: dict[TopicPartition, str] = {}
        self._next: dict[TopicPartition, int] = {}  # the next offset, as far as we know

    async def name(
        self,
        tp: TopicPartition,
        logical: str,
        first_offset: int,
        end_offset: Callable[[], Awaitable[int]],
    ) -> str:
        """The name of ``tp``, whose fetched records start at ``first_offset``.

        ``end_offset`` gives the partition's end (for a legacy position's check).
        """
        owner = TOPIC_OWNERS.get(logical)
        if owner is not None:
            return relayed_tracking_name(owner, logical, tp.partition)
        expected = self._next.get(tp)
        if expected is not None and first_offset < expected:
            log.warning(
                "%s:%d went back from offset %d to %d; reading its topic id again",
                tp.topic,
                tp.partition,
                expected,
                first_offset,
            )
            self.forget_topic(tp.topic)
        name = self._names.get(tp)
        if name is not None:
            return name
        topic_id = self.topic_ids.get(tp.topic)
        if topic_id is None:
            if self.fetch is None:
                raise RuntimeError("consumer not started: no topic ids")
            self.topic_ids.update(await self.fetch([tp.topic]))
            topic_id = self.topic_ids[tp.topic]
        name = offset_tracking_name(self.cluster_id, tp.topic, tp.partition, topic_id)
        legacy = offset_tracking_name(self.cluster_id, tp.topic, tp.partition)
        end = await end_offset()
        adopted = await self.worker.call(
            adopt_legacy_position, self.app, legacy, name, topic_id, end
        )
        if adopted:
            log.info("%s: took over position %d of %s", name, adopted, legacy)
        self._names[tp] = name
        return name

    def handled_to(self, tp: TopicPartition, next_offset: int) -> None:
        """``tp`` was read up to ``next_offset`` (or sought there on purpose)."""
        self._next[tp] = next_offset

    def rewound(self, tp: TopicPartition) -> None:
        """``tp`` is sought back on purpose: a lower offset next is no surprise."""
        self._next.pop(tp, None)

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """The assignment changed: the ids of these topics are read again."""
        for tp in partitions:
            self.forget_topic(tp.topic)
            self._next.pop(tp, None)

    def forget_topic(self, topic: str) -> None:
        self.topic_ids.pop(topic, None)
        for tp in [tp for tp in self._names if tp.topic == topic]:
            del self._names[tp]
