"""A service's eventsourcing Application, its unit of work, and the one thread that calls it.

:class:`ServiceApplication` records a unit's events, its tracking record and its side rows in
ONE transaction (:meth:`~ServiceApplication.unit_of_work`), tells listeners what it saved (the
relay wakes at once), and stores facts through :class:`FactMapper` (line records typed, the
fields a fact declares ``ENCRYPTED`` encrypted at rest). :func:`open_application` prepares the
store first (a private SQLite file, or the PostgreSQL schema, created or checked).
:class:`AppWorker` runs every Application call of a service on one thread, in order, and knows
when one is stuck (``/health`` fails then: a restart is safe, nothing was committed).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, ParamSpec, TypeVar, cast
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application, ProcessingEvent
from eventsourcing.domain import Aggregate, DomainEventProtocol
from eventsourcing.persistence import (
    JSONTranscoder,
    Mapper,
    ProcessRecorder,
    Recording,
    StoredEvent,
    Tracking,
)

from services.shared.facts.base import LineRecord, line_fields
from services.shared.platform.security.encryption import (
    FieldDecryptionError,
    FieldEncryptionError,
    decrypt_fields,
    encrypt_fields,
)
from services.shared.platform.security.keys import SecretKeys
from services.shared.platform.settings import Settings
from services.shared.platform.store.side_tables import SIDE_ROWS, SideRows, process_recorder

P = ParamSpec("P")
T = TypeVar("T")

log = logging.getLogger(__name__)

STUCK_SECONDS = 120.0
"""A call running longer than this is stuck: the longest unit of work (a coup of 10,000 bets
settled in one transaction) takes well under a second, a start-up longer (not watched)."""
WATCH_SECONDS = 5.0


class AppWorker:
    """Run blocking Application calls one at a time off the event loop."""

    def __init__(
        self,
        name: str,
        stuck_after: float = STUCK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.stuck_after = stuck_after
        self.watching = False  # set once the service serves: start-up calls may be long
        self._clock = clock
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-app")
        self._running: tuple[str, float] | None = None  # what runs now, and since when

    async def call(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, functools.partial(self._run, fn, *args, **kwargs)
        )

    def _run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        self._running = (getattr(fn, "__qualname__", repr(fn)), self._clock())
        try:
            return fn(*args, **kwargs)
        finally:
            self._running = None

    def stuck(self) -> str | None:
        """Why the worker is stuck (a watched call has run too long), else None."""
        running = self._running
        if not self.watching or running is None:
            return None
        what, since = running
        seconds = self._clock() - since
        if seconds <= self.stuck_after:
            return None
        return (
            f"{self.name}: the store call {what} has run for {seconds:.0f} s "
            f"(more than {self.stuck_after:.0f} s): stuck; restart the process"
        )

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=False)


async def watch_worker(worker: AppWorker, stopping: asyncio.Event) -> None:
    """Log (once per episode) a worker that is stuck, and when it moves again."""
    reported = False
    while not stopping.is_set():
        why = worker.stuck()
        if why is not None and not reported:
            log.error("%s", why)
            reported = True
        elif why is None and reported:
            log.warning("%s: the stuck store call has returned", worker.name)
            reported = False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), WATCH_SECONDS)


_new_tuple = tuple.__new__


@functools.cache
def lines_of(cls: type) -> tuple[tuple[str, type[LineRecord]], ...]:
    """``cls``'s fields of line records (none for most events; worked out once per class)."""
    try:
        return line_fields(cls)
    except (NameError, TypeError):  # annotations only a type checker resolves: no lines
        return ()


ENVELOPE = "encrypted"
"""The field that holds the ciphertext of a fact's ``ENCRYPTED`` fields."""


