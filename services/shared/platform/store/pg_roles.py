"""Least-privilege PostgreSQL roles for the services' stores, provisioned by an administrator.

Run by ``punto-banco db setup`` (production) and ``punto-banco infra up`` (the local server),
never by the services: the administrator's role needs CREATEROLE and CREATE on the database.
For each service, with schema ``<schema prefix><service>`` and roles named with the role prefix
(by default the schema prefix):

- ``<service>_owner`` (NOLOGIN) owns the schema and everything in it: the tables, types and
  functions eventsourcing creates (made through ``SET ROLE`` to it, ``pg_store.py``), the
  append-only trigger of every events table and the procedure that locks it for writing. An
  existing schema and its objects (a store the services created themselves) are taken over.
- ``<service>`` (LOGIN) is the service: USAGE on its own schema and nothing on any other;
  SELECT and INSERT on its events table, USAGE on that table's notification-id sequence and
  EXECUTE on ``pb_lock_events`` (the write lock, see ``pg_store.py``); SELECT, INSERT and
  UPDATE (notification_id) on its tracking table (eventsourcing's single-row tracking is an
  ``INSERT ... ON CONFLICT DO UPDATE``); SELECT and INSERT on its snapshots table and on its
  side tables (``side_tables.py``: settlement's ``bet_ids``, derived state whose rows are
  only ever inserted).
  UPDATE on the writer lease's two tables (``writer_fence.py``: empty tables whose locks are
  the lease; UPDATE is what PostgreSQL asks of whoever takes those lock modes, so no other
  login can take the lease or freeze the writes).
- ``auditor`` (LOGIN, ``default_transaction_read_only``): USAGE on every service schema and
  SELECT on every table in them.

A partitioned service (``PB_PARTITIONED``, ``partitioned.py``) keeps one store per partition:
``partitions=N`` provisions the schemas ``<schema prefix><service>_p0`` .. ``_p<N-1>`` instead of
the service's one, each exactly as the one schema above (the same two roles: the service's
role writes its own partitions' schemas, nothing of another service's; the auditor reads all),
and the service's unpartitioned schema gets the lease's tables (created if missing, nothing else
of it changed): partitioned processes lock its lease shared, which keeps an unpartitioned writer
out.

A trigger on each events table refuses UPDATE, DELETE and TRUNCATE (statement level, before
anything changes) whoever runs them, the owner included: a second line behind the grants, for
accidents (an owner or superuser can still drop or disable it on purpose). Provisioning is
idempotent: it creates what is missing, takes over what another role owns, and then revokes
and grants again, so a second run leaves the same roles, owners and privileges (the revokes
also remove privileges someone added by hand). A LOGIN role created now gets the password
given (the local infra keeps its own) or a random one, reported once; an existing role's
password is never changed nor shown, unless ``set_passwords`` (``db setup`` given the services'
passwords, as a Kubernetes Job or compose's one-shot is from their Secrets): then a LOGIN role
given a password has that one, created or not.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import psycopg
from psycopg import sql

from services.shared.platform.settings import (
    MAX_PARTITIONS,
    SERVICE_NAME,
    PostgresSettings,
    SettingsError,
)
from services.shared.platform.store.pg_outcomes import (
    Provisioning,
    RoleKind,
    RoleOutcome,
    StoreOutcome,
)
from services.shared.platform.store.pg_schemas import (
    Grant,
    StoreRoles,
    StoreTables,
    acting_as,
    append_only,
    apply_grants,
    create_tables,
    describe_tables,
    ensure_schema,
    grants,
    lease_grants,
    lease_tables,
    take_over,
)
from services.shared.platform.store.pg_store import ROLE_NAME
from services.shared.platform.store.writer_fence import LEASE_TABLES

__all__ = ["AUDITOR", "SERVICES", "Grant", "Provisioning", "StoreRoles", "provision", "store_roles"]

SERVICES = ("shoe", "dealing", "settlement")
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
    """The schema (``partitions``: the schema of each partition) and roles of each service;
    SettingsError for a name PostgreSQL would refuse."""
    if partitions is not None and not 0 < partitions <= MAX_PARTITIONS:
        raise SettingsError(f"the partition count {partitions} is not in 1..{MAX_PARTITIONS}")
    roles_prefix = schema_prefix if role_prefix is None else role_prefix
    for name, prefix in (("schema prefix", schema_prefix), ("role prefix", roles_prefix)):
        if not PREFIX.match(prefix):
            raise SettingsError(f"the {name} {prefix!r} must be lower case letters, digits or _")
    stores = []
    for service in dict.fromkeys(services):
        if not SERVICE_NAME.match(service):
            raise SettingsError(f"service name {service!r} must be lower case letters, digits or _")
        owner, login = f"{roles_prefix}{service}_owner", f"{roles_prefix}{service}"
        numbers: Sequence[int | None] = [None] if partitions is None else range(partitions)
        for n in numbers:
            schema = f"{schema_prefix}{service}" + ("" if n is None else f"_p{n}")
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
    is what partitioned processes share: ``writer_lease.py``)."""
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
