"""Least-privilege PostgreSQL roles on a real server: each service runs as its own role, may
read and append its stored events but never change them, reads no other service's schema; the
append-only trigger refuses changes even by the owner; the auditor reads every store and
writes nothing; provisioning twice changes nothing.

Everything happens in a database made for this module and dropped after it; the roles (which
belong to the whole server) get a random prefix and are dropped too. The server's user must
have CREATEROLE (``punto-banco infra up`` gives it to the local project role).
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

import psycopg
import pytest
from eventsourcing.persistence import Tracking
from psycopg import errors, sql
from typer.testing import CliRunner

from contracts import HOUSE
from services.dealing.application import DealingApplication
from services.dealing.tables import table_aggregate_id
from services.dev.simulation import LocalSystem, play
from services.gateway.application import BetRequest, GatewayApplication
from services.gateway.operators import OperatorKeys
from services.gateway.service import gateway_settings
from services.settlement.application import SettlementApplication
from services.shared.platform.settings import (
    PostgresSettings,
    Settings,
    SettingsError,
    replace,
    schema_name,
)
from services.shared.platform.store import open_application, prepare_store, writer_lease
from services.shared.platform.store.application import StoreNotReady
from services.shared.platform.store.lease import (
    FENCE_TABLE,
    LEASE_TABLE,
    LEASE_TABLES,
    LOCK_CLASS,
)
from services.shared.rules import Card
from services.shoe.application import ShoeApplication
from services.studio.protocol import CardRead
from services.studio_bridge.application import BridgeApplication
from services.tools.admin.provisioning import (
    SERVICES,
    SETUP_LOCK,
    Provisioning,
    StoreRoles,
    provision,
)
from services.tools.cli.db_cmd import PASSWORD_VARIABLE
from services.tools.cli.main import app
from tests.integration.audit.helpers import audit_settings
from tests.postgres_databases import database_for_roles
from tests.signing_keys import key_env

SHOE_SECRET_FILE = key_env()["PB_SHOE_SECRET_KEY_FILE"]
"""The session's shoe secret key: the shoe encrypts its orders at rest."""

pytestmark = pytest.mark.postgres

PREFIX = f"pbt{secrets.token_hex(3)}_"
"""The prefix of every role this module makes (roles belong to the whole server)."""


@dataclass(frozen=True)
class Provisioned:
    admin: PostgresSettings
    prefix: str
    done: Provisioning
    passwords: dict[str, str]

    def store(self, service: str) -> StoreRoles:
        return next(s.roles for s in self.done.stores if s.roles.service == service)

    def login(self, role: str) -> PostgresSettings:
        return dataclasses.replace(self.admin, user=role, password=self.passwords[role])

    def service_settings(self, service: str, as_role: str | None = None, **more: Any) -> Settings:
        role = as_role or self.store(service).login
        return Settings(
            service=service,
            persistence="postgres",
            postgres=self.login(role),
            postgres_create_tables=False,
            shoe_secret_key_file=SHOE_SECRET_FILE,
            **more,
        )


def connect(pg: PostgresSettings) -> psycopg.Connection[Any]:
    return psycopg.connect(
        host=pg.host,
        port=pg.port,
        dbname=pg.dbname,
        user=pg.user,
        password=pg.password,
        autocommit=True,
    )


@pytest.fixture(scope="module")
def admin(_postgres_server_env: dict[str, str]) -> Iterator[PostgresSettings]:
    """The server's user, in a database of this module's own."""
    yield from database_for_roles(_postgres_server_env, "pb_roles", PREFIX)


@pytest.fixture(scope="module")
def roles(admin: PostgresSettings) -> Provisioned:
    """The three services provisioned in the module's database, their roles under PREFIX."""
    done = provision(admin, SERVICES, role_prefix=PREFIX)
    passwords = {role.name: role.password for role in done.roles if role.password}
    return Provisioned(admin, PREFIX, done, passwords)


@pytest.fixture(scope="module")
def played(roles: Provisioned) -> Provisioned:
    """A table played by the three services, each as its own role; snapshots taken."""
    envs = {}
    for service in SERVICES:
        settings = roles.service_settings(service)
        prepare_store(settings)
        envs[service] = settings.eventsourcing_env()
    with LocalSystem(envs) as system:
        play(system, "t1", 8, bets_per_coup=4, decks=1, void_every=5, invalid_every=4, seed=3)
        system.pump()
        system.seal()
        system.dealing.take_snapshot(table_aggregate_id("t1"))
        (first,) = system.settlement.process_recorder.select_notifications(1, 1)
        system.settlement.take_snapshot(first.originator_id)  # a bet book
    return roles


