"""``punto-banco db setup``: least-privilege PostgreSQL roles and schemas for the services' stores.

Run by an administrator, never by the services. Per service: ``<service>_owner`` (NOLOGIN) owns
the schema and all in it (an existing store is taken over), with an append-only trigger on every
events table and the procedure that locks it for writing; ``<service>`` (LOGIN) may SELECT and
INSERT its events, tracking, snapshots and side rows, lock its lease tables, and nothing else;
``auditor`` reads every schema. ``partitions=N`` provisions a schema per partition. An instance
``gateway-<operator>`` gets its own schema (``settings.schema_name``) with the gateway's roles;
the gateway is never partitioned (one store per operator it serves), nor is the studio bridge
(``studio-bridge``: roles ``studio_bridge_owner`` and ``studio_bridge``, its schema
``settings.schema_name``'s). Idempotent: what is missing is created, and every grant revoked
and given again (docs/security.md).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import psycopg
from eventsourcing.postgres import PostgresFactory
from eventsourcing.utils import Environment, EnvType
from psycopg import sql

from services.shared.platform.settings import (
    INSTANCE_NAME,
    MAX_PARTITIONS,
    SERVICE_NAME,
    PostgresSettings,
    SettingsError,
    schema_name,
)
from services.shared.platform.store import (
    BET_IDS,
    LEASE_TABLES,
    LOCK_PROCEDURE,
    REFUSED_COMMANDS,
    ServiceApplication,
    SideTable,
    create_side_tables,
    lease_tables_statements,
)

SET_ROLE = "PB_POSTGRES_SET_ROLE"
"""eventsourcing environment key: the role :class:`OwnerRoleFactory`'s connections act as."""
OWNER_ROLE_FACTORY = f"{__name__}:OwnerRoleFactory"
SIDE_TABLES: dict[str, tuple[SideTable, ...]] = {
    "settlement": (BET_IDS,),
    "dealing": (REFUSED_COMMANDS,),
}
"""Each service's side tables (``store/side_tables.py``), created and granted here."""
ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
TRIGGER = "pb_append_only"
REFUSE_FUNCTION = "pb_refuse_change"


class OwnerRoleFactory(PostgresFactory):
    """eventsourcing's PostgreSQL factory; every connection acts as ``PB_POSTGRES_SET_ROLE``
    (the tables are created as their owner)."""

    def __init__(self, env: Environment | EnvType | None) -> None:
        super().__init__(env)
        role = self.env.get(SET_ROLE) or ""
        if not ROLE_NAME.match(role):
            raise ValueError(f"{SET_ROLE} must name a role (lower case, digits, _), not {role!r}")
        kwargs = self.datastore.pool.kwargs
        assert isinstance(kwargs, dict)  # eventsourcing gives the pool a dict
        kwargs["options"] = f"-c role={role}"


@dataclass(frozen=True)
class StoreRoles:
    """A service's schema and its two roles (``partition``: the schema is that partition's
    store of a partitioned service, ``<schema prefix><service>_p<N>``, same roles)."""

    service: str
    schema: str
    owner: str
    login: str
    partition: int | None = None

    @property
    def application(self) -> str:
        """The service this store is of (``gateway-acme``'s: ``gateway``): its Application's
        name, hence its tables' names, and its side tables."""
        return application_of(self.service)


def application_of(service: str) -> str:
    """The service ``service`` is (an instance of): ``gateway-acme`` is the gateway's, the
    studio bridge is ``studio-bridge``."""
    of = service.split("-", 1)[0]
    return of if of in INSTANCED else service


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
    side: list[str] = field(default_factory=list)  # derived state (SIDE_TABLES)
    lease: list[str] = field(default_factory=list)  # the writer lease's (store/lease.py)
    others: list[str] = field(default_factory=list)


def grants(store: StoreRoles, tables: StoreTables, auditor: str) -> list[Grant]:
    """Every privilege of the service's role and the auditor on ``store`` (nothing else; the
    lease's tables: UPDATE, the privilege PostgreSQL asks of whoever takes their lock modes,
    the runtime's ``store/lease.py``; they take no row)."""
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
    (``SIDE_TABLES``), connected as ``admin`` acting as the owner."""
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
        f"{store.application.title().replace('-', '')}Store",
        (ServiceApplication,),
        {"name": store.application, "is_snapshotting_enabled": True},
    )
    app: ServiceApplication = shape(env=env)
    try:
        recorder: Any = app.recorder
        tables = StoreTables([recorder.events_table_name], [], [recorder.tracking_table_name])
        if app.snapshots is not None:
            snapshots: Any = app.snapshots.recorder
            tables.snapshots.append(snapshots.events_table_name)
        side = SIDE_TABLES.get(store.application, ())
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
    procedure taking an events table's write lock as the owner (the runtime's
    ``store/postgres.py`` calls it)."""
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


