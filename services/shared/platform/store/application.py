"""The eventsourcing base every service Application extends, and its unit of work.

``ServiceApplication`` is an ordinary eventsourcing ``Application`` with five
additions the delivery design needs:

- its recorder is a *process* recorder, so events and tracking records
  (what was consumed, how far the relay got) live in the same store and can be
  written in the same transaction;
- ``unit_of_work(tracking)`` collects every aggregate changed while handling one
  message (or one batch of messages) and records all their new events together
  with the tracking record in ONE transaction (``ProcessingEvent`` +
  ``Application._record``, as ``eventsourcing.system.ProcessApplication`` does);
- a unit of work may add rows of the service's side tables (derived state such as
  settlement's bet ids, ``side_tables.py``): its recorder inserts them in that same
  transaction (``UnitOfWork.add_rows``);
- listeners registered with ``add_save_listener`` are called after every
  save, which wakes the outbox relay without waiting for its poll interval;
- its mapper is :class:`~services.shared.platform.store.mapping.FactMapper`: stored line
  arrays are read back as the line records the domain events declare, and the fields a fact
  declares ``ENCRYPTED`` are encrypted with the keys of :meth:`construct_secret_keys` (none
  by default: such an event is then refused).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import ClassVar, TypeVar, cast
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application, ProcessingEvent
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import Mapper, ProcessRecorder, Recording, Tracking

from services.shared.platform.security.secret_keys import SecretKeys
from services.shared.platform.store.mapping import FactMapper
from services.shared.platform.store.side_tables import SIDE_ROWS, SideRows, process_recorder

A = TypeVar("A", bound=Aggregate)


class ServiceApplication(Application[UUID]):
    """Base class of the shoe, dealing and settlement Applications."""

    # Keep recently used aggregates in memory (fast-forwarded from the store on
    # each get), so a busy table is not replayed from its first event every time.
    env: ClassVar[dict[str, str]] = {"AGGREGATE_CACHE_MAXSIZE": "1000"}

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._save_listeners: list[Callable[[Sequence[Recording[UUID]]], None]] = []
        self._listeners_lock = threading.Lock()
        super().__init__(env)

    def construct_mapper(self) -> Mapper[UUID]:
        mapper = self.factory.mapper(
            transcoder=self.construct_transcoder(), mapper_class=FactMapper
        )
        assert isinstance(mapper, FactMapper)
        mapper.secret_keys = self.construct_secret_keys()
        return mapper

    def construct_secret_keys(self) -> SecretKeys | None:
        """The keys of the fields stored encrypted (``self.env`` is read by now)."""
        return None

    def construct_recorder(self) -> ProcessRecorder:
        return process_recorder(self.factory)  # one that writes side rows (side_tables.py)

    @property
    def process_recorder(self) -> ProcessRecorder:
        return cast(ProcessRecorder, self.recorder)

    # -- notification of new events ------------------------------------------------
    def add_save_listener(self, listener: Callable[[Sequence[Recording[UUID]]], None]) -> None:
        """Call ``listener(recordings)`` (from the saving thread) after events were recorded.

        ``recordings`` pair each domain event with its notification (id) in the log.
        """
        with self._listeners_lock:
            self._save_listeners.append(listener)

    def remove_save_listener(self, listener: Callable[[Sequence[Recording[UUID]]], None]) -> None:
        with self._listeners_lock:
            if listener in self._save_listeners:
                self._save_listeners.remove(listener)

    def _notify(self, recordings: list[Recording[UUID]]) -> None:
        if not recordings:
            return
        with self._listeners_lock:
            listeners = list(self._save_listeners)
        for listener in listeners:
            listener(recordings)

    # -- tracking -----------------------------------------------------------------
    def tracked_position(self, name: str) -> int:
        """Highest notification id recorded for ``name`` (0 when none)."""
        return self.process_recorder.max_tracking_id(name) or 0

    def record_position(self, name: str, notification_id: int) -> None:
        """Record a tracking position on its own (e.g. the relay's progress)."""
        self.process_recorder.insert_tracking(Tracking(name, notification_id))

    # -- unit of work --------------------------------------------------------------
    @contextmanager
    def unit_of_work(self, tracking: Tracking | None = None) -> Iterator[UnitOfWork]:
        """Collect changed aggregates; on a clean exit record them and ``tracking`` atomically.

        On an exception nothing is recorded (aggregates fetched in the unit are
        copies, so the repository cache stays clean).
        """
        uow = UnitOfWork(self, tracking)
        yield uow
        uow.commit()


class UnitOfWork:
    """Aggregates read and changed while handling one message or one batch.

    ``get`` returns the same object for the same id within the unit, so several
    messages of a batch see each other's (not yet recorded) changes. Events are
    recorded aggregate by aggregate, except that :meth:`checkpoint` fixes the order of
    those raised so far: a batch that checkpoints after each message records its events
    in the order the messages were handled.
    """

    def __init__(self, app: ServiceApplication, tracking: Tracking | None = None) -> None:
        self.app = app
        self.tracking = tracking
        self._aggregates: dict[UUID, Aggregate] = {}
        self._missing: set[UUID] = set()
        self._committed = False
        self._processing = ProcessingEvent[UUID](tracking)
        self._side_rows: list[SideRows] = []

    def get(self, aggregate_id: UUID, kind: type[A]) -> A | None:
        """The aggregate ``aggregate_id`` of class ``kind``, or None when there is none."""
        found = self._aggregates.get(aggregate_id)
        if found is None:
            if aggregate_id in self._missing:
                return None
            try:
                found = cast(Aggregate, self.app.repository.get(aggregate_id))
            except AggregateNotFoundError:
                self._missing.add(aggregate_id)
                return None
            self._aggregates[aggregate_id] = found
        if not isinstance(found, kind):
            raise TypeError(
                f"aggregate {aggregate_id} is a {type(found).__name__}, not {kind.__name__}"
            )
        return found

    def holds(self, aggregate_id: UUID) -> bool:
        """Whether the unit read or added the aggregate already (it may have changed it)."""
        return aggregate_id in self._aggregates

    def aggregates(self) -> list[Aggregate]:
        """The aggregates the unit read or added."""
        return list(self._aggregates.values())

    def add(self, *aggregates: Aggregate) -> None:
        """Include new or changed aggregates (those from ``get`` are included already)."""
        for aggregate in aggregates:
            self._aggregates[aggregate.id] = aggregate
            self._missing.discard(aggregate.id)

    def add_rows(self, *rows: SideRows) -> None:
        """Insert these rows of side tables in the unit's transaction (``side_tables.py``)."""
        self._side_rows.extend(found for found in rows if found.rows)

    def checkpoint(self) -> None:
        """Take the events raised so far: they are recorded before any raised after."""
        self._processing.collect_events(*self._aggregates.values())

    @property
    def pending_event_count(self) -> int:
        pending = sum(len(a.pending_events) for a in self._aggregates.values())
        return len(self._processing.events) + pending

    def commit(self) -> list[Recording[UUID]]:
        """Record all pending events and the tracking record in one transaction."""
        if self._committed:
            raise RuntimeError("unit of work already committed")
        self._committed = True
        processing = self._processing
        processing.collect_events(*self._aggregates.values())
        if not processing.events and self.tracking is None and not self._side_rows:
            return []
        if self._side_rows:  # handed to the recorder's insert_events with the events
            processing.saved_kwargs[SIDE_ROWS] = self._side_rows
        recordings = self.app._record(processing)
        cache = self.app.repository.cache
        if cache is not None:
            # The objects of this unit now equal their stored state: keep them, so the
            # next unit fast-forwards them instead of replaying every event.
            for aggregate_id, aggregate in self._aggregates.items():
                cache.put(aggregate_id, aggregate)
        self.app._take_snapshots(processing)
        self.app._notify(recordings)
        return recordings