def count(conn: psycopg.Connection[Any], schema: str, table: str) -> int:
    row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, table)))
    return int(row.fetchone()[0])  # type: ignore[index]


def changes(schema: str, table: str) -> list[sql.Composed]:
    target = sql.Identifier(schema, table)
    return [
        sql.SQL("UPDATE {} SET topic = topic").format(target),
        sql.SQL("DELETE FROM {}").format(target),
        sql.SQL("TRUNCATE {}").format(target),
    ]


def test_each_service_runs_as_its_own_role(played: Provisioned) -> None:
    """Events, tracking, relay positions and snapshots were written by the services' roles;
    a new Application reads them back as its role (the table from its snapshot)."""
    dealing = open_application(
        lambda env: DealingApplication(env=env), played.service_settings("dealing")
    )
    try:
        assert dealing.process_recorder.max_notification_id()
        assert dealing.tracked_position("relay:dealing") > 0  # the relay's position
        assert dealing.snapshots is not None
        snapshot = list(dealing.snapshots.get(table_aggregate_id("t1"), desc=True, limit=1))
        assert snapshot and snapshot[0].originator_version > 1
        table = dealing.repository.get(table_aggregate_id("t1"))
        assert table.version >= snapshot[0].originator_version
    finally:
        dealing.close()
    with connect(played.admin) as conn:
        for service in SERVICES:
            store = played.store(service)
            assert count(conn, store.schema, f"{service}_events") > 0
            assert count(conn, store.schema, f"{service}_tracking") > 1  # + the migration row
        assert count(conn, "dealing", "dealing_snapshots") >= 1
        assert count(conn, "settlement", "settlement_snapshots") >= 1


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_role_may_append_but_never_change_its_stored_events(
    played: Provisioned, service: str
) -> None:
    store = played.store(service)
    events, tracking = f"{service}_events", f"{service}_tracking"
    with connect(played.login(store.login)) as conn:
        before = count(conn, store.schema, events)
        for change in changes(store.schema, events):
            with pytest.raises(errors.InsufficientPrivilege, match="permission denied for table"):
                conn.execute(change)
        for change in changes(store.schema, tracking)[1:]:
            with pytest.raises(errors.InsufficientPrivilege, match="permission denied for table"):
                conn.execute(change)
        with pytest.raises(errors.InsufficientPrivilege, match="permission denied for table"):
            conn.execute(
                sql.SQL("UPDATE {} SET application_name = 'x'").format(
                    sql.Identifier(store.schema, tracking)
                )
            )
        with pytest.raises(errors.InsufficientPrivilege, match="permission denied for schema"):
            conn.execute(
                sql.SQL("CREATE TABLE {} (x int)").format(sql.Identifier(store.schema, "x"))
            )
        with pytest.raises(errors.InsufficientPrivilege, match="not an events table"):
            conn.execute(
                sql.SQL("CALL {}.pb_lock_events(%s)").format(sql.Identifier(store.schema)),
                (tracking,),
            )
        assert count(conn, store.schema, events) == before


def test_settlements_bet_id_table_is_provisioned_for_inserts_only(played: Provisioned) -> None:
    """The provisioning made settlement's bet-id table (derived state, ``side_tables``): the
    played game's answers are in it, inserted by settlement's role, which may not change or
    remove a row; the auditor reads it."""
    store = played.store("settlement")
    with connect(played.login(store.login)) as conn:
        before = count(conn, store.schema, "bet_ids")
        assert before > 0
        table = sql.Identifier(store.schema, "bet_ids")
        update = sql.SQL("UPDATE {} SET message = 'changed'").format(table)
        for change in [update, *changes(store.schema, "bet_ids")[1:]]:
            with pytest.raises(errors.InsufficientPrivilege, match="permission denied for table"):
                conn.execute(change)
        assert count(conn, store.schema, "bet_ids") == before
    with connect(played.login(played.done.auditor)) as conn:
        assert count(conn, store.schema, "bet_ids") == before
    for other in ("shoe", "dealing"):
        with connect(played.admin) as conn:
            found = conn.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tablename = 'bet_ids'",
                (played.store(other).schema,),
            ).fetchone()
            assert found == (0,)  # settlement's alone


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_role_cannot_touch_another_services_schema(
    played: Provisioned, service: str
) -> None:
    with connect(played.login(played.store(service).login)) as conn:
        for other in SERVICES:
            if other == service:
                continue
            schema = played.store(other).schema
            for statement in (
                sql.SQL("SELECT count(*) FROM {}"),
                sql.SQL("INSERT INTO {} DEFAULT VALUES"),
            ):
                with pytest.raises(
                    errors.InsufficientPrivilege, match=f"permission denied for schema {schema}"
                ):
                    conn.execute(statement.format(sql.Identifier(schema, f"{other}_events")))


