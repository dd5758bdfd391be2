"""The least-privilege PostgreSQL set-up without a server: names, the exact grants, the
settings of a provisioned store and what ``punto-banco db setup`` prints."""

from __future__ import annotations

import pytest
from eventsourcing.utils import resolve_topic
from typer.testing import CliRunner

from services.shared.platform.settings import PostgresSettings, Settings, SettingsError
from services.shared.platform.store import BET_IDS, REFUSED_COMMANDS
from services.shared.platform.store.postgres import ProvisionedRecorder
from services.tools.admin import provisioning as pg_roles  # what `db setup` calls
from services.tools.admin.provisioning import (
    SIDE_TABLES,
    Provisioning,
    RoleOutcome,
    StoreOutcome,
    StoreRoles,
    StoreTables,
    grants,
    store_roles,
)
from services.tools.cli.main import app

PG = {"POSTGRES_HOST": "db", "POSTGRES_DBNAME": "casino", "POSTGRES_USER": "admin"}


def test_each_service_gets_a_schema_an_owner_and_a_login_role() -> None:
    assert store_roles(["shoe"]) == [StoreRoles("shoe", "shoe", "shoe_owner", "shoe")]
    assert store_roles(["dealing"], "prod_") == [
        StoreRoles("dealing", "prod_dealing", "prod_dealing_owner", "prod_dealing")
    ]
    assert store_roles(["settlement"], "t_", role_prefix="pb_") == [
        StoreRoles("settlement", "t_settlement", "pb_settlement_owner", "pb_settlement")
    ]


@pytest.mark.parametrize(
    ("services", "prefix", "message"),
    [
        (["shoe"], "Prod-", "schema prefix 'Prod-'"),
        (["Shoe"], "", "service name 'Shoe'"),
        (["shoe"], "x" * 60, "longer than PostgreSQL's 63 characters"),
    ],
)
def test_names_postgresql_would_refuse_are_settings_errors(
    services: list[str], prefix: str, message: str
) -> None:
    with pytest.raises(SettingsError, match=message):
        store_roles(services, prefix)


def test_the_grants_are_exactly_what_eventsourcing_needs() -> None:
    store = StoreRoles("shoe", "shoe", "shoe_owner", "shoe")
    tables = StoreTables(
        events=["shoe_events"],
        sequences=["shoe_events_notification_id_seq"],
        tracking=["shoe_tracking"],
        snapshots=["shoe_snapshots"],
        lease=["pb_writer_lease", "pb_writer_fence"],
    )
    given = grants(store, tables, "auditor")
    assert [(g.grantee, str(g)) for g in given] == [
        ("shoe", "USAGE on schema shoe"),
        ("shoe", "SELECT, INSERT on table shoe.shoe_events"),
        ("shoe", "USAGE on sequence shoe.shoe_events_notification_id_seq"),
        ("shoe", "EXECUTE on procedure shoe.pb_lock_events"),
        ("shoe", "SELECT, INSERT on table shoe.shoe_tracking"),
        ("shoe", "UPDATE (notification_id) on table shoe.shoe_tracking"),
        ("shoe", "SELECT, INSERT on table shoe.shoe_snapshots"),
        ("shoe", "UPDATE on table shoe.pb_writer_lease"),  # its lock is the lease: no row
        ("shoe", "UPDATE on table shoe.pb_writer_fence"),
        ("auditor", "USAGE on schema shoe"),
        ("auditor", "SELECT on all tables in schema shoe"),
    ]
    statements = [g.statement().as_string(None) for g in given]
    assert statements[3] == 'GRANT EXECUTE ON PROCEDURE "shoe"."pb_lock_events"(text) TO "shoe"'
    assert statements[5] == (
        'GRANT UPDATE (notification_id) ON TABLE "shoe"."shoe_tracking" TO "shoe"'
    )
    assert not any(word in s for s in statements for word in ("DELETE", "TRUNCATE"))
    assert not any("UPDATE" in s for s in statements if "shoe_events" in s)
    assert [s for s in statements if "UPDATE" in s and "pb_writer" not in s] == [statements[5]]


def test_a_side_table_is_given_select_and_insert_only() -> None:
    """Settlement's bet ids (derived state, rows never changed): read and inserted by its
    role, read by the auditor (all tables), nothing more."""
    store = StoreRoles("settlement", "settlement", "settlement_owner", "settlement")
    tables = StoreTables(events=["settlement_events"], side=["bet_ids"])
    given = [(g.grantee, str(g)) for g in grants(store, tables, "auditor")]
    assert [g for g in given if "bet_ids" in g[1]] == [
        ("settlement", "SELECT, INSERT on table settlement.bet_ids")
    ]
    assert ("auditor", "SELECT on all tables in schema settlement") in given
    assert SIDE_TABLES == {"settlement": (BET_IDS,), "dealing": (REFUSED_COMMANDS,)}


