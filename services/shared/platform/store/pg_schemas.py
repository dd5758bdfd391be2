"""What lives in a service's schema, as the provisioning (``pg_roles.py``) makes it.

- :func:`ensure_schema`: the schema, created for its owner role or given to it;
- :func:`take_over`: every table, view, free-standing sequence, type and routine of the schema
  that another role owns is given to the owner (a store the services created themselves,
  before they had roles of their own);
- :func:`create_tables`: what a service's Application uses, made by eventsourcing itself
  (``CREATE_TABLE``) through a connection acting as the owner (``pg_store.OwnerRoleFactory``):
  the process recorder's events and tracking tables, the snapshots table; and the service's
  side tables (``side_tables.py``: settlement's bet ids, derived state);
- :func:`append_only`: on each events table the trigger ``pb_append_only`` refusing UPDATE,
  DELETE and TRUNCATE (FOR EACH STATEMENT, before anything changes, whoever runs them), and
  the procedure ``pb_lock_events`` (SECURITY DEFINER, ``search_path`` pinned) that takes an
  events table's write lock for the service (``pg_store.py``);
- :func:`lease_tables`: the writer lease's two tables (``writer_fence.py``), whose locks the
  service's role alone may take (UPDATE on them: they are never written);
- :func:`grants` and :func:`apply_grants`: the privileges of the service's role and of the
  auditor, applied after revoking everything from PUBLIC, the service and the auditor, so that
  the result is the same however often it runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from services.shared.platform.settings import PostgresSettings
from services.shared.platform.store.application import ServiceApplication
from services.shared.platform.store.pg_store import LOCK_PROCEDURE, OWNER_ROLE_FACTORY, SET_ROLE
from services.shared.platform.store.side_tables import SIDE_TABLES, create_side_tables
from services.shared.platform.store.writer_fence import LEASE_TABLES, lease_tables_statements

TRIGGER = "pb_append_only"
REFUSE_FUNCTION = "pb_refuse_change"


@dataclass(frozen=True)
class StoreRoles:
    """A service's schema and its two roles (``partition``: the schema is that partition's
    store of a partitioned service, ``<schema prefix><service>_p<N>``, same roles)."""

    service: str
    schema: str
    owner: str
    login: str
    partition: int | None = None


@dataclass(frozen=True)
class Grant:
    """One privilege given to one role (the statement and its description)."""

    privileges: str
    kind: str  # SCHEMA, TABLE, SEQUENCE, PROCEDURE, ALL TABLES IN SCHEMA
    target: tuple[str, ...]
    grantee: str

    def statement(self) -> sql.Composed:
        target: sql.Composable = sql.Identifier(*self.target)
        if self.kind == "PROCEDURE":
            target = sql.Composed([target, sql.SQL("(text)")])
        return sql.SQL("GRANT {} ON {} {} TO {}").format(
            sql.SQL(self.privileges), sql.SQL(self.kind), target, sql.Identifier(self.grantee)
        )

    def __str__(self) -> str:
        return f"{self.privileges} on {self.kind.lower()} {'.'.join(self.target)}"


@dataclass
class StoreTables:
    """The tables of one store, by what eventsourcing uses them for."""

    events: list[str] = field(default_factory=list)
    sequences: list[str] = field(default_factory=list)  # the events tables' notification ids
    tracking: list[str] = field(default_factory=list)
    snapshots: list[str] = field(default_factory=list)
    side: list[str] = field(default_factory=list)  # derived state (side_tables.SIDE_TABLES)
    lease: list[str] = field(default_factory=list)  # the writer lease's (writer_fence.py)
    others: list[str] = field(default_factory=list)


def grants(store: StoreRoles, tables: StoreTables, auditor: str) -> list[Grant]:
    """Every privilege of the service's role and the auditor on ``store`` (nothing else; the
    lease's tables: UPDATE, the privilege PostgreSQL asks of whoever takes their lock modes,
    ``writer_fence.py``; they take no row)."""
    schema, login = store.schema, store.login
    given = [Grant("USAGE", "SCHEMA", (schema,), login)]
    given += [Grant("SELECT, INSERT", "TABLE", (schema, t), login) for t in tables.events]
    given += [Grant("USAGE", "SEQUENCE", (schema, s), login) for s in tables.sequences]
    if tables.events:
        given.append(Grant("EXECUTE", "PROCEDURE", (schema, LOCK_PROCEDURE), login))
    for table in tables.tracking:
        given.append(Grant("SELECT, INSERT", "TABLE", (schema, table), login))
        given.append(Grant("UPDATE (notification_id)", "TABLE", (schema, table), login))
    given += [Grant("SELECT, INSERT", "TABLE", (schema, t), login) for t in tables.snapshots]
    given += [Grant("SELECT, INSERT", "TABLE", (schema, t), login) for t in tables.side]
    given += [Grant("UPDATE", "TABLE", (schema, t), login) for t in tables.lease]
    given.append(Grant("USAGE", "SCHEMA", (schema,), auditor))
    given.append(Grant("SELECT", "ALL TABLES IN SCHEMA", (schema,), auditor))
    return given


def lease_grants(store: StoreRoles, auditor: str) -> list[Grant]:
    """The grants on a schema holding only the lease's tables for ``pg_roles.provision``: the
    service's role may lock them (UPDATE, the privilege PostgreSQL asks for those lock modes:
    the tables take no row), the auditor may read them."""
    schema, login = store.schema, store.login
    return [
        Grant("USAGE", "SCHEMA", (schema,), login),
        *(Grant("UPDATE", "TABLE", (schema, t), login) for t in LEASE_TABLES),
        Grant("USAGE", "SCHEMA", (schema,), auditor),
        *(Grant("SELECT", "TABLE", (schema, t), auditor) for t in LEASE_TABLES),
    ]


def lease_tables(conn: psycopg.Connection[Any], store: StoreRoles) -> list[str]:
    """Create the writer lease's tables of the schema if missing (acting as its owner)."""
    for statement in lease_tables_statements(store.schema):
        conn.execute(statement)
    return list(LEASE_TABLES)


