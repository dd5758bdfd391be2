"""``punto-banco serve shoe|dealing|settlement``: run one service process until SIGTERM/SIGINT.

Also ``punto-banco asyncapi``: the AsyncAPI document of the services' topics.

Each service module ``services.<name>.service`` exposes
``build_service(settings) -> ServiceDefinition`` (the platform's common entry);
this command reads the shared settings (environment + options) and serves it.
"""

from __future__ import annotations

import importlib
from enum import StrEnum
from pathlib import Path

import typer


class ServiceName(StrEnum):
    shoe = "shoe"
    dealing = "dealing"
    settlement = "settlement"


def serve_command(
    service: ServiceName = typer.Argument(..., help="Which service to run."),
    data_dir: Path | None = typer.Option(
        None, "--data-dir", help="Folder of the SQLite stores (env PB_DATA_DIR, default ./var)."
    ),
    postgres: bool = typer.Option(
        False, "--postgres", help="Use PostgreSQL (POSTGRES_* / PB_POSTGRES_DSN) instead of SQLite."
    ),
    kafka: str | None = typer.Option(
        None, "--kafka", help="Kafka bootstrap servers (env KAFKA_BOOTSTRAP_SERVERS)."
    ),
    topic_prefix: str | None = typer.Option(
        None, "--topic-prefix", help="Prefix of every topic (env PB_TOPIC_PREFIX)."
    ),
    log_level: str | None = typer.Option(None, "--log-level", help="DEBUG, INFO, WARNING..."),
) -> None:
    """Run one service: its event store, outbox relay and Kafka consumer."""
    from services.shared.platform.runner import serve
    from services.shared.platform.settings import Settings, SettingsError

    try:
        settings = Settings.from_env(
            service.value,
            data_dir=data_dir,
            persistence="postgres" if postgres else None,
            kafka_bootstrap_servers=kafka,
            topic_prefix=topic_prefix,
            log_level=log_level.upper() if log_level else None,
        )
    except SettingsError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    try:
        module = importlib.import_module(f"services.{service.value}.service")
    except ImportError as error:
        typer.echo(f"error: the {service.value} service is not available: {error}", err=True)
        raise typer.Exit(2) from None
    from services.shared.platform.keys import KeysError, load_keyring, signer_for

    try:  # no key or keyring: say what to run rather than fail later with a traceback
        signer_for(settings, load_keyring(settings))
    except KeysError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    definition = module.build_service(settings)
    raise typer.Exit(serve(definition, settings))


def asyncapi_command(
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Write the document here instead of standard output."
    ),
    kafka: str = typer.Option("127.0.0.1:9092", "--kafka", help="Server named in the document."),
) -> None:
    """Print the AsyncAPI 3.0 document of every service's Kafka topics and messages."""
    from services.shared.platform.asyncapi import asyncapi_json

    document = asyncapi_json(bootstrap_servers=kafka)
    if output is None:
        typer.echo(document)
    else:
        output.write_text(document + "\n", encoding="utf-8")
        typer.echo(f"wrote {output}")


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)
    app.command("asyncapi")(asyncapi_command)
