"""One writer per PostgreSQL store, on a real server: the lease, the fence and the barrier;
and the fenced recorder's writes, sent statement by statement (store/postgres.py).

An instance that lost its writer lease (its lock connection gone while its pooled connections
live on) must commit nothing, and the next writer must not read the store before the old
writer's last transaction ended (services/shared/platform/store/lease.py).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from eventsourcing.persistence import (
    InfrastructureFactory,
    IntegrityError,
    ProgrammingError,
    StoredEvent,
    Tracking,
)
from eventsourcing.utils import Environment

from services.shared.platform.settings import FENCED_FACTORY, Settings
from services.shared.platform.store import prepare_store
from services.shared.platform.store.lease import (
    FENCE_TABLE,
    LEASE_KEEPALIVES,
    LOCK_CLASS,
    LeaseLost,
    PostgresLease,
    legacy_lease_key,
)
from services.shared.platform.store.postgres import FencedRecorder

pytestmark = pytest.mark.postgres


@pytest.fixture
def settings(postgres_env: dict[str, str]) -> Settings:
    """Settlement's settings on a schema of this test's own."""
    prefix = f"lease_{uuid.uuid4().hex[:8]}_"
    return Settings.from_env(
        "settlement",
        {**postgres_env, "PB_PERSISTENCE": "postgres", "PB_POSTGRES_SCHEMA_PREFIX": prefix},
    )


@pytest.fixture
def admin(postgres_env: dict[str, str]) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(
        host=postgres_env["POSTGRES_HOST"],
        port=postgres_env["POSTGRES_PORT"],
        dbname=postgres_env["POSTGRES_DBNAME"],
        user=postgres_env["POSTGRES_USER"],
        password=postgres_env.get("POSTGRES_PASSWORD", ""),
        autocommit=True,
    ) as connection:
        yield connection


def _recorder(settings: Settings, lease: PostgresLease) -> FencedRecorder:
    prepare_store(settings)  # the schema
    env = {**settings.eventsourcing_env(), **lease.fence_env(), "CREATE_TABLE": "yes"}
    assert env["PERSISTENCE_MODULE"] == FENCED_FACTORY
    factory = InfrastructureFactory.construct(Environment("Fenced", env))
    recorder = factory.process_recorder()
    assert isinstance(recorder, FencedRecorder) and recorder.fence is not None
    return recorder


def _event(version: int = 1) -> list[StoredEvent]:
    return [StoredEvent(uuid.uuid4(), version, "test:Event", b"{}")]


async def _taken(settings: Settings) -> PostgresLease:
    lease = PostgresLease(settings)
    stopping = asyncio.Event()
    assert await asyncio.wait_for(lease.acquire(stopping, poll=0.05), 30)
    return lease


async def test_a_second_instance_waits_naming_the_writer_and_takes_over_when_it_goes(
    settings: Settings,
) -> None:
    first = await _taken(settings)
    second = PostgresLease(settings)
    stopping = asyncio.Event()
    assert not await second._try()  # the first holds it
    assert second.holder is not None and f"backend pid {first.pid}" in second.holder
    assert second.standby_reason() is not None
    waiting = asyncio.create_task(second.acquire(stopping, poll=0.05))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await first.release()
    assert await asyncio.wait_for(waiting, 30)
    assert second.standby_reason() is None and second.pid != first.pid
    await second.release()


async def test_a_standby_told_to_stop_stops_without_the_lease(settings: Settings) -> None:
    first = await _taken(settings)
    second = PostgresLease(settings)
    stopping = asyncio.Event()
    waiting = asyncio.create_task(second.acquire(stopping, poll=0.05))
    await asyncio.sleep(0.2)
    stopping.set()
    assert await asyncio.wait_for(waiting, 10) is False
    with pytest.raises(LeaseLost):
        second.fence_env()
    await first.release()
    await second.release()


async def test_a_writer_that_lost_its_lease_commits_nothing_and_notices(
    settings: Settings, admin: psycopg.Connection[tuple[object, ...]]
) -> None:
    old = await _taken(settings)
    old_recorder = await asyncio.to_thread(_recorder, settings, old)
    await asyncio.to_thread(old_recorder.insert_events, _event(), tracking=Tracking("up", 1))

    # The old writer's lock connection dies (a network cut, a terminated backend); its pool
    # lives on. Another instance takes the lease.
    admin.execute("SELECT pg_terminate_backend(%s)", (old.pid,))
    new = await _taken(settings)
    new_recorder = await asyncio.to_thread(_recorder, settings, new)

    for write in (
        lambda: old_recorder.insert_events(_event(), tracking=Tracking("up", 2)),
        lambda: old_recorder.insert_events(_event()),
        lambda: old_recorder.insert_tracking(Tracking("up", 3)),
    ):
        with pytest.raises(ProgrammingError, match="no longer holds the writer lease"):
            await asyncio.to_thread(write)
    await asyncio.to_thread(new_recorder.insert_events, _event(), tracking=Tracking("up", 2))
    await asyncio.to_thread(new_recorder.insert_tracking, Tracking("up", 3))

    assert await asyncio.to_thread(new_recorder.max_tracking_id, "up") == 3
    notifications = await asyncio.to_thread(new_recorder.select_notifications, 1, 100)
    assert len(notifications) == 2  # the old writer's first event and the new writer's
    with pytest.raises(LeaseLost, match="was lost"):  # and the old instance stops itself
        await asyncio.wait_for(old.watch(asyncio.Event(), poll=0.05), 10)
    await new.release()
    await old.release()
    old_recorder.datastore.close()
    new_recorder.datastore.close()


async def test_the_next_writer_waits_for_the_old_writers_transaction_in_flight(
    settings: Settings, admin: psycopg.Connection[tuple[object, ...]]
) -> None:
    old = await _taken(settings)
    old_recorder = await asyncio.to_thread(_recorder, settings, old)
    # A write transaction of the old writer that passed its fence and has not committed yet.
    datastore = old_recorder.datastore
    with datastore.transaction(commit=True) as curs:
        assert old_recorder.fence is not None
        curs.execute(old_recorder.fence)
        admin.execute("SELECT pg_terminate_backend(%s)", (old.pid,))
        new = PostgresLease(settings)
        taking = asyncio.create_task(new.acquire(asyncio.Event(), poll=0.05))
        await _until_waiting_for_the_write_key(admin, settings)
        assert not taking.done()  # it has the lease but may not read yet
    assert await asyncio.wait_for(taking, 30)
    await new.release()
    await old.release()
    datastore.close()


async def _until_waiting_for_the_write_key(
    admin: psycopg.Connection[tuple[object, ...]], settings: Settings
) -> None:
    """Until the next writer's barrier waits for the old writer's transaction (the fence)."""
    fence = f"{settings.postgres_schema}.{FENCE_TABLE}"
    for _ in range(600):
        row = admin.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'relation' AND NOT granted "
            "AND mode = 'ExclusiveLock' AND relation = %s::regclass",
            (fence,),
        ).fetchone()
        if row is not None and row[0] == 1:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the next writer never waited for the old writer's transaction")


async def test_a_write_larger_than_the_socket_buffer_is_sent_whole_without_a_pipeline(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A unit of work settling several 10,000-bet coups is an INSERT of many megabytes. In
    psycopg's pipeline mode such an INSERT could stay half sent, the server and the client
    each waiting for the other (postgres.py); the fenced recorder sends statement by statement,
    so the whole write commits and its notification ids come back in the events' order."""
    lease = await _taken(settings)
    recorder = await asyncio.to_thread(_recorder, settings, lease)

    def no_pipeline(*args: object, **kwargs: object) -> None:
        raise AssertionError("the fenced recorder must not use psycopg's pipeline mode")

    monkeypatch.setattr(psycopg.Connection, "pipeline", no_pipeline)
    big = b'{"lines": "' + b"x" * (12 * 2**20) + b'"}'  # 12 MiB: several send buffers
    events = [
        StoredEvent(uuid.uuid4(), 1, "test:Event", big if n % 40 == 0 else b"{}")
        for n in range(120)
    ]
    ids = await asyncio.to_thread(recorder.insert_events, events, tracking=Tracking("up", 1))
    assert ids is not None and len(ids) == len(events) and list(ids) == sorted(ids)
    notifications = await asyncio.to_thread(recorder.select_notifications, 1, 1000)
    assert [n.id for n in notifications] == list(ids)
    assert [(n.originator_id, n.state) for n in notifications] == [
        (e.originator_id, e.state) for e in events
    ]
    assert await asyncio.to_thread(recorder.max_tracking_id, "up") == 1

    # A transaction that fails (an event version taken) commits nothing, tracking included.
    clash = [StoredEvent(uuid.uuid4(), 1, "test:Event", big), events[1]]
    with pytest.raises(IntegrityError):
        await asyncio.to_thread(recorder.insert_events, clash, tracking=Tracking("up", 2))
    assert await asyncio.to_thread(recorder.max_tracking_id, "up") == 1
    assert len(await asyncio.to_thread(recorder.select_notifications, 1, 1000)) == len(events)
    await lease.release()
    recorder.datastore.close()