@contextmanager
def acting_as(conn: psycopg.Connection[Any], role: str) -> Iterator[None]:
    conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
    yield
    conn.execute("RESET ROLE")


def ensure_schema(conn: psycopg.Connection[Any], store: StoreRoles) -> bool:
    """Create the schema for its owner, or give an existing one to it; True if created."""
    row = conn.execute(
        "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = %s", (store.schema,)
    ).fetchone()
    schema, owner = sql.Identifier(store.schema), sql.Identifier(store.owner)
    if row is None:
        conn.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(schema, owner))
        return True
    if row[0] != store.owner:
        conn.execute(sql.SQL("ALTER SCHEMA {} OWNER TO {}").format(schema, owner))
    return False


def create_tables(admin: PostgresSettings, store: StoreRoles) -> StoreTables:
    """Let eventsourcing create what a service's Application uses (its process recorder:
    events and tracking; its snapshots), and create its side tables
    (``side_tables.SIDE_TABLES``), connected as ``admin`` acting as the owner."""
    env = {
        "PERSISTENCE_MODULE": OWNER_ROLE_FACTORY,
        SET_ROLE: store.owner,
        "POSTGRES_HOST": admin.host,
        "POSTGRES_PORT": str(admin.port),
        "POSTGRES_DBNAME": admin.dbname,
        "POSTGRES_USER": admin.user,
        "POSTGRES_PASSWORD": admin.password,
        "POSTGRES_SCHEMA": store.schema,
        "POSTGRES_POOL_SIZE": "1",
        "POSTGRES_MAX_OVERFLOW": "0",
        "CREATE_TABLE": "yes",
    }
    shape = type(
        f"{store.service.title()}Store",
        (ServiceApplication,),
        {"name": store.service, "is_snapshotting_enabled": True},
    )
    app: ServiceApplication = shape(env=env)
    try:
        recorder: Any = app.recorder
        tables = StoreTables([recorder.events_table_name], [], [recorder.tracking_table_name])
        if app.snapshots is not None:
            snapshots: Any = app.snapshots.recorder
            tables.snapshots.append(snapshots.events_table_name)
        side = SIDE_TABLES.get(store.service, ())
        create_side_tables(app.factory, recorder, side)
        tables.side = [table.name for table in side]
        return tables
    finally:
        app.close()


def take_over(conn: psycopg.Connection[Any], store: StoreRoles) -> list[str]:
    """Give the owner every table, view, free-standing sequence, type and routine of the
    schema that another role owns (a store created before its roles were)."""
    owner = sql.Identifier(store.owner)
    taken = []
    relations = conn.execute(
        "SELECT c.relkind, c.relname FROM pg_class c "
        "WHERE c.relnamespace = %s::regnamespace AND c.relowner <> %s::regrole "
        "AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S', 'c') "
        "AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass "
        "AND d.objid = c.oid AND d.deptype IN ('a', 'i') AND c.relkind = 'S') "
        "ORDER BY c.relkind <> 'r', c.relname",
        (store.schema, store.owner),
    ).fetchall()
    kinds = {
        "r": "TABLE",
        "p": "TABLE",
        "v": "VIEW",
        "m": "MATERIALIZED VIEW",
        "f": "FOREIGN TABLE",
        "S": "SEQUENCE",
        "c": "TYPE",
    }
    for kind, name in relations:
        target = sql.Identifier(store.schema, name)
        conn.execute(sql.SQL("ALTER {} {} OWNER TO {}").format(sql.SQL(kinds[kind]), target, owner))
        taken.append(name)
    routines = conn.execute(
        "SELECT p.oid::regprocedure::text FROM pg_proc p "
        "WHERE p.pronamespace = %s::regnamespace AND p.proowner <> %s::regrole ORDER BY 1",
        (store.schema, store.owner),
    ).fetchall()
    for (signature,) in routines:
        # regprocedure's text is the routine's signature, its names quoted where needed.
        conn.execute(sql.SQL("ALTER ROUTINE {} OWNER TO {}").format(sql.SQL(signature), owner))
        taken.append(signature)
    return taken