def test_a_service_role_cannot_open_another_services_store(played: Provisioned) -> None:
    wrong = played.service_settings("dealing", as_role=played.store("shoe").login)
    with pytest.raises(StoreNotReady, match="may not use schema dealing"):
        prepare_store(wrong)


def test_the_trigger_refuses_changes_even_by_the_owner(played: Provisioned) -> None:
    for service in SERVICES:
        store = played.store(service)
        events = f"{service}_events"
        with connect(played.admin) as conn:
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(store.owner)))
            assert conn.execute("SELECT current_user").fetchone() == (store.owner,)
            before = count(conn, store.schema, events)
            for change, verb in zip(
                changes(store.schema, events), ("UPDATE", "DELETE", "TRUNCATE"), strict=True
            ):
                with pytest.raises(
                    errors.InsufficientPrivilege,
                    match=f"{verb} on {store.schema}.{events} refused: stored events are "
                    "append-only",
                ):
                    conn.execute(change)
            assert count(conn, store.schema, events) == before


def test_the_auditor_reads_every_store_and_writes_nothing(played: Provisioned) -> None:
    auditor = played.done.auditor
    with connect(played.login(auditor)) as conn:
        for service in SERVICES:
            schema = played.store(service).schema
            for table in ("events", "tracking", "snapshots"):
                count(conn, schema, f"{service}_{table}")
            events = sql.Identifier(schema, f"{service}_events")
            insert = sql.SQL("INSERT INTO {} SELECT * FROM {} LIMIT 1").format(events, events)
            with pytest.raises(errors.ReadOnlySqlTransaction):
                conn.execute(insert)  # its transactions are read only by default
            conn.execute("SET default_transaction_read_only = off")
            for statement in [insert, *changes(schema, f"{service}_events")]:
                with pytest.raises(
                    errors.InsufficientPrivilege, match="permission denied for table"
                ):
                    conn.execute(statement)
            with pytest.raises(errors.InsufficientPrivilege, match="permission denied for schema"):
                conn.execute(sql.SQL("CREATE TABLE {} (x int)").format(sql.Identifier(schema, "x")))
            conn.execute("RESET default_transaction_read_only")


def test_the_audit_reads_the_stores_as_the_auditor(played: Provisioned) -> None:
    settings = Settings(
        service="shoe", persistence="postgres", postgres=played.login(played.done.auditor)
    )
    report = audit_settings(settings)
    assert report.findings == [], [str(f) for f in report.findings]
    assert report.checked["coups"] > 0
    assert all(seal.seals >= 1 for seal in report.seals.values())


def _lease_attack(conn: psycopg.Connection[Any], schema: str) -> None:
    """What a login that is not the service's may try against its writer lease and fence:
    the advisory keys the lease used to be (predictable: taken and kept), and every lock mode
    that would exclude the lease or its writes (refused); it may read the tables."""
    for kind in ("lease", "write"):
        key = zlib.crc32(f"punto-banco:{kind}:{schema}".encode()) & 0x7FFFFFFF
        conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_CLASS, key))
    for table, modes in (
        (LEASE_TABLE, ("EXCLUSIVE", "SHARE", "SHARE ROW EXCLUSIVE", "ACCESS EXCLUSIVE")),
        (FENCE_TABLE, ("EXCLUSIVE", "SHARE", "ROW SHARE", "ROW EXCLUSIVE")),
    ):
        for mode in modes:
            with (
                pytest.raises(errors.InsufficientPrivilege, match="permission denied"),
                conn.transaction(),
            ):
                conn.execute(
                    sql.SQL("LOCK TABLE {} IN {} MODE NOWAIT").format(
                        sql.Identifier(schema, table), sql.SQL(mode)
                    )
                )


