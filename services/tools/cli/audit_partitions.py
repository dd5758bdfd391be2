"""``audit``, ``recall`` and ``replay`` on a partitioned deployment (``PB_PARTITIONED=yes``).

The partitions are found from the stores (``services.tools.audit.partitions``); the topics'
partition count, when known (``--partitions``, else ``PB_TOPIC_PARTITIONS``), makes a partition
missing below it an error too. ``audit`` reads every partition (``by_partition.py``);
``recall`` reads only the partition of the table (murmur2 of its id modulo the count: the
count given, else the number of partitions found); ``replay`` writes each partition's read
models to ``<out>/p<N>/``. ``punto-banco archive`` writes every partition store's daily
archive (``<service>-p<N>-<day>.jsonl.gz``), and ``audit --archives`` reads each partition
store as its own archives, then the store (one seal chain per store).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from services.shared.platform.kafka import table_partition
from services.shared.platform.settings import MAX_PARTITIONS, Settings, SettingsError, store_name
from services.tools.audit.archive import (
    Archived,
    ArchiveDamaged,
    ArchiveStore,
    archived,
    write_day,
)
from services.tools.audit.auditor import read_history
from services.tools.audit.by_partition import audit_partitions, checkpoint_of
from services.tools.audit.checkpoint import CheckpointError
from services.tools.audit.checkpoint import read as read_checkpoint
from services.tools.audit.partitions import (
    Layout,
    archive_findings,
    archived_stores,
    discover,
    layout_findings,
    require,
)
from services.tools.audit.read_models import digest, read_models
from services.tools.audit.result import AuditReport
from services.tools.audit.stores import SERVICES, StoreMissing, StoreReader, open_stores
from services.tools.cli.audit_inputs import EXIT_ERRORS, EXIT_USAGE, err, progress_bar
from services.tools.history.views import History

Partitions = Annotated[
    int | None,
    typer.Option(
        "--partitions",
        min=1,
        max=MAX_PARTITIONS,
        help="With PB_PARTITIONED=yes: the topics' partition count (default "
        "PB_TOPIC_PARTITIONS if set); a partition without stores below it is an error.",
    ),
]


def expected_partitions(given: int | None) -> int | None:
    """The topics' partition count if known: ``--partitions``, else PB_TOPIC_PARTITIONS."""
    if given is not None:
        return given
    try:
        read = Settings.from_env("audit", os.environ)
        return read.topic_partitions if "topic_partitions" in read.model_fields_set else None
    except SettingsError as error:
        err(str(error))
        raise typer.Exit(EXIT_USAGE) from None


def found_partitions(settings: Settings) -> Layout:
    """The partition stores there are (an error a person reads when there are none)."""
    try:
        found = discover(settings)
        require(settings, found)
    except StoreMissing as error:
        err(str(error))
        raise typer.Exit(EXIT_USAGE) from None
    except Exception as error:  # e.g. PostgreSQL unreachable
        err(f"cannot list the partition stores ({settings.describe_store()}): {error}")
        raise typer.Exit(EXIT_USAGE) from None
    return found


Checked = dict[tuple[int, str], Archived]
"""Each partition store's archives, checked (:func:`_check_archives`): by (partition, service)."""


def opener(
    settings: Settings,
    found: Layout,
    archives: Path | None = None,
    checked: Checked | None = None,
) -> Any:
    """``open_partition(n)``: the stores partition n has (``archives``: each read as its daily
    archives there, then the store; ``checked``: those archives, already checked, not checked
    again; ArchiveDamaged names the partition)."""

    def open_partition(number: int) -> Mapping[str, StoreReader]:
        services = [s for s in SERVICES if s in found.get(number, ())]
        stores = open_stores(settings.for_partition(number), services)
        if archives is None:
            return stores
        try:
            return {
                service: ArchiveStore(
                    store,
                    archives,
                    store_name(service, number),
                    None if checked is None else checked[number, service],
                )
                for service, store in stores.items()
            }
        except ArchiveDamaged as error:
            for store in stores.values():
                store.close()
            raise ArchiveDamaged(f"partition {number}: {error}") from None

    return open_partition


