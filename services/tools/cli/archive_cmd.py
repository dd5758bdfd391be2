"""``punto-banco archive``: write each store's rows of one day to a sealed, verifiable file.

The files (``services.tools.audit.archive``) are read back by ``punto-banco audit --archives``,
before the store, as one seal chain. Removing the archived rows from the store is an
operator's step (the events are append-only by trigger: docs/security.md).
"""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path
from typing import Annotated

import typer

from services.tools.audit.archive import write_day
from services.tools.cli.audit_inputs import (
    EXIT_USAGE,
    DataDir,
    Postgres,
    err,
    open_for_audit,
    settings_for,
)
from services.tools.cli.audit_partitions import archive_partitions


def archive(
    day: Annotated[str, typer.Option("--day", help="The day (UTC) to archive, YYYY-MM-DD.")],
    out: Annotated[Path, typer.Option("--out", help="The folder of the daily archives.")],
    data_dir: DataDir = None,
    postgres: Postgres = False,
) -> None:
    """Write each store's rows of --day, cut on its seals, to `<store>-<day>.jsonl.gz` (and its
    `.sha256`) in --out; `audit --archives` checks them with the store. With
    PB_PARTITIONED=yes, every partition's stores (`<service>-p<N>-<day>.jsonl.gz`)."""
    try:
        day = date.fromisoformat(day).isoformat()  # 20261130 too: named 2026-11-30
    except ValueError:
        err(f"--day {day!r} is not a day (YYYY-MM-DD, UTC)")
        raise typer.Exit(EXIT_USAGE) from None
    settings = settings_for(data_dir, postgres)
    if settings.partitioned:
        archive_partitions(settings, day, out)
        return
    with open_for_audit(data_dir, postgres) as stores:
        for name, store in stores.items():
            path = write_day(store, day, out)
            sys.stdout.write(f"{name}: {path or f'nothing sealed on {day}'}\n")


def register(app: typer.Typer) -> None:
    """Add ``archive``."""
    app.command("archive")(archive)