def test_no_other_login_can_take_a_services_writer_lease_or_freeze_its_writes(
    played: Provisioned,
) -> None:
    """The auditor (read-only) and another service's role do all they can against
    settlement's lease: the service still takes it, writes through its fence, hands it over
    to its next instance, and its open lock transaction holds no transaction id or snapshot."""
    store = played.store("settlement")
    settings = played.service_settings("settlement")
    with (
        connect(played.login(played.done.auditor)) as auditor,
        connect(played.login(played.store("dealing").login)) as dealing,
        connect(played.login(store.login)) as watcher,
    ):
        _lease_attack(auditor, store.schema)
        _lease_attack(dealing, store.schema)
        auditor.execute("BEGIN")  # a long read of both tables: ACCESS SHARE held
        for table in LEASE_TABLES:
            count(auditor, store.schema, table)

        async def take_write_and_hand_over() -> None:
            first = writer_lease(settings)
            assert await asyncio.wait_for(first.acquire(asyncio.Event(), poll=0.05), 30)
            app = open_application(SettlementApplication, settings, first.fence_env())
            try:
                recorder: Any = app.recorder
                await asyncio.to_thread(recorder.insert_tracking, Tracking("attack", 1))
            finally:
                app.close()
            held = watcher.execute(
                "SELECT backend_xid, backend_xmin, state FROM pg_stat_activity WHERE pid = %s",
                (first.pid,),
            ).fetchone()
            assert held == (None, None, "idle in transaction")  # holds back no vacuum
            second = writer_lease(settings)
            assert not await second._try()
            assert second.holder is not None and f"backend pid {first.pid}" in second.holder
            await first.release()
            assert await asyncio.wait_for(second.acquire(asyncio.Event(), poll=0.05), 30)
            await second.release()

        asyncio.run(take_write_and_hand_over())
        auditor.execute("ROLLBACK")
        kinds = watcher.execute(
            "SELECT relname, relkind, relfrozenxid::text FROM pg_class "
            "WHERE relnamespace = %s::regnamespace AND relname = ANY(%s) ORDER BY 1",
            (store.schema, list(LEASE_TABLES)),
        ).fetchall()
        assert kinds == [(FENCE_TABLE, "p", "0"), (LEASE_TABLE, "p", "0")]  # nothing to vacuum


def _catalog(admin: PostgresSettings, names: list[str]) -> dict[str, list[tuple[Any, ...]]]:
    """Everything provisioning decides: roles, memberships, owners, privileges, routines,
    triggers (in the module's database, and of the roles ``names``)."""
    queries = {
        "roles": "SELECT rolname, rolcanlogin, rolsuper, rolinherit, rolcreaterole, "
        "rolcreatedb, rolbypassrls, rolreplication, rolconnlimit FROM pg_roles "
        "WHERE rolname = ANY(%(r)s) ORDER BY 1",
        "members": "SELECT roleid::regrole::text, member::regrole::text, admin_option "
        "FROM pg_auth_members WHERE roleid::regrole::text = ANY(%(r)s) "
        "OR member::regrole::text = ANY(%(r)s) ORDER BY 1, 2",
        "settings": "SELECT setrole::regrole::text, setdatabase, setconfig "
        "FROM pg_db_role_setting WHERE setrole::regrole::text = ANY(%(r)s) ORDER BY 1",
        "schemas": "SELECT nspname, nspowner::regrole::text, nspacl::text FROM pg_namespace "
        "WHERE nspname = ANY(%(s)s) ORDER BY 1",
        "relations": "SELECT c.oid, c.relname, c.relkind, c.relowner::regrole::text, "
        "c.relacl::text FROM pg_class c WHERE c.relnamespace::regnamespace::text = ANY(%(s)s) "
        "ORDER BY 2, 1",  # (one name in several schemas: by oid too)
        "columns": "SELECT a.attrelid::regclass::text, a.attname, a.attacl::text "
        "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "WHERE c.relnamespace::regnamespace::text = ANY(%(s)s) AND a.attacl IS NOT NULL "
        "ORDER BY 1, 2",
        "routines": "SELECT p.oid::regprocedure::text, p.proowner::regrole::text, "
        "p.proacl::text, p.prosecdef, p.proconfig, p.prosrc FROM pg_proc p "
        "WHERE p.pronamespace::regnamespace::text = ANY(%(s)s) ORDER BY 1",
        "triggers": "SELECT t.oid, t.tgrelid::regclass::text, t.tgname, t.tgtype, t.tgenabled, "
        "t.tgfoid::regprocedure::text FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "WHERE c.relnamespace::regnamespace::text = ANY(%(s)s) AND NOT t.tgisinternal "
        "ORDER BY 2, 3",
        "types": "SELECT t.typname, t.typowner::regrole::text, t.typacl::text FROM pg_type t "
        "WHERE t.typnamespace::regnamespace::text = ANY(%(s)s) ORDER BY 1",
    }
    schemas = list(SERVICES)
    with connect(admin) as conn:
        return {
            name: conn.execute(query, {"r": names, "s": schemas}).fetchall()
            for name, query in queries.items()
        }