def test_a_provisioned_store_turns_table_creation_off_and_locks_through_the_owner() -> None:
    es = Settings.from_env("shoe", {**PG, "PB_POSTGRES_CREATE_TABLES": "no"}).eventsourcing_env()
    assert es["CREATE_TABLE"] == "no"
    assert resolve_topic(es["PROCESS_RECORDER_TOPIC"]) is ProvisionedRecorder
    default = Settings.from_env("shoe", PG).eventsourcing_env()
    assert default["CREATE_TABLE"] == "yes" and "PROCESS_RECORDER_TOPIC" not in default


def test_a_bad_create_tables_value_names_the_variable() -> None:
    with pytest.raises(SettingsError, match="PB_POSTGRES_CREATE_TABLES must be yes or no"):
        Settings.from_env("shoe", {**PG, "PB_POSTGRES_CREATE_TABLES": "perhaps"})


def _provisioning(created: bool) -> Provisioning:
    store = StoreRoles("shoe", "shoe", "shoe_owner", "shoe")
    tables = StoreTables(["shoe_events"], ["shoe_events_notification_id_seq"], ["shoe_tracking"])
    password = "s3cret-shoe" if created else None
    return Provisioning(
        "casino",
        "auditor",
        [
            RoleOutcome("shoe_owner", "owner", created),
            RoleOutcome("shoe", "service", created, password),
            RoleOutcome("auditor", "auditor", created, "s3cret-aud" if created else None),
        ],
        [StoreOutcome(store, created, tables, grants(store, tables, "auditor"))],
    )


def test_the_report_never_shows_a_password() -> None:
    lines = "\n".join(_provisioning(created=True).describe())
    assert "s3cret" not in lines
    assert "role shoe (service): created" in lines
    assert "shoe may: USAGE on schema shoe; SELECT, INSERT on table shoe.shoe_events" in lines


def test_db_setup_prints_the_settings_of_the_roles_it_created(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[PostgresSettings, list[str], str, str | None]] = []

    def fake(admin: PostgresSettings, services: list[str], **kw: str | None) -> Provisioning:
        calls.append((admin, services, str(kw["schema_prefix"]), kw["role_prefix"]))
        return _provisioning(created=len(calls) == 1)

    monkeypatch.setattr(pg_roles, "provision", fake)
    runner = CliRunner()
    first = runner.invoke(app, ["db", "setup", "--schema-prefix", "p_"], env=PG)
    assert first.exit_code == 0, first.output
    assert "POSTGRES_USER=shoe\nPOSTGRES_PASSWORD=s3cret-shoe\nPB_POSTGRES_CREATE_TABLES=no" in (
        first.stdout
    )
    assert "POSTGRES_USER=auditor\nPOSTGRES_PASSWORD=s3cret-aud\n" in first.stdout
    assert "s3cret" not in first.stderr and "role shoe (service): created" in first.stderr
    admin, services, prefix, role_prefix = calls[0]
    assert (admin.host, admin.dbname, admin.user) == ("db", "casino", "admin")
    assert (services, prefix, role_prefix) == (
        ["shoe", "dealing", "settlement", "gateway"],
        "p_",
        None,
    )
    second = runner.invoke(app, ["db", "setup"], env=PG)
    assert second.exit_code == 0 and second.stdout == ""  # nothing created: no password
    assert "exists (password unchanged)" in second.stderr


def test_db_setup_takes_only_the_services_it_knows() -> None:
    result = CliRunner().invoke(app, ["db", "setup", "--services", "shoe,dealng"], env=PG)
    assert result.exit_code == 2
    assert "--services takes some of shoe, dealing, settlement, gateway, studio-bridge" in (
        result.output
    )


def test_the_sql_names_are_quoted_identifiers() -> None:
    grant = grants(StoreRoles("s", "we ird", "o", "l"), StoreTables(), "a")[0]
    assert grant.statement().as_string(None) == 'GRANT USAGE ON SCHEMA "we ird" TO "l"'


def test_db_setup_needs_a_postgresql_to_connect_to() -> None:
    unset: dict[str, str | None] = {
        name: None
        for name in ("POSTGRES_HOST", "POSTGRES_DBNAME", "PB_POSTGRES_DSN", "PB_PERSISTENCE")
    }
    result = CliRunner().invoke(app, ["db", "setup"], env=unset)
    assert result.exit_code == 2
    assert "no PostgreSQL named: set POSTGRES_HOST" in result.output


