"""``punto-banco audit``, ``recall`` and ``replay``: regulatory replay from the event stores.

All three read the services' stores directly (the SQLite files under
``--data-dir``, or PostgreSQL with ``--postgres`` from the same settings the
services use). Only ``audit --anchors`` reads Kafka: the seal anchors the services signed
(``services.tools.audit.anchor_reader``), to compare each store's seals with. See
``services.tools.audit``. With ``PB_PARTITIONED=yes`` they read a partitioned deployment's
stores, one set per partition (``audit_partitions.py``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from services.tools.audit.auditor import audit as run_audit
from services.tools.audit.auditor import read_history
from services.tools.audit.checkpoint import CheckpointError
from services.tools.audit.checkpoint import read as read_checkpoint
from services.tools.audit.checks import Filters
from services.tools.audit.read_models import digest, read_models
from services.tools.audit.recall import UnknownTable, recall, recall_text
from services.tools.audit.report import to_html, to_json, to_text
from services.tools.audit.result import AuditReport
from services.tools.audit.stores import StoreReader
from services.tools.cli.audit_inputs import (
    EXIT_ERRORS,
    EXIT_USAGE,
    EXIT_WARNINGS,
    DataDir,
    Postgres,
    anchor_records,
    err,
    moment_option,
    open_for_audit,
    progress_bar,
    settings_for,
    supervisors_keyring,
)
from services.tools.cli.audit_partitions import (
    Partitions,
    audit_partitioned,
    partition_history,
    replay_partitions,
)
from services.tools.history.views import History


def _read_with_progress(stores: dict[str, StoreReader]) -> History:
    with progress_bar() as (bar, step):
        bar.update(step, total=sum(store.count() for store in stores.values()))
        history, _findings, _seals = read_history(
            stores, lambda name, rows: bar.update(step, advance=rows, description=name)
        )
    return history


def audit(
    data_dir: DataDir = None,
    postgres: Postgres = False,
    table: Annotated[str | None, typer.Option("--table", help="Only this table.")] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Only coups opened at/after (ISO 8601, UTC).")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Only coups opened before (ISO 8601, UTC).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    html_file: Annotated[
        Path | None, typer.Option("--html", help="Also write an HTML report to FILE.")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="Totals of every coup too.")] = False,
    allow_warnings: Annotated[
        bool, typer.Option("--allow-warnings", help="Exit 0 when there are only warnings.")
    ] = False,
    supervisors: Annotated[
        Path | None,
        typer.Option(
            "--supervisors",
            help="The supervisors keyring every void's signed decision is verified with "
            "(default: PB_SUPERVISOR_KEYRING or <data dir>/keys/supervisors.json, if there).",
        ),
    ] = None,
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint",
            help="Resume from this checkpoint file if it exists (check only what came after "
            "it), stop each store at its last seal, and write the file anew when no error is "
            "found. Keep it where only the auditor writes.",
        ),
    ] = None,
    coup_totals: Annotated[
        bool,
        typer.Option(
            "--coup-totals/--no-coup-totals",
            help="Totals per coup and per shoe (they grow with the history: leave them out "
            "for a long one; per day and per table remain).",
        ),
    ] = True,
    archives: Annotated[
        Path | None,
        typer.Option(
            "--archives",
            help="Read each store's daily archives in this folder first (punto-banco "
            "archive), then the store after them: one seal chain across both.",
        ),
    ] = None,
    anchors: Annotated[
        bool,
        typer.Option(
            "--anchors",
            help="Also compare each store's seals with the signed seal anchors on Kafka "
            "(topic punto-banco.seals; KAFKA_BOOTSTRAP_SERVERS, PB_TOPIC_PREFIX, PB_KEYRING).",
        ),
    ] = False,
    partitions: Partitions = None,
) -> None:
    """Verify every shoe, coup, bet, void and seal in the stores; exit 1 on errors, 3 on warnings.

    Recomputes commitments, the tableau, results and payouts with the rules engine,
    checks that dealing and settlement agree, verifies each void's signed decision against
    the supervisors keyring, verifies each store's seal chain (tamper evidence), with
    --anchors compares it with the seals each service anchored on Kafka, and reports
    totals per coup, shoe, table and day. With --checkpoint, a daily audit reads only the
    day's rows (after verifying the seal the checkpoint starts from). With PB_PARTITIONED=yes,
    every partition's stores (a checkpoint file per partition beside --checkpoint's; with
    --archives, each partition store's own daily archives, <service>-p<N>-<day>).
    """
    filters = Filters(table, moment_option(since, "--since"), moment_option(until, "--until"))
    settings = settings_for(data_dir, postgres)
    keyring = supervisors_keyring(supervisors, data_dir, postgres)
    anchored = anchor_records(data_dir, postgres) if anchors else None
    if settings.partitioned:
        report = audit_partitioned(
            settings,
            partitions,
            checkpoint,
            archives,
            filters=filters,
            supervisors=keyring,
            require_decisions=True,
            anchors=anchored,
            coup_totals=coup_totals,
        )
        _show(report, as_json, html_file, verbose, allow_warnings)
        return
    if checkpoint is not None and checkpoint.exists():
        try:
            read_checkpoint(checkpoint)
        except CheckpointError as error:
            err(str(error))
            raise typer.Exit(EXIT_USAGE) from None
    with open_for_audit(data_dir, postgres, archives) as stores, progress_bar() as (bar, step):
        bar.update(step, total=sum(store.count() for store in stores.values()))
        report = run_audit(
            stores,
            filters,
            lambda name, rows: bar.update(step, advance=rows, description=name),
            supervisors=keyring,
            require_decisions=True,
            anchors=anchored,
            checkpoint=checkpoint,
            coup_totals=coup_totals,
        )
    _show(report, as_json, html_file, verbose, allow_warnings)


def _show(
    report: AuditReport,
    as_json: bool,
    html_file: Path | None,
    verbose: bool,
    allow_warnings: bool,
) -> None:
    """Print the report (and write its HTML); exit 1 on errors, 3 on warnings."""
    if html_file is not None:
        html_file.parent.mkdir(parents=True, exist_ok=True)
        html_file.write_text(to_html(report), encoding="utf-8")
    sys.stdout.write(to_json(report) if as_json else to_text(report, verbose=verbose))
    if html_file is not None and not as_json:
        sys.stdout.write(f"HTML report written to {html_file}\n")
    if report.errors:
        raise typer.Exit(EXIT_ERRORS)
    if report.warnings and not allow_warnings:
        raise typer.Exit(EXIT_WARNINGS)


def recall_cmd(
    table: Annotated[str, typer.Option("--table", help="The table to recall.")],
    last: Annotated[int, typer.Option("--last", min=1, help="How many coups.")] = 10,
    data_dir: DataDir = None,
    postgres: Postgres = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    partitions: Partitions = None,
) -> None:
    """Game recall: the table's last N coups with cards, totals, outcome, bets and voids."""
    settings = settings_for(data_dir, postgres)
    if settings.partitioned:
        history = partition_history(settings, partitions, table)
    else:
        with open_for_audit(data_dir, postgres) as stores:
            history = _read_with_progress(stores)
    try:
        coups = recall(history, table, last)
    except UnknownTable as error:
        err(str(error))
        raise typer.Exit(EXIT_USAGE) from None
    if as_json:
        sys.stdout.write(json.dumps({"table_id": table, "coups": coups}, indent=2) + "\n")
    else:
        sys.stdout.write(recall_text(table, coups))


def replay(
    out: Annotated[Path, typer.Option("--out", help="Folder for the rebuilt read models.")],
    data_dir: DataDir = None,
    postgres: Postgres = False,
) -> None:
    """Rebuild the table-history and bettor-history read models from the stores (with
    PB_PARTITIONED=yes: each partition's in `OUT/p<N>/`)."""
    settings = settings_for(data_dir, postgres)
    if settings.partitioned:
        replay_partitions(settings, out)
        return
    with open_for_audit(data_dir, postgres) as stores:
        history = _read_with_progress(stores)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in read_models(history).items():
        (out / name).write_bytes(data)
        sys.stdout.write(f"{out / name}: {len(data):,} bytes, sha256 {digest(data)}\n")


def register(app: typer.Typer) -> None:
    """Add ``audit``, ``recall`` and ``replay`` (``archive``: ``archive_cmd``)."""
    app.command("audit")(audit)
    app.command("recall")(recall_cmd)
    app.command("replay")(replay)