def describe_tables(conn: psycopg.Connection[Any], store: StoreRoles, tables: StoreTables) -> None:
    """Fill in the events tables' sequences and the schema's other tables."""
    for table in tables.events:
        row = conn.execute(
            "SELECT relname FROM pg_class "
            "WHERE oid = pg_get_serial_sequence(%s, 'notification_id')::regclass",
            (sql.Identifier(store.schema, table).as_string(conn),),
        ).fetchone()
        if row is not None:
            tables.sequences.append(str(row[0]))
    known = {*tables.events, *tables.tracking, *tables.snapshots, *tables.side, *LEASE_TABLES}
    tables.others = [
        row[0]
        for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (store.schema,)
        )
        if row[0] not in known
    ]


def append_only(conn: psycopg.Connection[Any], store: StoreRoles, tables: StoreTables) -> None:
    """The trigger refusing UPDATE, DELETE and TRUNCATE on each events table, and the
    procedure taking an events table's write lock as the owner (``pg_store.py``)."""
    schema = sql.Identifier(store.schema)
    conn.execute(
        sql.SQL(
            "CREATE OR REPLACE FUNCTION {}.{}() RETURNS trigger LANGUAGE plpgsql "
            "SET search_path = pg_catalog, pg_temp AS $body$ BEGIN "
            "RAISE EXCEPTION '% on %.% refused: stored events are append-only', "
            "TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege', "
            "HINT = 'a stored event is never changed: record a new event that corrects it'; "
            "END $body$"
        ).format(schema, sql.Identifier(REFUSE_FUNCTION))
    )
    conn.execute(
        sql.SQL(
            "CREATE OR REPLACE PROCEDURE {}.{}(events_table text) LANGUAGE plpgsql "
            "SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$ BEGIN "
            "IF NOT events_table = ANY (ARRAY[{}]::text[]) THEN "
            "RAISE EXCEPTION '% is not an events table of schema %', events_table, {} "
            "USING ERRCODE = 'insufficient_privilege'; END IF; "
            "EXECUTE format('LOCK TABLE %I.%I IN EXCLUSIVE MODE', {}, events_table); "
            "END $body$"
        ).format(
            schema,
            sql.Identifier(LOCK_PROCEDURE),
            sql.SQL(", ").join(sql.Literal(table) for table in tables.events),
            sql.Literal(store.schema),
            sql.Literal(store.schema),
        )
    )
    for table in tables.events:
        target = sql.Identifier(store.schema, table)
        found = conn.execute(
            "SELECT tgenabled FROM pg_trigger WHERE tgrelid = %s::regclass AND tgname = %s",
            (target.as_string(conn), TRIGGER),
        ).fetchone()
        if found is None:
            conn.execute(
                sql.SQL(
                    "CREATE TRIGGER {} BEFORE UPDATE OR DELETE OR TRUNCATE ON {} "
                    "FOR EACH STATEMENT EXECUTE FUNCTION {}.{}()"
                ).format(sql.Identifier(TRIGGER), target, schema, sql.Identifier(REFUSE_FUNCTION))
            )
        elif found[0] != "O":  # disabled (or for replicas only): on again, as made
            conn.execute(
                sql.SQL("ALTER TABLE {} ENABLE TRIGGER {}").format(target, sql.Identifier(TRIGGER))
            )


def apply_grants(
    conn: psycopg.Connection[Any], store: StoreRoles, auditor: str, given: Sequence[Grant]
) -> None:
    """Revoke everything from PUBLIC, the service and the auditor, then grant ``given``."""
    schema = sql.Identifier(store.schema)
    everyone = sql.SQL("PUBLIC, {}, {}").format(
        sql.Identifier(store.login), sql.Identifier(auditor)
    )
    for objects in ("SCHEMA", "ALL TABLES IN SCHEMA", "ALL SEQUENCES IN SCHEMA"):
        conn.execute(
            sql.SQL("REVOKE ALL ON {} {} FROM {}").format(sql.SQL(objects), schema, everyone)
        )
    conn.execute(
        sql.SQL("REVOKE ALL ON ALL ROUTINES IN SCHEMA {} FROM {}").format(schema, everyone)
    )
    for grant in given:
        conn.execute(grant.statement())
