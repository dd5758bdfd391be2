"""``punto-banco db setup``: the services' least-privilege PostgreSQL roles, schemas and grants.

Run by an administrator (a role with CREATEROLE and CREATE on the database), connected with
the usual ``POSTGRES_*`` / ``PB_POSTGRES_DSN`` settings; never by the services, which then run
each as its own role with ``PB_POSTGRES_CREATE_TABLES=no`` (``tools/admin/provisioning.py`` says
who may do what). Idempotent. What it found, created and granted goes to stderr; the settings
of each LOGIN role it created (its password included, shown this once) go to stdout. A role
that existed keeps its password, which is never shown.

The services' passwords may be given (``PB_POSTGRES_PASSWORD_<ROLE>``, e.g.
``PB_POSTGRES_PASSWORD_SHOE``, ``PB_POSTGRES_PASSWORD_AUDITOR``: from the Secrets the services
read, when a Kubernetes Job or compose's one-shot runs it): each such role gets that password,
created or not (a rotation), and it is never printed.

The gateway gets a schema per operator it serves (``PB_GATEWAY_OPERATORS``, else
``PB_OPERATORS``): ``gateway`` for the house, ``gateway_<operator>_<digest>`` for another
(``gateway-<operator>``'s store), all with the gateway's two roles; never partitioned.

The studio bridge (``--services studio-bridge``, a studio deployment's) gets its schema
(``studio_bridge_<digest>``) and roles ``studio_bridge_owner`` and ``studio_bridge`` (its
password: ``PB_POSTGRES_PASSWORD_STUDIO_BRIDGE``); never partitioned.

A partitioned deployment (``PB_PARTITIONED=yes``: a store per partition) gets the schemas of
every partition, ``<prefix><service>_p0`` .. ``_p<N-1>``, with the service's same roles: N is
``--partitions``, else ``PB_TOPIC_PARTITIONS`` (the topics' partition count, default 3).
"""

from __future__ import annotations

import os
import shlex

import typer

from services.shared.platform.settings import MAX_PARTITIONS

db_app = typer.Typer(
    name="db",
    help="PostgreSQL administration: the services' least-privilege roles.",
    no_args_is_help=True,
)

SERVICES = ("shoe", "dealing", "settlement", "gateway")
"""What ``db setup`` provisions unless ``--services`` says otherwise."""
STUDIO_BRIDGE = "studio-bridge"
"""Provisioned when named (``--services studio-bridge``): only a studio deployment runs it."""
PASSWORD_VARIABLE = "PB_POSTGRES_PASSWORD_"
"""Followed by a LOGIN role's name in capitals: the password that role must have."""


@db_app.command("setup")
def setup_command(
    schema_prefix: str | None = typer.Option(
        None,
        "--schema-prefix",
        help="Prefix of the services' schemas (env PB_POSTGRES_SCHEMA_PREFIX, default none).",
    ),
    role_prefix: str | None = typer.Option(
        None, "--role-prefix", help="Prefix of the roles' names (default: the schema prefix)."
    ),
    services: str = typer.Option(
        ",".join(SERVICES),
        "--services",
        help=f"Comma-separated services to provision (also {STUDIO_BRIDGE}: a studio's).",
    ),
    partitions: int | None = typer.Option(
        None,
        "--partitions",
        min=1,
        max=MAX_PARTITIONS,
        help="Provision the schemas of this many partitions of each service (<schema>_p0, "
        "...), for PB_PARTITIONED=yes; default with PB_PARTITIONED=yes: PB_TOPIC_PARTITIONS.",
    ),
) -> None:
    """Create or bring up to date each service's owner and login roles, its schema (the
    gateway's: one per operator) and tables, the append-only triggers, the auditor role and every
    grant (idempotent)."""
    import psycopg

    from services.gateway.operators import OperatorError, service_name
    from services.shared.platform.settings import Settings, SettingsError
    from services.tools.admin.provisioning import provision, store_roles

    names = [name.strip() for name in services.split(",") if name.strip()]
    unknown = [name for name in names if name not in (*SERVICES, STUDIO_BRIDGE)]
    if not names or unknown:
        known = ", ".join((*SERVICES, STUDIO_BRIDGE))
        typer.echo(f"error: --services takes some of {known}", err=True)
        raise typer.Exit(2)
    try:
        settings = Settings.from_env(names[0], postgres_schema_prefix=schema_prefix)
        if settings.persistence != "postgres":
            raise SettingsError(
                "no PostgreSQL named: set POSTGRES_HOST, POSTGRES_DBNAME, POSTGRES_USER and "
                "POSTGRES_PASSWORD (or PB_POSTGRES_DSN) to an administrator's"
            )
        admin = settings.postgres
        if partitions is None and settings.partitioned:
            partitions = settings.topic_partitions
        if "gateway" in names:  # a store per operator the gateway serves
            operators = settings.gateway_operators or settings.operators
            at = names.index("gateway")
            names[at : at + 1] = [service_name(operator) for operator in operators]
        cells = f", {partitions} partitions of each table service" if partitions else ""
        typer.echo(
            f"provisioning as {admin.user}@{admin.host}:{admin.port}/{admin.dbname}{cells}",
            err=True,
        )
        logins = [
            *dict.fromkeys(
                store.login
                for store in store_roles(
                    names, settings.postgres_schema_prefix, role_prefix, partitions
                )
            ),
            f"{settings.postgres_schema_prefix if role_prefix is None else role_prefix}auditor",
        ]
        given = {
            role: password
            for role in logins
            if (password := os.environ.get(PASSWORD_VARIABLE + role.upper(), ""))
        }
        done = provision(
            admin,
            names,
            schema_prefix=settings.postgres_schema_prefix,
            role_prefix=role_prefix,
            partitions=partitions,
            passwords=given,
            set_passwords=True,
        )
    except (SettingsError, OperatorError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    except psycopg.Error as error:
        typer.echo(f"error: PostgreSQL refused: {error}".rstrip(), err=True)
        typer.echo(
            "  what to do: connect as an administrator (CREATEROLE, CREATE on the database) "
            "with POSTGRES_* or PB_POSTGRES_DSN",
            err=True,
        )
        raise typer.Exit(1) from None
    for line in done.describe():
        typer.echo(line, err=True)
    schemas: dict[str, tuple[str, list[str]]] = {}
    for store in done.stores:
        roles = store.roles
        schemas.setdefault(roles.login, (roles.service, []))[1].append(roles.schema)
    for role in done.roles:
        if role.password is None or role.name in given:  # the caller has it
            continue
        own = schemas.get(role.name)
        what = f"service {own[0]}, schema {', '.join(own[1])}" if own else "read only"
        typer.echo(f"# role {role.name} ({what}): created now; its password is not shown again")
        typer.echo(f"POSTGRES_USER={shlex.quote(role.name)}")
        typer.echo(f"POSTGRES_PASSWORD={shlex.quote(role.password)}")
        if own:
            typer.echo("PB_POSTGRES_CREATE_TABLES=no")


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
