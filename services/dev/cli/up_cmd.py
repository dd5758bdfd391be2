"""``punto-banco up``: the whole system on this machine, with a demo table and simulated bettors.

Starts the local Kafka (and PostgreSQL with ``--postgres``), the four services as separate
processes, opens a demo table and lets bettors play it with a live view. ``--coups N`` plays N
coups, stops everything and exits 0 only if every accepted bet was settled exactly once and
every amount matched the recomputation from the cards; without it, it plays until Ctrl-C.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Mapping
from pathlib import Path

import typer

EXIT_INTERRUPTED = 130


def up_command(
    coups: int | None = typer.Option(
        None,
        "--coups",
        min=1,
        help="Play this many coups per table, then stop (default: until Ctrl-C).",
    ),
    bettors: int = typer.Option(20, "--bettors", min=0, help="Simulated bettors per table."),
    wildness: float = typer.Option(
        0.1,
        "--wildness",
        min=0.0,
        max=1.0,
        help="0..1: chance per bettor and coup of also trying a bad bet (out of limits, Player "
        "and Banker, wrong currency, bad amount, unknown type, a type not offered, late, "
        "repeated bet id).",
    ),
    data_dir: Path = typer.Option(
        Path("var"),
        "--data-dir",
        envvar="PB_DATA_DIR",
        help="Folder of the SQLite stores, the local Kafka/PostgreSQL data and the logs.",
    ),
    postgres: bool = typer.Option(
        False,
        "--postgres",
        help="Keep the event stores in PostgreSQL: the one POSTGRES_* / PB_POSTGRES_DSN name, "
        "else a local server started under --data-dir. (Those settings alone also select it, "
        "as for `punto-banco serve`.)",
    ),
    tables: int = typer.Option(1, "--tables", min=1, max=50, help="How many demo tables."),
    paytable: str = typer.Option(
        "standard",
        "--paytable",
        help="standard (Banker 19:20, Tie 8:1), tie-9-to-1, no-commission (Banker 1:1, 1:2 on a "
        "winning 6; Super 6) or ez-baccarat (a winning three-card 7 pushes; Dragon 7, Panda 8). "
        "The bettors play the paytable's side bets too.",
    ),
    decks: int = typer.Option(6, "--decks", min=1, max=8, help="Decks per shoe."),
    betting_window_ms: int = typer.Option(
        1000, "--betting-window-ms", min=0, help="How long betting stays open on each coup."
    ),
    cut_card_from_end: int = typer.Option(
        16, "--cut-card", min=0, help="Cut card position, in cards from the end of the shoe."
    ),
    seed: int | None = typer.Option(None, "--seed", help="Seed of the bettors (not of the shoe)."),
    kafka: str | None = typer.Option(
        None,
        "--kafka",
        envvar="KAFKA_BOOTSTRAP_SERVERS",
        help="Use this Kafka (bootstrap servers) instead of starting a local one.",
    ),
    topic_prefix: str = typer.Option(
        "", "--topic-prefix", envvar="PB_TOPIC_PREFIX", help="Prefix of every topic."
    ),
    studio: bool = typer.Option(
        False,
        "--studio",
        help="The first table is a studio table: a simulated card-reading shoe deals it (a "
        "coup each time betting closes, one shoe), read by the device bridge (docs/studio.md).",
    ),
    gateway: bool = typer.Option(
        True,
        "--gateway/--no-gateway",
        help="Bettors play through the gateway's HTTP API, their money in a demo wallet "
        "(--coups N then checks every balance); --no-gateway: straight to Kafka.",
    ),
) -> None:
    """Start Kafka, the four services, a demo wallet and the dashboard; play a demo table
    with simulated bettors through the gateway."""
    from rich.console import Console
    from rich.markup import escape

    from services.dev.demo.live import LiveView, final_report
    from services.dev.demo.orchestrator import DemoConfig, run_demo
    from services.shared.rules.paytable import PAYTABLES

    if paytable not in PAYTABLES:
        typer.echo(
            f"error: unknown paytable {paytable!r}; choose one of {', '.join(PAYTABLES)}", err=True
        )
        raise typer.Exit(2)
    store = postgres_settings(postgres, os.environ)
    try:
        config = DemoConfig(
            coups=coups,
            bettors=bettors,
            wildness=wildness,
            data_dir=data_dir,
            postgres=store is None or bool(store),
            tables=tables,
            paytable=paytable,
            decks=decks,
            betting_window_ms=betting_window_ms,
            cut_card_from_end=cut_card_from_end,
            seed=seed,
            bootstrap=kafka,
            topic_prefix=topic_prefix,
            postgres_env=store or None,
            gateway=gateway,
            studio=studio,
        )
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    console = Console()
    log_file = _log_to_file(data_dir)

    def say(text: str) -> None:
        console.print(f"[dim]\\[up][/dim] {escape(text)}", soft_wrap=True)

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        presses = 0

        def on_signal() -> None:
            nonlocal presses
            presses += 1
            if presses == 1:
                say("stopping: closing the tables and settling what is open (Ctrl-C again: now)")
                stop.set()
            else:
                task.cancel()

        with LiveView(console) as view:
            task = asyncio.ensure_future(run_demo(config, view=view, stop=stop, say=say))
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, on_signal)
            try:
                result = await task
            finally:
                for signum in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(signum)
        console.print(final_report(result))
        if result.interrupted:
            return EXIT_INTERRUPTED
        return 0 if result.ok else 1

    try:
        code = asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        typer.echo("interrupted", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except Exception as error:  # an infrastructure problem: say what and what to do
        typer.echo(f"error: {error}", err=True)
        typer.echo(f"  details in {log_file}", err=True)
        raise typer.Exit(1) from None
    raise typer.Exit(code)


POSTGRES_SETTINGS = ("POSTGRES_", "PB_POSTGRES_DSN", "PB_PERSISTENCE")


def postgres_settings(flag: bool, env: Mapping[str, str]) -> dict[str, str] | None:
    """The PostgreSQL settings to give the services, None to start a local server (``flag``
    without settings), {} for SQLite. Same rule as the services' own settings: PostgreSQL when
    PB_PERSISTENCE=postgres, PB_POSTGRES_DSN, POSTGRES_HOST or POSTGRES_DBNAME is set."""
    given = {key: value for key, value in env.items() if key.startswith(POSTGRES_SETTINGS)}
    persistence = env.get("PB_PERSISTENCE", "").strip().lower()
    if persistence == "sqlite" and not flag:
        return {}
    named = any(env.get(key) for key in ("PB_POSTGRES_DSN", "POSTGRES_HOST", "POSTGRES_DBNAME"))
    if named:
        return given
    return None if flag or persistence in ("postgres", "postgresql") else {}


def _log_to_file(data_dir: Path) -> Path:
    """Library logs (aiokafka's reconnect chatter...) go to a file, not over the live view."""
    log_file = data_dir / "logs" / "up.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(log_file)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    return log_file


def register(app: typer.Typer) -> None:
    app.command("up")(up_command)