class FactMapper(Mapper[UUID]):
    """eventsourcing's ``Mapper``, then the line fields of the event's class typed and its
    encrypted fields decrypted (``secret_keys``: set by an Application whose facts have any)."""

    secret_keys: SecretKeys | None = None

    def to_stored_event(self, domain_event: DomainEventProtocol[UUID]) -> StoredEvent:
        secret: tuple[str, ...] = getattr(type(domain_event), "ENCRYPTED", ())
        if secret:
            domain_event = self._encrypted(domain_event, secret)
        return super().to_stored_event(domain_event)

    def _encrypted(
        self, event: DomainEventProtocol[UUID], secret: tuple[str, ...]
    ) -> DomainEventProtocol[UUID]:
        """A copy of ``event`` with its secret fields null and their ciphertext."""
        state: dict[str, Any] = dict(vars(event))
        envelope = state.get(ENVELOPE)
        if envelope is None:  # a new event (one read from the store keeps its ciphertext)
            if self.secret_keys is None:
                raise FieldEncryptionError(
                    f"{type(event).__qualname__}: no secret keys to encrypt "
                    f"{', '.join(secret)} with: refusing to store them in plain text"
                )
            values = {name: state[name] for name in secret}
            envelope = encrypt_fields(self.secret_keys, values, _binding(type(event), state))
        state.update(dict.fromkeys(secret), **{ENVELOPE: envelope})
        copy = object.__new__(type(event))
        object.__setattr__(copy, "__dict__", state)
        return copy

    def to_domain_event(self, stored_event: StoredEvent) -> DomainEventProtocol[UUID]:
        event = super().to_domain_event(stored_event)
        secret: tuple[str, ...] = getattr(type(event), "ENCRYPTED", ())
        if secret and event.__dict__.get(ENVELOPE) is not None:
            self._decrypt(event, secret, stored_event)
        typed = lines_of(type(event))
        if typed:
            state: dict[str, Any] = event.__dict__
            for name, record in typed:
                lines = state.get(name)
                if lines is not None:
                    # In place, each array freed as its record is made: the cheapest way
                    # measured (about 0.25 us a line; 10,000 lines for a busy coup).
                    for index, line in enumerate(lines):
                        lines[index] = _new_tuple(record, line)
        return event

    def _decrypt(
        self, event: DomainEventProtocol[UUID], secret: tuple[str, ...], stored: StoredEvent
    ) -> None:
        state: dict[str, Any] = event.__dict__
        where = f"{stored.topic} of {stored.originator_id} (version {stored.originator_version})"
        if any(state.get(name) is not None for name in secret):
            raise FieldDecryptionError(f"{where}: holds its secret fields in plain text too")
        if self.secret_keys is None:
            raise FieldDecryptionError(f"{where}: encrypted, and no secret keys to read it")
        values = decrypt_fields(
            self.secret_keys, state[ENVELOPE], _binding(type(event), state), where
        )
        if set(values) != set(secret):
            raise FieldDecryptionError(f"{where}: the ciphertext holds {sorted(values)}")
        state.update(values)


def _binding(cls: type, state: dict[str, Any]) -> dict[str, str]:
    """What the ciphertext of an event of ``cls`` is bound to: its aggregate and fields."""
    binding = {"aggregate_id": str(state["originator_id"])}
    for name in getattr(cls, "ENCRYPTION_BINDS", ()):
        binding[name] = str(state[name])
    return binding


A = TypeVar("A", bound=Aggregate)


class ServiceApplication(Application[UUID]):
    """Base class of the shoe, dealing and settlement Applications."""

    # Keep recently used aggregates in memory, so a busy table is not replayed from its first
    # event every time. Not fast-forwarded from the store on each get (a SELECT an aggregate
    # read): one writer (the store's writer lease) and every write through this Application,
    # which puts what it records in the cache, so a cached aggregate is current; a unit of work
    # that fails evicts what it touched (its commit may have landed though it raised).
    env: ClassVar[dict[str, str]] = {
        "AGGREGATE_CACHE_MAXSIZE": "1000",
        "AGGREGATE_CACHE_FASTFORWARD": "n",
    }

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._save_listeners: list[Callable[[Sequence[Recording[UUID]]], None]] = []
        self._listeners_lock = threading.Lock()
        super().__init__(env)

    def construct_mapper(self) -> Mapper[UUID]:
        transcoder = self.construct_transcoder()
        if isinstance(transcoder, JSONTranscoder):  # an event holds no cycle: its lists are
            transcoder.encoder.check_circular = False  # not checked for one (15 % of encoding)
        mapper = self.factory.mapper(transcoder=transcoder, mapper_class=FactMapper)
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
        """Call ``listener(recordings)`` (from the saving thread) after events were recorded."""
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
        """Collect changed aggregates; on a clean exit record them and ``tracking`` atomically
        (on a failure, what the unit touched leaves the cache: :meth:`UnitOfWork.forget`)."""
        uow = UnitOfWork(self, tracking)
        try:
            yield uow
        except BaseException:
            uow.forget()
            raise
        uow.commit()  # which evicts them itself if it raises