def test_provisioning_twice_changes_nothing(played: Provisioned) -> None:
    names = [role.name for role in played.done.roles]
    before = _catalog(played.admin, names)
    assert len(before["roles"]) == 2 * len(SERVICES) + 1
    again = provision(played.admin, SERVICES, role_prefix=played.prefix)
    assert _catalog(played.admin, names) == before
    assert not any(role.created or role.password for role in again.roles)
    assert not any(store.schema_created or store.taken_over for store in again.stores)
    assert all(not role.warnings for role in again.roles)
    assert [str(g) for s in again.stores for g in s.grants] == [
        str(g) for s in played.done.stores for g in s.grants
    ]


def test_a_login_holding_the_setup_lock_delays_db_setup_a_bounded_time_and_is_named(
    played: Provisioned,
) -> None:
    """Any login may take an advisory lock: the auditor holding db setup's makes it fail after
    its wait, naming the auditor, instead of hanging (an init Job would hang for ever)."""
    auditor = played.done.auditor
    with connect(played.login(auditor)) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (SETUP_LOCK,))
        with pytest.raises(SettingsError, match=f"{auditor} \\(pid"):
            provision(played.admin, SERVICES, role_prefix=played.prefix, lock_wait=0.5)
    again = provision(played.admin, SERVICES, role_prefix=played.prefix)  # free once let go
    assert not any(role.created for role in again.roles)


def test_provisioning_again_undoes_what_was_loosened_by_hand(played: Provisioned) -> None:
    store = played.store("shoe")
    with connect(played.admin) as conn:
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(store.owner)))
        conn.execute("ALTER TABLE shoe.shoe_events DISABLE TRIGGER pb_append_only")
        conn.execute(
            sql.SQL("GRANT UPDATE, DELETE ON shoe.shoe_events TO {}").format(
                sql.Identifier(store.login)
            )
        )
    provision(played.admin, SERVICES, role_prefix=played.prefix)
    denied = "permission denied for table"
    with (
        connect(played.login(store.login)) as conn,
        pytest.raises(errors.InsufficientPrivilege, match=denied),
    ):
        conn.execute("DELETE FROM shoe.shoe_events")  # the hand-made grant is gone
    with (
        connect(played.admin) as conn,
        pytest.raises(errors.InsufficientPrivilege, match="append-only"),
    ):
        conn.execute("DELETE FROM shoe.shoe_events")  # the trigger is on again


def test_provisioning_takes_over_a_store_the_service_created_itself(roles: Provisioned) -> None:
    """A store made the old way (the service's user owns schema and tables) is given to the
    owner role; the new service role reads its events and appends, and may not change them."""
    legacy = Settings(
        service="shoe",
        persistence="postgres",
        postgres=roles.admin,
        postgres_schema_prefix="old_",
        shoe_secret_key_file=SHOE_SECRET_FILE,
    )
    app = open_application(lambda env: ShoeApplication(env=env), legacy)
    try:
        app.shuffle_shoe("t1", "s1", 1, 16)
    finally:
        app.close()
    done = provision(roles.admin, ["shoe"], schema_prefix="old_", role_prefix=f"{roles.prefix}o_")
    (store,) = done.stores
    assert not store.schema_created
    assert {"shoe_events", "shoe_tracking", "stored_event_uuid"} <= set(store.taken_over)
    assert any(name.startswith("old_shoe.es_insert_events_uuid(") for name in store.taken_over)
    password = next(role.password for role in done.roles if role.name == store.roles.login)
    assert password
    own = replace(
        legacy,
        postgres=dataclasses.replace(roles.admin, user=store.roles.login, password=password),
        postgres_create_tables=False,
    )
    shoe = open_application(lambda env: ShoeApplication(env=env), own)
    try:
        assert shoe.get_shoe("t1", "s1") is not None  # written before, read as the new role
        shoe.shuffle_shoe("t2", "s2", 1, 16)
        assert shoe.get_shoe("t2", "s2") is not None
    finally:
        shoe.close()
    with (
        connect(own.postgres) as conn,
        pytest.raises(errors.InsufficientPrivilege, match="permission denied for table"),
    ):
        conn.execute("DELETE FROM old_shoe.shoe_events")
    with connect(roles.admin) as conn:
        owners = conn.execute(
            "SELECT DISTINCT relowner::regrole::text FROM pg_class "
            "WHERE relnamespace = 'old_shoe'::regnamespace"
        ).fetchall()
        assert owners == [(store.roles.owner,)]
        with pytest.raises(errors.InsufficientPrivilege, match="append-only"):
            conn.execute("DELETE FROM old_shoe.shoe_events")