RoleKind = Literal["owner", "service", "auditor"]


@dataclass
class RoleOutcome:
    name: str
    kind: RoleKind
    created: bool
    password: str | None = None  # only for a LOGIN role created now
    warnings: list[str] = field(default_factory=list)
    password_set: bool = False  # an existing LOGIN role given the password it must have


@dataclass
class StoreOutcome:
    roles: StoreRoles
    schema_created: bool
    tables: StoreTables
    grants: list[Grant]
    taken_over: list[str] = field(default_factory=list)  # objects another role owned


@dataclass
class Provisioning:
    """What one provisioning run found, created and granted."""

    database: str
    auditor: str
    roles: list[RoleOutcome]
    stores: list[StoreOutcome]
    shared_leases: list[StoreOutcome] = field(default_factory=list)  # partitioned: the lease
    # of each service's unpartitioned schema, which its partitioned processes share

    def describe(self) -> list[str]:
        """The report ``punto-banco db setup`` prints (never a password)."""
        lines = []
        for role in self.roles:
            state = "created" if role.created else "exists (password unchanged)"
            if role.password_set:
                state = "exists (password set to the one given)"
            if role.kind == "owner":
                state = "created" if role.created else "exists"
            lines.append(f"role {role.name} ({role.kind}): {state}")
            lines += [f"  warning: {warning}" for warning in role.warnings]
        for store in [*self.stores, *self.shared_leases]:
            tables = store.tables
            state = "created" if store.schema_created else "exists"
            lines.append(
                f"schema {self.database}.{store.roles.schema}: {state}, owner {store.roles.owner}"
                + (", the lease partitioned processes share" if store in self.shared_leases else "")
            )
            if store.taken_over:
                lines.append(
                    f"  taken over from their previous owner: {', '.join(store.taken_over)}"
                )
            for label, names in (
                ("events (append-only trigger)", tables.events),
                ("tracking", tables.tracking),
                ("snapshots", tables.snapshots),
                ("derived state (rebuildable from the events)", tables.side),
                ("writer lease (locked, never written)", tables.lease),
                ("other tables (auditor only)", tables.others),
            ):
                if names:
                    lines.append(f"  {label}: {', '.join(names)}")
            for grantee in (store.roles.login, self.auditor):
                given = [str(g) for g in store.grants if g.grantee == grantee]
                lines.append(f"  {grantee} may: {'; '.join(given)}")
        return lines


SERVICES = ("shoe", "dealing", "settlement")
UNPARTITIONED = ("gateway", "studio-bridge")
"""Services never partitioned: the gateway runs one store per operator it serves, the studio
bridge one per studio table."""
INSTANCED = ("gateway",)
"""Services run as instances named ``<service>-<name>`` (the gateway's, one per operator), each
with its own schema and the service's roles and tables."""
AUDITOR = "auditor"
PREFIX = re.compile(r"^([a-z_][a-z0-9_]*)?$")
SETUP_LOCK = 0x70625F7365747570  # "pb_setup": one provisioning at a time in a database
SETUP_LOCK_WAIT = 60.0
"""Seconds a provisioning waits for another one; then it fails naming who holds the lock (any
login may take an advisory lock: it can delay ``db setup`` this long, never hang it)."""


def store_roles(
    services: Sequence[str] = SERVICES,
    schema_prefix: str = "",
    role_prefix: str | None = None,
    partitions: int | None = None,
) -> list[StoreRoles]:
    """The schema (``partitions``: the schema of each partition, but for an UNPARTITIONED
    service) and roles of each service or instance (``gateway-acme``: its own schema, the
    gateway's roles); SettingsError for a name PostgreSQL would refuse."""
    if partitions is not None and not 0 < partitions <= MAX_PARTITIONS:
        raise SettingsError(f"the partition count {partitions} is not in 1..{MAX_PARTITIONS}")
    roles_prefix = schema_prefix if role_prefix is None else role_prefix
    for name, prefix in (("schema prefix", schema_prefix), ("role prefix", roles_prefix)):
        if not PREFIX.match(prefix):
            raise SettingsError(f"the {name} {prefix!r} must be lower case letters, digits or _")
    stores = []
    for service in dict.fromkeys(services):
        if not (SERVICE_NAME.match(service) or INSTANCE_NAME.match(service)):
            raise SettingsError(
                f"service name {service!r} must be lower case letters, digits or _ "
                "(an instance: <service>-<name>)"
            )
        of = application_of(service)
        role = f"{roles_prefix}{of.replace('-', '_')}"  # studio-bridge's: studio_bridge
        owner, login = f"{role}_owner", role
        numbers: Sequence[int | None] = (
            [None] if partitions is None or of in UNPARTITIONED else range(partitions)
        )
        for n in numbers:
            schema = f"{schema_prefix}{schema_name(service)}" + ("" if n is None else f"_p{n}")
            store = StoreRoles(service, schema, owner, login, partition=n)
            for name in (store.schema, store.owner):
                if not ROLE_NAME.match(name):
                    raise SettingsError(f"{name!r} is longer than PostgreSQL's 63 characters")
            stores.append(store)
    return stores


