"""``punto-banco studio``: the live studio's device side (docs/studio.md).

``studio simulate`` serves a simulated card-reading shoe over PB1 on 127.0.0.1 until Ctrl-C:
one freshly shuffled shoe (``random.SystemRandom``; no seed can be given) dealt coup by coup,
``--coup-pause`` seconds for bets before each, its faults drawn from the rates and added from
``--fault`` schedules.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Annotated, Any

import typer

from services.studio.simulator import DEFAULT_CUT_CARD_FROM_END, DEFAULT_DECKS, Fault

studio_app = typer.Typer(
    name="studio",
    help="Live studio tables: the card-reading shoe's device side.",
    no_args_is_help=True,
)


def rate(what: str) -> Any:
    """A fault rate's option: the chance, per card, of ``what``."""
    return typer.Option(min=0.0, max=1.0, help=f"Chance per card of {what}.")


def simulate(
    port: Annotated[int, typer.Option(min=0, max=65535, help="0: any free port.")] = 0,
    device: Annotated[str, typer.Option(help="The device id in every line.")] = "shoe-1",
    decks: Annotated[int, typer.Option(min=1, max=8, help="Decks in the shoe.")] = DEFAULT_DECKS,
    cut_card: Annotated[
        int, typer.Option(min=0, help="The cut card's place from the end.")
    ] = DEFAULT_CUT_CARD_FROM_END,
    pace: Annotated[float, typer.Option(min=0.0, help="Seconds between two reads.")] = 1.0,
    coup_pause: Annotated[
        float, typer.Option(min=0.0, help="Seconds for bets before each coup.")
    ] = 3.0,
    heartbeat: Annotated[float, typer.Option(min=0.01, help="Seconds between heartbeats.")] = 5.0,
    unreadable: Annotated[float, rate("an unreadable read, then a rescan")] = 0.0,
    doubled: Annotated[float, rate("its read sent twice")] = 0.0,
    dropped: Annotated[float, rate("its read lost (a gap)")] = 0.0,
    out_of_order: Annotated[float, rate("its read sent after the next")] = 0.0,
    disconnect: Annotated[float, rate("a disconnect before it")] = 0.0,
    extra: Annotated[float, rate("its coup reading one card more")] = 0.0,
    fault: Annotated[
        list[str] | None,
        typer.Option(help="INDEX=KIND: that card's fault (0 is the shown card); repeatable."),
    ] = None,
) -> None:
    """Serve a simulated card-reading shoe on 127.0.0.1 over PB1 (docs/studio.md): one
    shuffled shoe dealt coup by coup, a line per event, heartbeats, faults by rate (per card)
    and by --fault."""
    import random

    from services.studio.simulator import Device, FaultRates, LoopbackServer, random_schedule

    try:
        rates = FaultRates(
            unreadable=unreadable,
            doubled=doubled,
            dropped=dropped,
            out_of_order=out_of_order,
            disconnect=disconnect,
            extra=extra,
        )
        faults = random_schedule(rates, decks * 52, random.SystemRandom())
        faults.update(scheduled(entry, decks * 52) for entry in fault or [])
        shoe = Device(device, decks=decks, cut_card_from_end=cut_card, faults=faults)
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signum, stop.set)
        async with LoopbackServer(
            shoe, port, pace=pace, coup_pause=coup_pause, heartbeat=heartbeat
        ) as server:
            typer.echo(
                f"studio simulator: device {device}, {decks} decks, {len(faults)} faults, "
                f"listening on 127.0.0.1:{server.port} (Ctrl-C to stop)"
            )
            await stop.wait()

    try:
        asyncio.run(main())
    except OSError as error:
        typer.echo(f"error: cannot listen on 127.0.0.1:{port}: {error}; try --port 0", err=True)
        raise typer.Exit(1) from None


def scheduled(entry: str, cards: int) -> tuple[int, Fault]:
    """``--fault INDEX=KIND``: the card's index in the shoe and its fault; ValueError if not."""
    index, _, kind = entry.partition("=")
    kinds = [fault.value for fault in Fault]
    if not index.isdecimal() or not 0 <= int(index) < cards or kind not in kinds:
        raise ValueError(
            f"--fault {entry!r} is not INDEX=KIND with INDEX a card 0 to {cards - 1} and KIND "
            f"one of {', '.join(kinds)}"
        )
    return int(index), Fault(kind)


def register(app: typer.Typer) -> None:
    """Add ``studio simulate``."""
    studio_app.command("simulate")(simulate)
    app.add_typer(studio_app)
