"""What ``punto-banco audit``, ``archive``, ``recall`` and ``replay`` take: options, stores, keys.

The stores (SQLite files under ``--data-dir`` or PostgreSQL with ``--postgres``, optionally
behind their daily archives), the supervisors keyring, the seal anchors on Kafka, a progress
bar, and the exit codes; every error a person sees says what was wrong and what to do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)

from services.shared.platform.security import (
    KeysError,
    SupervisorKeyring,
    SupervisorKeysError,
    load_keyring,
)
from services.shared.platform.settings import Settings, SettingsError
from services.tools.audit.anchor_reader import AnchorRecords, AnchorsUnavailable, read_anchors
from services.tools.audit.archive import ArchiveDamaged, ArchiveStore
from services.tools.audit.partitions import discover
from services.tools.audit.stores import StoreMissing, StoreReader, open_stores

EXIT_ERRORS = 1
EXIT_USAGE = 2
EXIT_WARNINGS = 3

DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Folder with shoe.sqlite, dealing.sqlite, settlement.sqlite "
        "(default: PB_DATA_DIR or ./var).",
    ),
]
Postgres = Annotated[
    bool,
    typer.Option(
        "--postgres",
        help="Read the PostgreSQL stores (POSTGRES_* / PB_POSTGRES_DSN, "
        "PB_POSTGRES_SCHEMA_PREFIX) instead of SQLite files.",
    ),
]


def err(message: str) -> None:
    Console(stderr=True, soft_wrap=True).print(f"[bold red]Error:[/] {message}", highlight=False)


def settings_for(data_dir: Path | None, postgres: bool) -> Settings:
    if data_dir is not None and postgres:
        err("give either --data-dir (SQLite) or --postgres, not both")
        raise typer.Exit(EXIT_USAGE)
    overrides: dict[str, Any] = {}
    if postgres:
        overrides["persistence"] = "postgres"
    elif data_dir is not None:
        overrides["persistence"] = "sqlite"
        overrides["data_dir"] = data_dir
    try:
        return Settings.from_env("shoe", **overrides)
    except SettingsError as error:
        err(str(error))
        raise typer.Exit(EXIT_USAGE) from None


def supervisors_keyring(
    given: Path | None, data_dir: Path | None, postgres: bool
) -> SupervisorKeyring | None:
    """The supervisors keyring to verify the voids with: ``--supervisors`` (it must be there),
    else the configured one if it exists (None: the voids are not verified, and the report
    says so)."""
    path = given if given is not None else settings_for(data_dir, postgres).supervisor_keyring_path
    if given is None and not path.exists():
        return None
    try:
        return SupervisorKeyring.load(path)
    except SupervisorKeysError as error:
        err(f"{error} (--supervisors: the keyring dealing verifies voids with)")
        raise typer.Exit(EXIT_USAGE) from None


def anchor_records(data_dir: Path | None, postgres: bool) -> AnchorRecords:
    """The seal anchors on Kafka (PB_TOPIC_PREFIX, KAFKA_BOOTSTRAP_SERVERS), verified with
    the keyring (PB_KEYRING or <data dir>/keys/keyring.json)."""
    settings = settings_for(data_dir, postgres)
    try:
        keyring = load_keyring(settings)
    except KeysError as error:
        err(f"{error} (--anchors: the keyring of the services' public keys)")
        raise typer.Exit(EXIT_USAGE) from None
    Console(stderr=True).print(f"reading the seal anchors from {settings.kafka_bootstrap_servers}")
    try:
        return asyncio.run(read_anchors(settings, keyring))
    except AnchorsUnavailable as error:
        err(f"cannot read the seal anchors: {error}")
        raise typer.Exit(EXIT_USAGE) from None


@contextmanager
def open_for_audit(
    data_dir: Path | None, postgres: bool, archives: Path | None = None
) -> Iterator[dict[str, StoreReader]]:
    """The stores (``archives``: each read as its daily archives there, then the store)."""
    settings = settings_for(data_dir, postgres)
    try:
        stores = open_stores(settings)
        if archives is not None:
            stores = {name: ArchiveStore(store, archives) for name, store in stores.items()}
    except StoreMissing as error:
        err(f"{error}{_partitioned_hint(settings)}")
        raise typer.Exit(EXIT_USAGE) from None
    except ArchiveDamaged as error:
        err(f"{error}; audit without --archives, or restore the archive")
        raise typer.Exit(EXIT_ERRORS) from None
    except Exception as error:  # e.g. PostgreSQL unreachable
        err(f"cannot open the stores ({settings.describe_store()}): {error}")
        raise typer.Exit(EXIT_USAGE) from None
    try:
        yield stores
    finally:
        for store in stores.values():
            store.close()


def _partitioned_hint(settings: Settings) -> str:
    """A hint when the stores there are a partitioned deployment's."""
    try:
        found = discover(settings)
    except Exception:  # the hint is a courtesy: the error above stands without it
        return ""
    if not found:
        return ""
    return (
        f" (there are partition stores of {len(found)} partitions: a partitioned "
        "deployment's; set PB_PARTITIONED=yes to read them)"
    )


@contextmanager
def progress_bar() -> Iterator[tuple[Progress, TaskID]]:
    console = Console(stderr=True)
    with Progress(
        TextColumn("reading {task.description} store"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as bar:
        yield bar, bar.add_task("event", total=None)


def moment_option(value: str | None, option: str) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        err(f"{option} {value!r} is not an ISO 8601 date or time (e.g. 2026-11-30T03:00)")
        raise typer.Exit(EXIT_USAGE) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
