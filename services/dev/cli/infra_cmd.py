"""`punto-banco infra up|down|status|credentials`: the local Kafka broker and PostgreSQL server.

`up` and `status` print the connection settings as shell lines on stdout, so
``eval "$(punto-banco infra up)"`` sets them; progress and errors go to stderr. The broker
authenticates and authorizes (SASL/SCRAM, TLS, ACLs: see services/dev/infra/kafka_auth.py)
unless ``PB_KAFKA_AUTH=none``; `up` then also prints ``KAFKA_SECURITY_PROTOCOL``,
``KAFKA_SASL_MECHANISM``, ``KAFKA_TLS_BOOTSTRAP_SERVERS`` and ``KAFKA_SSL_CAFILE``, and
`credentials PRINCIPAL` prints a principal's ``KAFKA_SASL_USERNAME`` / ``KAFKA_SASL_PASSWORD``.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

import typer

from services.dev.infra import common
from services.dev.infra.common import InfraError, ServiceStatus
from services.dev.infra.kafka import KafkaBroker
from services.dev.infra.postgres import PostgresServer

T = TypeVar("T")

infra_app = typer.Typer(
    help="Start, stop and report the local Kafka broker and PostgreSQL server.",
    no_args_is_help=True,
)


class Part(StrEnum):
    ALL = "all"
    KAFKA = "kafka"
    POSTGRES = "postgres"


ONLY = typer.Option(Part.ALL, "--only", help="Act on one part only.")
DATA_DIR = typer.Option(
    None, "--data-dir", help="Data folder (default: PB_DATA_DIR, else ./var).", show_default=False
)
EXPORT = typer.Option(True, "--export/--no-export", help="Prefix the lines with `export`.")


def _guarded(action: Callable[[], T]) -> T:
    """Run ``action``; an InfraError becomes a readable message and exit code 1."""
    try:
        return action()
    except InfraError as error:
        typer.echo(f"punto-banco infra: {error.problem}", err=True)
        if error.fix:
            typer.echo(f"  what to do: {error.fix}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        typer.echo("punto-banco infra: interrupted", err=True)
        raise typer.Exit(130) from None


def _print_env(env: dict[str, str], export: bool) -> None:
    prefix = "export " if export else ""
    for name, value in env.items():
        sys.stdout.write(f"{prefix}{name}={shlex.quote(value)}\n")
    sys.stdout.flush()


def _parts(
    only: Part,
    data_dir: Path | None,
    kafka_port: int | None = None,
    postgres_port: int | None = None,
) -> tuple[KafkaBroker | None, PostgresServer | None]:
    home = data_dir.resolve() if data_dir else common.data_dir()
    kafka = postgres = None
    if only in (Part.ALL, Part.KAFKA):
        port = kafka_port or common.env_port("PB_KAFKA_PORT")
        kafka = KafkaBroker.for_project(home=home / "kafka", port=port)
    if only in (Part.ALL, Part.POSTGRES):
        port = postgres_port or common.env_port("PB_POSTGRES_PORT")
        postgres = PostgresServer.for_project(home=home / "postgres", port=port)
    return kafka, postgres


@infra_app.command()
def up(
    only: Part = ONLY,
    data_dir: Path | None = DATA_DIR,
    kafka_port: int | None = typer.Option(
        None, "--kafka-port", help="Broker port (default: last one used, else 9092, else free)."
    ),
    postgres_port: int | None = typer.Option(
        None,
        "--postgres-port",
        help="PostgreSQL port (default: last one used, else 55432, else free).",
    ),
    timeout: float = typer.Option(180.0, "--timeout", help="Seconds to wait for each server."),
    export: bool = EXPORT,
) -> None:
    """Start what is not running (reusing what is), wait until it answers, print its settings.

    The broker authenticates and authorizes every client (see `infra credentials`);
    PB_KAFKA_AUTH=none starts it without (PLAINTEXT, no ACLs).
    """
    kafka, postgres = _guarded(lambda: _parts(only, data_dir, kafka_port, postgres_port))
    env: dict[str, str] = {}
    if kafka is not None:
        _guarded(lambda: kafka.start(timeout=timeout))
        env.update(kafka.client_env())
    if postgres is not None:
        env.update(_guarded(lambda: postgres.start(timeout=timeout)))
    _print_env(env, export)


@infra_app.command()
def down(only: Part = ONLY, data_dir: Path | None = DATA_DIR) -> None:
    """Stop the servers; their data stays (remove the data folder to start afresh)."""
    kafka, postgres = _guarded(lambda: _parts(only, data_dir))
    for part in (kafka, postgres):
        if part is not None:
            name = "Kafka" if isinstance(part, KafkaBroker) else "PostgreSQL"
            stopped = _guarded(part.stop)
            typer.echo(f"{name}: {'stopped' if stopped else 'was not running'}", err=True)


@infra_app.command()
def status(only: Part = ONLY, data_dir: Path | None = DATA_DIR, export: bool = EXPORT) -> None:
    """Report each server; print the settings of those that answer. Exit 3 if one does not."""
    kafka, postgres = _guarded(lambda: _parts(only, data_dir))
    reports: list[ServiceStatus] = []
    for part in (kafka, postgres):
        if part is not None:
            reports.append(_guarded(part.status))
    env: dict[str, str] = {}
    for report in reports:
        typer.echo(
            f"{report.name}: {'up' if report.running else 'down'} - {report.detail}", err=True
        )
        env.update(report.env)
    _print_env(env, export)
    if not all(report.running for report in reports):
        raise typer.Exit(3)


@infra_app.command()
def credentials(
    principal: str = typer.Argument(
        ...,
        help="shoe, dealing, settlement, gateway, operator, supervisor, auditor, dashboard, "
        "or one added with --add (e.g. gateway-acme).",
    ),
    add: bool = typer.Option(
        False, "--add", help="Create the principal on the running broker if it has no credentials."
    ),
    role: str | None = typer.Option(
        None,
        "--role",
        help="With --add: the role's ACLs (default: the role of that exact name: a role's own "
        "name, or gateway-<operator> for an operator of PB_OPERATORS).",
    ),
    data_dir: Path | None = DATA_DIR,
    export: bool = EXPORT,
) -> None:
    """Print a principal's KAFKA_SASL_USERNAME / KAFKA_SASL_PASSWORD as export lines."""
    home = data_dir.resolve() if data_dir else common.data_dir()
    kafka = KafkaBroker(home=home / "kafka")

    def login() -> dict[str, str]:
        found = kafka.add_principal(principal, role) if add else kafka.login(principal)
        return {"KAFKA_SASL_USERNAME": found.username, "KAFKA_SASL_PASSWORD": found.password}

    _print_env(_guarded(login), export)


@infra_app.command("kafka-script")
def kafka_script(
    operators: str = typer.Option(
        "house", "--operators", help="The deployment's PB_OPERATORS (comma separated)."
    ),
) -> None:
    """Print the script that sets up a Kafka cluster as `up` sets up its broker (topics, ACLs,
    quotas, SCRAM credentials): deploy/k8s/kafka-setup.sh is it for the house alone."""
    from services.dev.infra.kafka_setup_script import setup_script
    from services.shared.platform.settings import check_operators

    try:
        served = check_operators(operators)
    except ValueError as error:
        typer.echo(f"punto-banco infra: {error}", err=True)
        raise typer.Exit(2) from None
    sys.stdout.write(setup_script(served))


def register(app: typer.Typer) -> None:
    app.add_typer(infra_app, name="infra")