async def test_the_server_probes_the_lease_holders_connection_so_a_lost_machine_lets_go(
    settings: Settings,
) -> None:
    """A holder whose machine vanished sends no FIN: the server finds its session dead by TCP
    keepalive (set per session on the lease connection, ~25 s), and the lock is released."""
    lease = await _taken(settings)
    connection = lease._connection
    assert connection is not None
    for name, value in LEASE_KEEPALIVES.items():
        cursor = await connection.execute(f"SHOW {name}")
        row = await cursor.fetchone()
        assert row is not None and row[0] in (str(value), f"{value}s"), (name, row)
    await lease.release()


async def test_partitioned_processes_share_the_schema_lease_and_exclude_an_unpartitioned_writer(
    settings: Settings,
) -> None:
    """PostgreSQL: the shared advisory lock of partitioned processes and the writer's
    exclusive one exclude each other; partitioned processes do not exclude each other."""
    first, second = PostgresLease(settings, shared=True), PostgresLease(settings, shared=True)
    stopping = asyncio.Event()
    assert await asyncio.wait_for(first.acquire(stopping, poll=0.05), 30)
    assert await asyncio.wait_for(second.acquire(stopping, poll=0.05), 30)
    unpartitioned = PostgresLease(settings)
    assert not await unpartitioned._try()
    assert unpartitioned.holder is not None  # a partitioned process, named
    await first.release()
    assert not await unpartitioned._try()
    await second.release()
    assert await unpartitioned._try()
    late = PostgresLease(settings, shared=True)
    assert not await late._try()
    await unpartitioned.release()
    assert await asyncio.wait_for(late.acquire(stopping, poll=0.05), 30)
    await late.release()