def archive_partitions(settings: Settings, day: str, out: Path) -> None:
    """Each partition store's archive of ``day`` in ``out`` (``<service>-p<N>-<day>``)."""
    found = found_partitions(settings)
    open_partition = opener(settings, found)
    for number in sorted(found):
        stores = open_partition(number)
        try:
            for service, store in stores.items():
                name = store_name(service, number)
                path = write_day(store, day, out, name)
                sys.stdout.write(f"{name}: {path or f'nothing sealed on {day}'}\n")
        finally:
            for store in stores.values():
                store.close()


def _check_archives(found: Layout, archives: Path) -> tuple[Checked, list[Path]] | None:
    """Every partition store's archives, once they match their digests and names, before the
    audit; and the folder's files (listed once). None: no folder."""
    if not archives.is_dir():
        return None  # none yet: each store reads as itself (as the unpartitioned audit does)
    listing = list(archives.iterdir())
    checked: Checked = {}
    for number in sorted(found):
        for service in sorted(found[number], key=SERVICES.index):
            try:
                checked[number, service] = archived(archives, store_name(service, number), listing)
            except ArchiveDamaged as error:
                err(f"partition {number}: {error}; audit without --archives, or restore it")
                raise typer.Exit(EXIT_ERRORS) from None
    return checked, listing


def audit_partitioned(
    settings: Settings,
    partitions: int | None,
    checkpoint: Path | None,
    archives: Path | None = None,
    **options: Any,
) -> AuditReport:
    """Every partition's audit, one report (``audit_partitions``'s ``options``; ``archives``:
    each partition store read as its daily archives there, then the store)."""
    expected = expected_partitions(partitions)
    found = found_partitions(settings)
    layout = layout_findings(found, expected)
    checked: Checked | None = None
    if archives is not None:
        checked, listing = _check_archives(found, archives) or (None, None)
        layout += archive_findings(found, archived_stores(archives, listing), layout)
    if checkpoint is not None:
        for number in sorted(found):
            path = checkpoint_of(checkpoint, number)
            try:
                if path.exists():
                    read_checkpoint(path)
            except CheckpointError as error:
                err(f"partition {number}: {error}")
                raise typer.Exit(EXIT_USAGE) from None
    with progress_bar() as (bar, step):
        try:
            return audit_partitions(
                sorted(found),
                opener(settings, found, archives, checked),
                layout,
                progress=lambda name, rows: bar.update(step, advance=rows, description=name),
                checkpoint=checkpoint,
                **options,
            )
        except StoreMissing as error:  # a store removed while the audit ran
            err(str(error))
            raise typer.Exit(EXIT_ERRORS) from None
        except ArchiveDamaged as error:  # an archive changed while the audit ran
            err(f"{error}; audit without --archives, or restore the archive")
            raise typer.Exit(EXIT_ERRORS) from None


def partition_history(settings: Settings, partitions: int | None, table: str) -> History:
    """The history of the partition that holds ``table`` (``recall``)."""
    found = found_partitions(settings)
    count = expected_partitions(partitions) or max(found) + 1
    number = table_partition(table, count)
    if number not in found:
        err(f"table {table!r} is in partition {number} of {count}, which has no stores")
        raise typer.Exit(EXIT_USAGE)
    return _read(opener(settings, found)(number))


def replay_partitions(settings: Settings, out: Path) -> None:
    """Each partition's read models in ``out/p<N>/``."""
    found = found_partitions(settings)
    open_partition = opener(settings, found)
    for number in sorted(found):
        history = _read(open_partition(number))
        folder = out / f"p{number}"
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in read_models(history).items():
            (folder / name).write_bytes(data)
            sys.stdout.write(f"{folder / name}: {len(data):,} bytes, sha256 {digest(data)}\n")


def _read(stores: Mapping[str, StoreReader]) -> History:
    try:
        history, _findings, _seals = read_history(stores)
    finally:
        for store in stores.values():
            store.close()
    return history
