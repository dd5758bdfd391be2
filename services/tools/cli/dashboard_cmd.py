"""``punto-banco dashboard``: the live tables page.

The dashboard follows the event topics from the beginning (as the ``dashboard`` principal,
``KAFKA_SASL_*``) and serves
``http://127.0.0.1:8100/`` until Ctrl-C: ``--port`` (env ``PB_HTTP_PORT_DASHBOARD``),
``--host`` (env ``PB_HTTP_HOST``; ``0.0.0.0`` in a container), ``--allowed-hosts`` (env
``PB_HTTP_ALLOWED_HOSTS``: the Host header values it answers).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal

import typer


def dashboard_command(
    kafka: str = typer.Option(
        "127.0.0.1:9092",
        "--kafka",
        envvar="KAFKA_BOOTSTRAP_SERVERS",
        help="Kafka bootstrap servers.",
    ),
    topic_prefix: str = typer.Option(
        "", "--topic-prefix", envvar="PB_TOPIC_PREFIX", help="Prefix of every topic."
    ),
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        envvar="PB_HTTP_HOST",
        help="Address to listen on (0.0.0.0: every interface, as in a container).",
    ),
    port: int = typer.Option(
        8100, "--port", envvar="PB_HTTP_PORT_DASHBOARD", min=0, max=65535, help="0: any free port."
    ),
    allowed_hosts: str = typer.Option(
        "",
        "--allowed-hosts",
        envvar="PB_HTTP_ALLOWED_HOSTS",
        help="Host header values answered, comma separated (default: the address, localhost).",
    ),
    operators: str = typer.Option(
        "",
        "--operators",
        envvar="PB_OPERATORS",
        help="The operators whose bet events to follow, comma separated (default: house).",
    ),
) -> None:
    """Serve the live dashboard of every table (roads, shoe, edges, money) from Kafka, logged
    in as the `dashboard` principal (`KAFKA_SECURITY_PROTOCOL`, `KAFKA_SASL_*`)."""
    from services.shared.platform.settings import (
        Settings,
        check_allowed_hosts,
        check_operators,
    )
    from services.tools.dashboard.server import Dashboard

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signum, stop.set)
        hosts = check_allowed_hosts(allowed_hosts)
        served = check_operators(operators)
        auth = Settings.from_env("dashboard").kafka_auth
        async with Dashboard(
            kafka, topic_prefix, host, port, allowed_hosts=hosts, operators=served, auth=auth
        ) as dashboard:
            typer.echo(f"dashboard: {dashboard.url} (Ctrl-C to stop)")
            await stop.wait()

    try:
        asyncio.run(main())
    except ValueError as error:  # a bad --host, --allowed-hosts or KAFKA_* (SettingsError)
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    except OSError as error:
        typer.echo(f"error: cannot serve on {host}:{port}: {error}; try --port 0", err=True)
        raise typer.Exit(1) from None
    except Exception as error:  # Kafka unreachable...
        typer.echo(f"error: {error!r} (is Kafka running on {kafka}? `punto-banco infra up`)")
        raise typer.Exit(1) from None


def register(app: typer.Typer) -> None:
    app.command("dashboard")(dashboard_command)