@pytest.mark.parametrize("shared", [False, True], ids=["writer", "partitioned"])
async def test_a_released_lease_is_free_the_moment_release_returns(
    settings: Settings, shared: bool
) -> None:
    """A graceful hand-over does not wait for the server to notice a closed socket: release
    unlocks on the session, so the successor's very next try takes the lease (repeated, as the
    race it protects against was lost under load, rarely)."""
    for _ in range(20):
        holder = PostgresLease(settings, shared=shared)
        assert await holder._try()
        successor = PostgresLease(settings)  # exclusive: excluded by either kind of holder
        assert not await successor._try()
        await holder.release()
        assert await successor._try()
        await successor.release()


async def test_the_lease_outlives_idle_timeouts_and_holds_back_no_vacuum(
    settings: Settings, admin: psycopg.Connection[tuple[object, ...]]
) -> None:
    """The lease is a lock held in an open transaction: its session turns off the timeouts
    that would end it, and it holds neither a transaction id nor a snapshot (vacuum goes on)."""
    lease = await _taken(settings)
    connection = lease._connection
    assert connection is not None
    cursor = await connection.execute("SHOW idle_in_transaction_session_timeout")
    assert await cursor.fetchone() == ("0",)
    held = admin.execute(
        "SELECT backend_xid, backend_xmin, state FROM pg_stat_activity WHERE pid = %s",
        (lease.pid,),
    ).fetchone()
    assert held == (None, None, "idle in transaction")
    await lease.release()


async def test_a_timeout_that_ends_the_lease_transaction_loses_the_lease_and_is_noticed(
    settings: Settings, admin: psycopg.Connection[tuple[object, ...]]
) -> None:
    """A server that ends the idle transaction anyway (a timeout set on the session) ends the
    lease like a lost connection: the fence refuses the old writer, its watch notices, and
    another instance takes over."""
    old = await _taken(settings)
    recorder = await asyncio.to_thread(_recorder, settings, old)
    assert old._connection is not None
    await old._connection.execute("SET idle_in_transaction_session_timeout = '100ms'")
    for _ in range(600):  # the server ends the session once it has been idle 100 ms
        gone = admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (old.pid,))
        if gone.fetchone() is None:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the server never ended the idle lease transaction")
    with pytest.raises(ProgrammingError, match="no longer holds the writer lease"):
        await asyncio.to_thread(recorder.insert_tracking, Tracking("up", 1))
    with pytest.raises(LeaseLost, match="was lost"):
        await asyncio.wait_for(old.watch(asyncio.Event(), poll=0.05), 10)
    new = await _taken(settings)
    await new.release()
    await old.release()
    recorder.datastore.close()


async def test_an_instance_of_the_version_before_still_writing_is_waited_for(
    settings: Settings,
) -> None:
    """Before, the lease was an advisory lock: during a rolling update, one held by a session
    of the service's own role is an older instance still writing; the new one waits for it."""
    older = await psycopg.AsyncConnection.connect(
        **settings.postgres.connect_options(), autocommit=True
    )
    await older.execute(
        "SELECT pg_advisory_lock(%s, %s)",
        (LOCK_CLASS, legacy_lease_key(settings.postgres_schema)),
    )
    lease = PostgresLease(settings)
    assert not await lease._try()
    assert lease.holder == f"backend pid {older.info.backend_pid}, of the version before"
    await older.close()
    assert await lease._try()
    await lease.release()
