"""How a service consumes Kafka: ONE FastStream batch subscriber over all its input topics.

A service's ``service.py`` declares its subscriber on its broker (``kafka.service_broker``)
with :func:`subscriber_options`: one consumer, one member of the service's consumer group.
FastStream's loop fetches (``getmany``) and calls the handler with the raw records of the
fetch, which hands them to the batch processor (``batch_processor.py``): each partition's
records applied in ONE store transaction with their tracking record, offsets committed only
after the store commits, refused records dead-lettered with their original bytes, a
partition stopped loudly on a failing internal message.

FastStream's defaults would lose messages here; the subscriber is set up so that they cannot:

- ``ack_policy=MANUAL``: FastStream never commits (its acknowledgement would commit the
  consumer's in-memory positions, past a stopped partition's record); the processor commits
  each partition's offset itself, after the store commit;
- :func:`keep_raw` as parser AND decoder: FastStream's own parser decodes every header value
  as UTF-8, so one record with a null or non-UTF-8 header would fail the whole fetch, which
  FastStream's loop then logs and leaves behind (its position moved on). Here nothing is
  parsed: the processor gets the records as fetched and refuses a bad one alone, its bytes
  kept for the dead letter;
- the handler never raises (``BatchProcessor.consume``), for the same reason;
- ``batch_timeout_ms`` is :data:`IDLE_WAIT_MS`: FastStream waits that long for records and
  then sleeps as long after an empty fetch, so a record reaching an idle consumer may wait for
  the sleep to end;
- ``RangePartitionAssignor`` (FastStream's default is round-robin): with several members, the
  same partition of every input topic goes to the same member, so a table's topics (same key,
  same partition) are read together;
- the rebalance listener (:class:`RebalanceListener`) reads the topics' ids again and ends the
  stops of partitions that move.

The handlers of a service get :class:`Delivery` objects (``deliveries.py``), re-exported here.
"""

from __future__ import annotations

from typing import Any

from aiokafka import ConsumerRecord
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from faststream.kafka.message import FAKE_CONSUMER, KafkaAckableMessage
from faststream.middlewares import AckPolicy

from services.shared.platform.consumer.batch_processor import BatchProcessor
from services.shared.platform.consumer.dead_letters import dead_letter_for
from services.shared.platform.consumer.deliveries import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    BatchHandler,
    Delivery,
    Subscription,
    per_message,
    with_unit_of_work,
)
from services.shared.platform.consumer.tracking import MESSAGES_PER_NOTIFICATION, position_of
from services.shared.platform.settings import Settings

__all__ = [
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "MESSAGES_PER_NOTIFICATION",
    "BatchHandler",
    "Delivery",
    "RebalanceListener",
    "Subscription",
    "dead_letter_for",
    "keep_raw",
    "per_message",
    "position_of",
    "subscriber_options",
    "with_unit_of_work",
]

MAX_PARTITION_FETCH_BYTES = 8 * 1024 * 1024
FETCH_MAX_WAIT_MS = 100
IDLE_WAIT_MS = 20
"""The batch subscriber's ``batch_timeout_ms``: a record reaching an idle consumer waits 5 ms
on average (20 at most) for FastStream's sleep to end, for about 2 % of a core while idle.
Measured with ``punto-banco bench``: 50 ms lost about a tenth of the sustained bets/s (a bet's
path crosses several idle consumers); 5 ms doubled the idle CPU for no measurable gain."""


class RebalanceListener(ConsumerRebalanceListener):  # type: ignore[misc]
    """Assignment changes: topic ids are read again (a topic may be new), stops end.

    Given to the subscriber when it is declared; ``processor`` is set once the service's
    store is open, before the consumer starts."""

    def __init__(self, processor: BatchProcessor | None = None) -> None:
        self.processor = processor

    async def on_partitions_revoked(self, revoked: Any) -> None:
        if self.processor is not None:
            self.processor.forget(revoked)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        if self.processor is not None:
            self.processor.forget(assigned)
            if assigned:
                self.processor.ready.set()


async def keep_raw(message: Any) -> Any:
    """Parser and decoder of the batch subscriber: the fetched records, untouched.

    As the parser it gets the records of one fetch and wraps them without reading a header;
    as the decoder it gets that message back and returns the records (the handler's body).
    """
    if isinstance(message, KafkaAckableMessage):
        return message.raw_message
    records: tuple[ConsumerRecord[Any, Any], ...] = tuple(message)
    return KafkaAckableMessage(
        raw_message=records,
        body=records,
        message_id=(f"{records[0].topic}:{records[0].partition}@{records[0].offset}+{len(records)}")
        if records
        else None,
        consumer=FAKE_CONSUMER,  # never used: offsets are committed by the processor
    )


def subscriber_options(
    settings: Settings, listener: RebalanceListener, *, title: str, description: str
) -> dict[str, Any]:
    """The arguments of ``broker.subscriber(*topics, **...)`` for a service's one batch
    subscriber (see the module docstring)."""
    assigned = settings.partition is not None  # a partition cell: no group membership
    return {
        "batch": True,
        "group_id": settings.consumer_group,
        "ack_policy": AckPolicy.MANUAL,
        "parser": keep_raw,
        "decoder": keep_raw,
        "max_records": settings.consumer_max_records,
        "batch_timeout_ms": IDLE_WAIT_MS,
        "auto_offset_reset": "earliest",
        "max_partition_fetch_bytes": MAX_PARTITION_FETCH_BYTES,
        "fetch_max_wait_ms": FETCH_MAX_WAIT_MS,
        **(
            {}
            if assigned
            else {"partition_assignment_strategy": (RangePartitionAssignor,), "listener": listener}
        ),
        "title": title,
        "description": description,
    }