def provision(
    admin: PostgresSettings,
    services: Sequence[str] = SERVICES,
    *,
    schema_prefix: str = "",
    role_prefix: str | None = None,
    passwords: Mapping[str, str] | None = None,
    partitions: int | None = None,
    set_passwords: bool = False,
    lock_wait: float = SETUP_LOCK_WAIT,
) -> Provisioning:
    """Create or bring up to date the roles, schemas, tables, triggers and grants of
    ``services`` in ``admin.dbname``, connected as ``admin`` (see the module doc;
    ``partitions``: the schemas of that many partitions of each service)."""
    stores = store_roles(services, schema_prefix, role_prefix, partitions)
    auditor = f"{schema_prefix if role_prefix is None else role_prefix}{AUDITOR}"
    with _connect(admin) as conn:
        _take_setup_lock(conn, lock_wait)
        with conn.transaction():
            roles = _ensure_roles(conn, stores, auditor, passwords or {}, set_passwords)
            created_schemas = {s.schema for s in stores if ensure_schema(conn, s)}
        outcomes = []
        for store in stores:
            with conn.transaction():  # first: eventsourcing's IF NOT EXISTS needs ownership
                taken = take_over(conn, store)
            tables = create_tables(admin, store)
            with conn.transaction():
                describe_tables(conn, store, tables)
                tables.lease = list(LEASE_TABLES)
                given = grants(store, tables, auditor)
                with acting_as(conn, store.owner):
                    append_only(conn, store, tables)
                    lease_tables(conn, store)
                    apply_grants(conn, store, auditor, given)
            outcomes.append(
                StoreOutcome(store, store.schema in created_schemas, tables, given, taken)
            )
        shared = [_shared_lease(conn, store, auditor) for store in _unpartitioned(stores)]
    return Provisioning(admin.dbname, auditor, roles, outcomes, shared)


def _unpartitioned(stores: Sequence[StoreRoles]) -> list[StoreRoles]:
    """The service's unpartitioned schema of each partitioned service provisioned (its lease
    is what partitioned processes share: ``store/lease.py``)."""
    found = {
        store.service: replace(store, schema=store.schema.rsplit("_p", 1)[0], partition=None)
        for store in stores
        if store.partition is not None
    }
    return list(found.values())


def _shared_lease(conn: psycopg.Connection[Any], store: StoreRoles, auditor: str) -> StoreOutcome:
    """The unpartitioned schema's lease tables, which partitioned processes lock shared, and
    their grants, added to what the schema holds (a store from before is left as it is)."""
    with conn.transaction():
        created = ensure_schema(conn, store)
        given = lease_grants(store, auditor)
        with acting_as(conn, store.owner):
            tables = StoreTables(lease=lease_tables(conn, store))
            for grant in given:
                conn.execute(grant.statement())
    return StoreOutcome(store, created, tables, given)


def _take_setup_lock(conn: psycopg.Connection[Any], wait: float) -> None:
    conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(f"{int(wait * 1000)}ms")))
    try:
        conn.execute("SELECT pg_advisory_lock(%s)", (SETUP_LOCK,))
    except psycopg.errors.LockNotAvailable:
        holders = conn.execute(
            "SELECT a.usename, a.pid, a.application_name FROM pg_locks l"
            " JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory'"
            " AND l.granted AND l.classid = %s AND l.objid = %s",
            (SETUP_LOCK >> 32, SETUP_LOCK & 0xFFFFFFFF),
        ).fetchall()
        who = ", ".join(
            f"{user} (pid {pid}, {app or 'no application name'})" for user, pid, app in holders
        )
        raise SettingsError(
            f"another session has held db setup's lock for over {wait:g} s: {who or 'gone'}; "
            "wait for that db setup to end, or end that session (pg_terminate_backend) if it "
            "is no db setup"
        ) from None
    conn.execute("RESET lock_timeout")


