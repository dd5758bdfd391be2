"""What a service's handlers get: a :class:`Delivery` per message, per :class:`Subscription`.

A :data:`BatchHandler` records the effects of one partition's fresh deliveries and their
tracking record in ONE transaction; :func:`with_unit_of_work` adapts the usual shape of handler
(one unit of work per batch) and records a refused fact as an incident.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

from eventsourcing.persistence import Tracking

from contracts import EXTERNAL, MESSAGE_SOURCES, MISPLACED, Message
from services.shared.platform.logs import message_context
from services.shared.platform.store.application import ServiceApplication, UnitOfWork
from services.shared.platform.store.incidents import Origin, refuse_fact

CREATE_TIME = 0
"""Kafka record timestamp type: set by the producer (``message.timestamp.type=CreateTime``)."""
LOG_APPEND_TIME = 1
"""Kafka record timestamp type: set by the broker when it appended the record."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why the consumer refused a message it could still identify (``intake.py``): the
    service answers it (a command from outside: a ``BetRejected`` / ``CommandRejected`` with
    this reason code) or raises an incident (a service's fact), and changes nothing else."""

    code: str  # a reason code of the contracts (RejectionCode, CommandRejectionCode...)
    message: str  # what was wrong and what to do, for a person

    @property
    def misplaced(self) -> bool:
        """Read outside its table's history (``contracts.MISPLACED``): nothing but the answer
        is recorded."""
        return self.code in MISPLACED


@lru_cache(maxsize=1024)
def append_time(timestamp: int) -> datetime:
    """A record's timestamp (ms since the epoch) as a datetime: one object for the records of
    one broker batch, which share their LogAppendTime (what is made of it is cached by it)."""
    return datetime.fromtimestamp(timestamp / 1000, UTC)


@dataclass(slots=True)  # not frozen: one per record read, and a frozen init costs 3x
class Delivery:
    """One decoded message and where it came from (read only)."""

    message: Message
    topic: str  # logical topic (without prefix)
    partition: int
    offset: int
    key: str | None
    # Who vouches for the message with its signature: the topic's owner (TOPIC_OWNERS),
    # or on a shared topic the service that alone may send it (dealing's marks); None: nobody.
    source: str | None
    tracking: Tracking  # this message's own tracking position
    timestamp: int | None = None  # the record's timestamp, ms since the epoch
    timestamp_type: int | None = None  # CREATE_TIME (the producer's) or LOG_APPEND_TIME
    refusal: Refusal | None = None  # set: answer it (a command) or raise an incident (a fact)

    @property
    def appended_at(self) -> datetime | None:
        """When the broker appended the record (LogAppendTime topics only), else None."""
        if self.timestamp_type != LOG_APPEND_TIME or self.timestamp is None or self.timestamp < 0:
            return None
        return append_time(self.timestamp)

    @property
    def external(self) -> bool:
        """True when nothing vouches that a service sent the message: a type from outside
        (``contracts.MESSAGE_SOURCES``), or a message no service's signature came with (the
        consumer checked it: ``source``). Dealing's signed marks on bet-commands are internal:
        a failure there stops the partition like one on an owned topic."""
        return (
            MESSAGE_SOURCES.get(type(self.message).__name__, EXTERNAL) == EXTERNAL
            or self.source is None
        )

    @property
    def table_id(self) -> str | None:
        table = getattr(self.message, "table_id", None)
        return table if isinstance(table, str) else self.key

    @property
    def origin(self) -> Origin:
        """Where the message was read (for an incident's evidence)."""
        return Origin(self.topic, self.partition, self.offset)

    def where(self) -> str:
        """``CoupResolved table t1 (topic:partition@offset)``, for logs."""
        return (
            f"{type(self.message).__name__} table {self.table_id or '?'} "
            f"({self.topic}:{self.partition}@{self.offset})"
        )


BatchHandler = Callable[[Sequence[Delivery], Tracking], None]
"""Handle deliveries (one partition, in order) and record their effects together with
``tracking`` in ONE transaction. Runs in the service's worker thread."""


@dataclass(frozen=True, slots=True)
class Subscription:
    topic: str  # logical topic, e.g. contracts.SHOE_COMMANDS
    handler: BatchHandler


def with_unit_of_work(
    app: ServiceApplication, handle: Callable[[UnitOfWork, Delivery], None]
) -> BatchHandler:
    """Adapt ``handle(uow, delivery)`` to a batch handler: ONE unit of work per batch."""

    def handler(deliveries: Sequence[Delivery], tracking: Tracking) -> None:
        with app.unit_of_work(tracking) as uow:
            for delivery in deliveries:
                with message_context(delivery.message):  # log records carry the message's ids
                    refused = delivery.refusal
                    if refused is not None:
                        message, origin = delivery.message, delivery.origin
                        refuse_fact(uow, app.name, message, refused.code, refused.message, origin)
                    else:
                        handle(uow, delivery)

    return handler