def test_a_provisioned_service_never_creates_a_schema(roles: Provisioned) -> None:
    """With PB_POSTGRES_CREATE_TABLES=no a missing or unprovisioned schema is an error that
    says what to run; with it on (the default), the service's own role, which may create
    nothing there, is told to set it to no (issue 20, item 3: the default gives no rights)."""
    missing = roles.service_settings("shoe", postgres_schema_prefix="nowhere_")
    with pytest.raises(StoreNotReady, match=r"no schema nowhere_shoe .*punto-banco db setup"):
        prepare_store(missing)
    with connect(roles.admin) as conn:
        conn.execute("CREATE SCHEMA plain_shoe")
    plain = replace(
        roles.service_settings("shoe", postgres_schema_prefix="plain_"), postgres=roles.admin
    )
    with pytest.raises(StoreNotReady, match="plain_shoe was not provisioned"):
        prepare_store(plain)
    # With it on (the default), the service's own role is told what to set, and gets nothing.
    with pytest.raises(StoreNotReady, match=r"may not create tables .*CREATE_TABLES=no"):
        prepare_store(replace(roles.service_settings("shoe"), postgres_create_tables=True))


def test_the_write_lock_is_the_one_eventsourcing_takes(played: Provisioned) -> None:
    """The service's role takes its events table's EXCLUSIVE lock through the owner's
    procedure, held until its transaction ends (inserts commit in notification-id order)."""
    store = played.store("shoe")
    with connect(played.login(store.login)) as writer, connect(played.admin) as watcher:
        with writer.transaction():
            writer.execute("CALL shoe.pb_lock_events('shoe_events')")
            held = watcher.execute(
                "SELECT mode, granted FROM pg_locks WHERE relation = 'shoe.shoe_events'::regclass "
                "AND pid = %s",
                (writer.info.backend_pid,),
            ).fetchall()
            assert ("ExclusiveLock", True) in held
        after = watcher.execute(
            "SELECT count(*) FROM pg_locks WHERE relation = 'shoe.shoe_events'::regclass "
            "AND pid = %s",
            (writer.info.backend_pid,),
        ).fetchone()
        assert after == (0,)


def test_roles_that_existed_are_reported_when_they_may_do_more(roles: Provisioned) -> None:
    """An owner role that could log in is made NOLOGIN; a service role with more rights than
    granted here (an attribute, a membership) is named in the report."""
    prefix = f"{roles.prefix}w_"
    with connect(roles.admin) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(f"{prefix}shoe_owner")))
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN CREATEDB").format(sql.Identifier(f"{prefix}shoe"))
        )
        conn.execute(
            sql.SQL("GRANT {} TO {}").format(
                sql.Identifier(roles.store("dealing").owner), sql.Identifier(f"{prefix}shoe")
            )
        )
    done = provision(roles.admin, ["shoe"], schema_prefix="w_", role_prefix=prefix)
    notes = {role.name: role.warnings for role in done.roles}
    assert notes[f"{prefix}shoe_owner"] == [f"{prefix}shoe_owner could log in: made NOLOGIN"]
    assert notes[f"{prefix}shoe"] == [
        f"{prefix}shoe has CREATEDB: it may do more than granted here",
        f"{prefix}shoe is a member of {roles.store('dealing').owner}: it holds their rights",
    ]
    assert all(role.password is None for role in done.roles if role.kind != "auditor")
    with connect(roles.admin) as conn:
        row = conn.execute(
            "SELECT rolcanlogin FROM pg_roles WHERE rolname = %s", (f"{prefix}shoe_owner",)
        ).fetchone()
        assert row == (False,)
    assert any(f"warning: {prefix}shoe has CREATEDB" in line for line in done.describe())