def _connect(admin: PostgresSettings) -> psycopg.Connection[Any]:
    return psycopg.connect(
        host=admin.host,
        port=admin.port,
        dbname=admin.dbname,
        user=admin.user,
        password=admin.password,
        autocommit=True,
        connect_timeout=10,
    )


def _ensure_roles(
    conn: psycopg.Connection[Any],
    stores: Sequence[StoreRoles],
    auditor: str,
    passwords: Mapping[str, str],
    set_passwords: bool = False,
) -> list[RoleOutcome]:
    wanted: list[tuple[str, RoleKind]] = []
    for store in stores:
        wanted += [(store.owner, "owner"), (store.login, "service")]
    wanted.append((auditor, "auditor"))
    outcomes = []
    for name, kind in dict.fromkeys(wanted):  # a partitioned service's roles once
        found = conn.execute(
            "SELECT rolcanlogin, rolsuper, rolcreaterole, rolcreatedb, rolbypassrls, "
            "rolreplication FROM pg_roles WHERE rolname = %s",
            (name,),
        ).fetchone()
        outcome = RoleOutcome(name, kind, created=found is None)
        role = sql.Identifier(name)
        if found is None and kind == "owner":
            conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(role))
        elif found is None:
            outcome.password = passwords.get(name) or secrets.token_urlsafe(32)
            verifier = _scram_verifier(conn, name, outcome.password)
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(role, sql.Literal(verifier))
            )
        else:
            outcome.warnings = _warnings(conn, name, kind, found)
            if kind == "owner" and found[0]:
                conn.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(role))
            elif kind != "owner" and set_passwords and passwords.get(name):
                verifier = _scram_verifier(conn, name, passwords[name])
                conn.execute(
                    sql.SQL("ALTER ROLE {} PASSWORD {}").format(role, sql.Literal(verifier))
                )
                outcome.password_set = True
        if kind == "owner":
            _become_member(conn, name)
        else:
            _may_connect(conn, name)
        if kind == "auditor":
            conn.execute(
                sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(role)
            )
        outcomes.append(outcome)
    return outcomes


def _scram_verifier(conn: psycopg.Connection[Any], role: str, password: str) -> str:
    """The SCRAM-SHA-256 verifier of ``password``, computed here: the password itself never
    reaches the server (nor its statement log)."""
    verifier = conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256")
    return verifier.decode()


def _warnings(
    conn: psycopg.Connection[Any], name: str, kind: RoleKind, found: tuple[Any, ...]
) -> list[str]:
    """What an existing role may do beyond this provisioning's grants."""
    attributes = ("SUPERUSER", "CREATEROLE", "CREATEDB", "BYPASSRLS", "REPLICATION")
    extra = [attribute for attribute, held in zip(attributes, found[1:], strict=True) if held]
    notes = [f"{name} has {', '.join(extra)}: it may do more than granted here"] if extra else []
    if kind == "owner" and found[0]:
        notes.append(f"{name} could log in: made NOLOGIN")
    if kind != "owner" and not found[0]:
        notes.append(f"{name} cannot log in (NOLOGIN): `ALTER ROLE {name} LOGIN` to use it")
    if kind != "owner":
        member_of = [
            row[0]
            for row in conn.execute(
                "SELECT r.rolname FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid "
                "WHERE m.member = %s::regrole ORDER BY 1",
                (name,),
            )
        ]
        if member_of:
            notes.append(f"{name} is a member of {', '.join(member_of)}: it holds their rights")
    return notes


def _may_connect(conn: psycopg.Connection[Any], role: str) -> None:
    """GRANT CONNECT on the database to ``role`` unless it has it (PUBLIC has, by default)."""
    row = conn.execute(
        "SELECT has_database_privilege(%s, current_database(), 'CONNECT')", (role,)
    ).fetchone()
    if not (row and row[0]):
        database = conn.execute("SELECT current_database()").fetchone()
        assert database is not None
        conn.execute(
            sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                sql.Identifier(str(database[0])), sql.Identifier(role)
            )
        )


def _become_member(conn: psycopg.Connection[Any], owner: str) -> None:
    """Let the administrator act as ``owner`` (SET ROLE, ALTER ... OWNER TO)."""
    row = conn.execute(
        "SELECT rolsuper OR pg_has_role(%s, 'MEMBER') FROM pg_roles WHERE rolname = current_user",
        (owner,),
    ).fetchone()
    if not (row and row[0]):
        conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(sql.Identifier(owner)))