def test_a_partitioned_service_gets_a_schema_per_partition_with_its_same_roles() -> None:
    assert store_roles(["shoe"], "t_", partitions=2) == [
        StoreRoles("shoe", "t_shoe_p0", "t_shoe_owner", "t_shoe", partition=0),
        StoreRoles("shoe", "t_shoe_p1", "t_shoe_owner", "t_shoe", partition=1),
    ]
    with pytest.raises(SettingsError, match="partition count 0"):
        store_roles(["shoe"], partitions=0)


def test_each_operators_gateway_gets_its_own_schema_with_the_gateways_roles() -> None:
    """The gateway runs a store per operator (``gateway-<operator>``: its schema is
    ``settings.schema_name``'s), all as the gateway's one role; never partitioned."""
    acme = Settings("gateway-acme", postgres_schema_prefix="t_").postgres_schema
    assert acme.startswith("t_gateway_acme_")
    assert store_roles(["gateway", "gateway-acme"], "t_", partitions=2) == [
        StoreRoles("gateway", "t_gateway", "t_gateway_owner", "t_gateway"),
        StoreRoles("gateway-acme", acme, "t_gateway_owner", "t_gateway"),
    ]
    assert StoreRoles("gateway-acme", acme, "o", "l").application == "gateway"


def test_the_studio_bridge_gets_its_own_schema_and_roles_never_partitioned() -> None:
    """``studio-bridge`` is a service of its own, not an instance of a ``studio`` service:
    its roles are ``studio_bridge`` (the ``-`` a role name may not hold) and its schema the one
    its settings name; it serves one table, so it has one store however many partitions."""
    schema = Settings("studio-bridge", postgres_schema_prefix="t_").postgres_schema
    assert schema.startswith("t_studio_bridge_")
    assert store_roles(["studio-bridge"], "t_", partitions=2) == [
        StoreRoles("studio-bridge", schema, "t_studio_bridge_owner", "t_studio_bridge")
    ]
    assert StoreRoles("studio-bridge", schema, "o", "l").application == "studio-bridge"


@pytest.mark.parametrize(
    ("env", "args", "services"),
    [
        ({}, [], ["shoe", "dealing", "settlement", "gateway"]),  # no studio bridge unless named
        ({}, ["--services", "shoe,studio-bridge"], ["shoe", "studio-bridge"]),
        ({"PB_OPERATORS": "house,acme"}, ["--services", "gateway"], ["gateway", "gateway-acme"]),
        (
            {"PB_OPERATORS": "house,acme,bravo", "PB_GATEWAY_OPERATORS": "bravo"},
            ["--services", "shoe,gateway"],
            ["shoe", "gateway-bravo"],
        ),
    ],
)
def test_db_setup_provisions_a_gateway_store_per_operator_it_serves(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], args: list[str], services: list[str]
) -> None:
    given: list[list[str]] = []

    def fake(admin: PostgresSettings, names: list[str], **kw: object) -> Provisioning:
        given.append(names)
        return _provisioning(created=False)

    monkeypatch.setattr(pg_roles, "provision", fake)
    unset = {"PB_OPERATORS": None, "PB_GATEWAY_OPERATORS": None}
    result = CliRunner().invoke(app, ["db", "setup", *args], env={**PG, **unset, **env})
    assert result.exit_code == 0, result.output
    assert given == [services]


@pytest.mark.parametrize(
    ("env", "args", "partitions"),
    [
        ({}, [], None),
        ({"PB_PARTITIONED": "yes"}, [], 3),  # the topics' default partition count
        ({"PB_PARTITIONED": "yes", "PB_TOPIC_PARTITIONS": "6"}, [], 6),
        ({"PB_PARTITIONED": "yes", "PB_TOPIC_PARTITIONS": "6"}, ["--partitions", "2"], 2),
        ({}, ["--partitions", "4"], 4),
    ],
)
def test_db_setup_provisions_every_partition_of_a_partitioned_deployment(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], args: list[str], partitions: int | None
) -> None:
    given: list[int | None] = []

    def fake(admin: PostgresSettings, services: list[str], **kw: object) -> Provisioning:
        given.append(kw["partitions"])  # type: ignore[arg-type]
        return _provisioning(created=False)

    monkeypatch.setattr(pg_roles, "provision", fake)
    unset = {"PB_PARTITIONED": None, "PB_TOPIC_PARTITIONS": None}
    result = CliRunner().invoke(app, ["db", "setup", *args], env={**PG, **unset, **env})
    assert result.exit_code == 0, result.output
    assert given == [partitions]