def admin_env(admin: PostgresSettings) -> dict[str, str]:
    """The settings `db setup` connects with: the administrator's."""
    return {
        "POSTGRES_HOST": admin.host,
        "POSTGRES_PORT": str(admin.port),
        "POSTGRES_DBNAME": admin.dbname,
        "POSTGRES_USER": admin.user,
        "POSTGRES_PASSWORD": admin.password,
    }


def test_db_setup_gives_each_role_the_password_of_its_secret(roles: Provisioned) -> None:
    """Issue 20, item 3: a Kubernetes Job or compose's one-shot runs `db setup` with the
    passwords the services read from their own Secrets (PB_POSTGRES_PASSWORD_<ROLE>): each role
    gets that one, created or existing (a rotation), and it is never printed."""
    prefix = f"{roles.prefix}k_"
    service, auditor = f"{prefix}shoe", f"{prefix}auditor"
    admin = roles.admin
    env = admin_env(admin)
    command = ["db", "setup", "--services", "shoe", "--schema-prefix", "k_"]
    for password in ("first-secret-0123456789", "rotated-secret-0123456789"):
        given = {f"PB_POSTGRES_PASSWORD_{name.upper()}": password for name in (service, auditor)}
        result = CliRunner().invoke(app, [*command, "--role-prefix", prefix], env={**env, **given})
        assert result.exit_code == 0, result.output
        assert password not in result.output and result.stdout == ""
        for name in (service, auditor):
            with connect(dataclasses.replace(admin, user=name, password=password)) as conn:
                assert conn.execute("SELECT current_user").fetchone() == (name,)
    assert f"role {service} (service): exists (password set to the one given)" in result.stderr
    with pytest.raises(psycopg.OperationalError):
        connect(dataclasses.replace(admin, user=service, password="first-secret-0123456789"))


def test_db_setup_provisions_a_store_per_operator_the_gateway_serves(roles: Provisioned) -> None:
    """Issue 22: `db setup` provisions the gateway's store of each operator it serves (the
    house's ``gateway``, ``gateway_acme_<digest>``), never partitioned, with the gateway's one
    role, whose password its Secret gives; each operator's gateway service opens its store as
    that role with PB_POSTGRES_CREATE_TABLES=no, records and reads a bet, may not change it
    and reads no other service's schema."""
    prefix = f"{roles.prefix}g_"
    login, owner = f"{prefix}gateway", f"{prefix}gateway_owner"
    password = "gateway-secret-0123456789"
    admin = roles.admin
    env: dict[str, str | None] = {
        **admin_env(admin),
        "PB_OPERATORS": "house,acme",
        "PB_GATEWAY_OPERATORS": None,
        "PB_PARTITIONED": "yes",  # the table services' partitions: not the gateway's
        f"PB_POSTGRES_PASSWORD_{login.upper()}": password,
    }
    command = ["db", "setup", "--services", "gateway", "--schema-prefix", "g_"]
    result = CliRunner().invoke(app, [*command, "--role-prefix", prefix], env=env)
    assert result.exit_code == 0, result.output
    assert password not in result.output
    base = Settings(
        service="gateway",
        persistence="postgres",
        postgres=dataclasses.replace(admin, user=login, password=password),
        postgres_create_tables=False,
        postgres_schema_prefix="g_",
        operators=(HOUSE, "acme"),
    )
    schemas = {}
    for operator in (HOUSE, "acme"):
        keys = OperatorKeys(operator, ("a" * 32,), "w" * 32)
        settings = gateway_settings(base, keys)
        schemas[operator] = settings.postgres_schema

        gateway = partial(GatewayApplication, operator=operator, service=settings.service)
        app_ = open_application(gateway, settings)
        try:
            app_.request(BetRequest("b-1", "p1", "t1", "t1.coup-1", "banker", 500, "EUR"))
        finally:
            app_.close()
        again = open_application(gateway, settings)
        try:
            found = again.bet("b-1")
            assert found is not None and found.amount == 500
        finally:
            again.close()
    assert schemas == {HOUSE: "g_gateway", "acme": f"g_{schema_name('gateway-acme')}"}
    with connect(admin) as conn:
        found_schemas = {
            row[0]: row[1]
            for row in conn.execute(
                "SELECT nspname, pg_get_userbyid(nspowner) FROM pg_namespace "
                "WHERE nspname LIKE 'g\\_gateway%%'"
            )
        }
        assert found_schemas == {schema: owner for schema in schemas.values()}  # no _p<N>
    with connect(dataclasses.replace(admin, user=login, password=password)) as conn:
        for schema in schemas.values():
            assert count(conn, schema, "gateway_events") > 0
            for change in changes(schema, "gateway_events"):
                with pytest.raises(errors.InsufficientPrivilege):
                    conn.execute(change)
        for other in SERVICES:
            with pytest.raises(errors.InsufficientPrivilege, match="permission denied for schema"):
                conn.execute(
                    sql.SQL("SELECT count(*) FROM {}").format(
                        sql.Identifier(roles.store(other).schema, f"{other}_events")
                    )
                )