class UnitOfWork:
    """Aggregates read and changed while handling one message or one batch."""

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
        processing = self._processing
        for aggregate_id, aggregate in self._aggregates.items():
            # ProcessingEvent.collect_events, without its two runtime Protocol checks per
            # aggregate (15 us together on Python 3.11; these are all aggregates)
            processing.events.extend(aggregate.collect_events())
            processing.aggregates[aggregate_id] = aggregate

    def commit(self) -> list[Recording[UUID]]:
        """Record all pending events and the tracking record in one transaction."""
        if self._committed:
            raise RuntimeError("unit of work already committed")
        self._committed = True
        self.checkpoint()
        processing = self._processing
        if not processing.events and self.tracking is None and not self._side_rows:
            return []
        if self._side_rows:  # handed to the recorder's insert_events with the events
            processing.saved_kwargs[SIDE_ROWS] = self._side_rows
        try:  # _record puts this unit's aggregates in the cache
            recordings = self.app._record(processing)
            self.app._take_snapshots(processing)
        except BaseException:  # the commit may have landed though it raised: read it next
            self.forget()
            raise
        self.app._notify(recordings)
        return recordings

    def forget(self, which: Callable[[Aggregate], bool] = lambda aggregate: True) -> None:
        """The aggregates of this unit that ``which`` picks (all: it failed, and they may hold
        its changes or be older than the store) leave the cache: the next get reads them."""
        cache = self.app.repository.cache
        if cache is None:
            return
        for aggregate_id, aggregate in self._aggregates.items():
            if which(aggregate):
                with contextlib.suppress(KeyError):
                    cache.get(aggregate_id, evict=True)


TApp = TypeVar("TApp", bound=ServiceApplication)

LOCK_PROCEDURE = "pb_lock_events"
"""The owner's procedure taking an events table's write lock (made by ``db setup``)."""


class StoreNotReady(RuntimeError):
    """The service's PostgreSQL store is missing or not usable by its role (says what to do)."""


def prepare_store(settings: Settings) -> None:
    """Create the SQLite data folder or the service's PostgreSQL schema if missing; check a
    provisioned store (``PB_POSTGRES_CREATE_TABLES=no``)."""
    if settings.persistence == "postgres":
        _prepare_schema(settings)
    else:
        private_sqlite_file(settings.sqlite_path)


def _prepare_schema(settings: Settings) -> None:
    import psycopg
    from psycopg import sql

    schema = settings.postgres_schema
    with psycopg.connect(**settings.postgres.connect_options(), autocommit=True) as conn:
        found = conn.execute(
            "SELECT has_schema_privilege(n.oid, 'USAGE'), EXISTS (SELECT 1 FROM pg_proc p "
            "WHERE p.pronamespace = n.oid AND p.proname = %s), "
            "has_schema_privilege(n.oid, 'CREATE') "
            "FROM pg_namespace n WHERE n.nspname = %s",
            (LOCK_PROCEDURE, schema),
        ).fetchone()
        setup = "`punto-banco db setup` (as an administrator)"
        if settings.postgres_create_tables:
            if found is None:  # CREATE SCHEMA checks the right to create even if it exists
                conn.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
                )
            elif not found[2]:  # CREATE TABLE IF NOT EXISTS would be refused the same way
                raise StoreNotReady(
                    f"role {settings.postgres.user} may not create tables in schema {schema}, "
                    f"provisioned by {setup}: set PB_POSTGRES_CREATE_TABLES=no"
                )
            return
        if found is None:
            raise StoreNotReady(
                f"no schema {schema} in {settings.describe_store()}: provision it with {setup}, "
                "or set PB_POSTGRES_CREATE_TABLES=yes to let the service create it"
            )
        if not found[0]:
            raise StoreNotReady(
                f"role {settings.postgres.user} may not use schema {schema}: give the service "
                f"its own role's POSTGRES_USER / POSTGRES_PASSWORD, or run {setup} again"
            )
        if not found[1]:
            raise StoreNotReady(
                f"schema {schema} was not provisioned by {setup} (no {LOCK_PROCEDURE} there): "
                "run it, or set PB_POSTGRES_CREATE_TABLES=yes"
            )


def private_sqlite_file(path: Path) -> None:
    """Create ``path``'s folder (0700) and the empty database file (0600) if missing; make an
    existing database (and its -wal and -shm files) owner-only."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if file.exists() and file.stat().st_mode & 0o077:
            file.chmod(0o600)


def open_application(
    factory: Callable[[dict[str, str]], TApp],
    settings: Settings,
    extra_env: Mapping[str, str] | None = None,
) -> TApp:
    """Prepare the store and construct the Application with the settings' environment
    (plus ``extra_env``: the writer lease's fence, ``store/lease.py``)."""
    prepare_store(settings)
    return factory({**settings.eventsourcing_env(), **(extra_env or {})})