def test_db_setup_provisions_the_studio_bridges_store(roles: Provisioned) -> None:
    """Issue 24: `db setup --services studio-bridge` provisions the device bridge's store as
    it does the others': one schema (never partitioned: it serves one table), owned by
    ``studio_bridge_owner``, and the ``studio_bridge`` role with its Secret's password; the
    bridge records a device read as that role with PB_POSTGRES_CREATE_TABLES=no and reads it
    back, may not change it and reads no other service's schema; the auditor reads it and
    writes nothing."""
    prefix = f"{roles.prefix}b_"
    login, owner, auditor = (
        f"{prefix}studio_bridge",
        f"{prefix}studio_bridge_owner",
        f"{prefix}auditor",
    )
    password = "bridge-secret-0123456789"
    env: dict[str, str | None] = {
        **admin_env(roles.admin),
        "PB_PARTITIONED": "yes",  # the table services' partitions: not the bridge's
        **{PASSWORD_VARIABLE + name.upper(): password for name in (login, auditor)},
    }
    command = ["db", "setup", "--services", "studio-bridge", "--schema-prefix", "b_"]
    result = CliRunner().invoke(app, [*command, "--role-prefix", prefix], env=env)
    assert result.exit_code == 0, result.output
    assert password not in result.output and result.stdout == ""
    settings = Settings(
        service="studio-bridge",
        persistence="postgres",
        postgres=dataclasses.replace(roles.admin, user=login, password=password),
        postgres_create_tables=False,
        postgres_schema_prefix="b_",
    )
    schema, events = settings.postgres_schema, "studio-bridge_events"
    read = CardRead("shoe-1", 1, Card("T", "D"))
    bridge = open_application(lambda env: BridgeApplication(env=env), settings)
    try:
        bridge.take("studio-1", read, datetime(2026, 12, 6, tzinfo=UTC))
    finally:
        bridge.close()
    again = open_application(lambda env: BridgeApplication(env=env), settings)
    try:
        reads = again.reads_of("studio-1", "shoe-1")
        assert reads is not None and reads.highest == 1
    finally:
        again.close()
    with connect(roles.admin) as conn:
        schemas = conn.execute(
            "SELECT nspname, pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname LIKE %s",
            ("b\\_%",),
        ).fetchall()
        assert schemas == [(schema, owner)]  # no _p<N>
    with connect(dataclasses.replace(roles.admin, user=login, password=password)) as conn:
        recorded = count(conn, schema, events)
        assert recorded > 0
        for change in changes(schema, events):
            with pytest.raises(errors.InsufficientPrivilege):
                conn.execute(change)
        assert count(conn, schema, events) == recorded
        for other in SERVICES:
            with pytest.raises(errors.InsufficientPrivilege, match="permission denied for schema"):
                conn.execute(
                    sql.SQL("SELECT count(*) FROM {}").format(
                        sql.Identifier(roles.store(other).schema, f"{other}_events")
                    )
                )
    with connect(dataclasses.replace(roles.admin, user=auditor, password=password)) as conn:
        assert count(conn, schema, events) == recorded
        target = sql.Identifier(schema, events)
        with pytest.raises(errors.ReadOnlySqlTransaction):
            conn.execute(sql.SQL("INSERT INTO {} SELECT * FROM {}").format(target, target))
