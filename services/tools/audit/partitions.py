"""A partitioned deployment's stores (``PB_PARTITIONED``): which partitions exist and whether
any is incomplete (which partition holds a table: ``platform.kafka.table_partition``).

A partitioned service keeps one store per partition (``platform.cells.partitioned``):
SQLite files ``<data dir>/<service>-p<N>.sqlite``, PostgreSQL schemas
``<PB_POSTGRES_SCHEMA_PREFIX><service>_p<N>``. A table lives in one partition number on every
topic (key = table id, murmur2, the same partition count everywhere), so partition N's three
stores (shoe-pN, dealing-pN, settlement-pN) hold the closed history of N's tables and are
audited together (``by_partition.py``).

The partitions are discovered from the stores themselves; each partition's cell makes its
three stores when it first starts, so a partition with some services' stores but not the
others', or a partition number missing below the highest found (or below the topics'
partition count, when known), is an error: a store was deleted, or never written. So is a
partition store whose daily archives (``audit --archives``) are there but not the store.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from services.shared.platform.settings import Settings
from services.tools.audit.findings import Code, Finding, Severity
from services.tools.audit.stores import SERVICES, StoreMissing

Layout = dict[int, set[str]]
"""Partition number -> the services with a store of that partition."""

_NUMBER = r"(0|[1-9][0-9]{0,2})"  # a partition number as store_name writes it (no zeros)
_SERVICES = "|".join(SERVICES)


def discover(settings: Settings) -> Layout:
    """The partition stores ``settings`` place (SQLite files or PostgreSQL schemas)."""
    if settings.persistence == "postgres":
        return _postgres(settings)
    return _sqlite(settings.data_dir)


def _sqlite(data_dir: Path) -> Layout:
    pattern = re.compile(rf"^({_SERVICES})-p{_NUMBER}\.sqlite$")
    found: Layout = {}
    if data_dir.is_dir():
        for path in data_dir.iterdir():
            match = pattern.match(path.name)
            if match and path.is_file():
                found.setdefault(int(match[2]), set()).add(match[1])
    return found


def _postgres(settings: Settings) -> Layout:
    import psycopg

    prefix = settings.postgres_schema_prefix
    pattern = re.compile(rf"^{re.escape(prefix)}({_SERVICES})_p{_NUMBER}$")
    with psycopg.connect(**settings.postgres.connect_options()) as connection:
        names = connection.execute(
            "SELECT nspname FROM pg_catalog.pg_namespace WHERE starts_with(nspname, %s)",
            (prefix,),
        ).fetchall()
    found: Layout = {}
    for (name,) in names:
        match = pattern.match(name)
        if match:
            found.setdefault(int(match[2]), set()).add(match[1])
    return found


def where(settings: Settings) -> str:
    """Where the partition stores were looked for (for an error a person reads)."""
    if settings.persistence == "postgres":
        prefix = settings.postgres_schema_prefix
        return f"PostgreSQL schemas {prefix}<service>_p<N> ({settings.describe_store()})"
    return f"{settings.data_dir}/<service>-p<N>.sqlite"


def require(settings: Settings, found: Layout) -> None:
    """StoreMissing when no partition store exists at all (nothing to audit)."""
    if not found:
        raise StoreMissing(
            f"no partition stores at {where(settings)}: PB_PARTITIONED=yes reads the stores of "
            "a partitioned deployment; give the --data-dir (or --postgres settings) its "
            "services used, or unset PB_PARTITIONED to read a service's one store"
        )


def layout_findings(found: Mapping[int, set[str]], expected: int | None = None) -> list[Finding]:
    """An error for each partition's missing store: a partition that has some services' stores
    but not the others', a partition number missing below the highest found, and (with
    ``expected``, the topics' partition count) one missing below it or found beyond it."""
    findings: list[Finding] = []
    top = max(found, default=-1) + 1
    numbers = range(max(top, expected or 0))
    for number in numbers:
        have = found.get(number, set())
        lacking = [service for service in SERVICES if service not in have]
        if not lacking:
            continue
        if have:
            why = (
                f"partition {number} has the {_names(sorted(have, key=SERVICES.index))} "
                f"store{'s' if len(have) > 1 else ''} but no {_names(lacking)} store: "
                "its tables' history is incomplete (a store deleted, or never written)"
            )
        elif number < top:
            why = (
                f"partition {number} has no store while partition {top - 1} has: every "
                "partition's cell makes its stores when it starts (stores deleted?)"
            )
        else:
            why = (
                f"partition {number} has no store while the topics have {expected} "
                "partitions (stores deleted, or the partition never served?)"
            )
        findings += [
            Finding(Severity.ERROR, Code.PARTITION_MISSING, why, store=s, partition=number)
            for s in lacking
        ]
    if expected is not None:
        for number in sorted(n for n in found if n >= expected):
            findings.append(
                Finding(
                    Severity.ERROR,
                    Code.PARTITION_MISSING,
                    f"partition {number} has stores but the topics have only {expected} "
                    "partitions (numbered from 0): is the partition count right?",
                    partition=number,
                )
            )
    return findings


def archived_stores(folder: Path, listing: Iterable[Path] | None = None) -> Layout:
    """The partition stores with daily archives in ``folder`` (``<service>-p<N>-<day>``;
    ``listing``: the folder's files, when already listed)."""
    day = "[0-9]{4}-[0-9]{2}-[0-9]{2}"
    pattern = re.compile(rf"^({_SERVICES})-p{_NUMBER}-{day}\.jsonl\.gz$")
    found: Layout = {}
    if listing is None:
        listing = folder.iterdir() if folder.is_dir() else ()
    for path in listing:
        if match := pattern.match(path.name):
            found.setdefault(int(match[2]), set()).add(match[1])
    return found


def archive_findings(found: Layout, archives: Layout, known: list[Finding]) -> list[Finding]:
    """An error for each partition store with daily archives but no store (not already in
    ``known``): its archives are read before the store, so without it they go unaudited."""
    said = {(f.store, f.partition) for f in known}
    return [
        Finding(
            Severity.ERROR,
            Code.PARTITION_MISSING,
            f"partition {number} has daily archives of its {service} store but no such store: "
            "the store was deleted (or the audit reads the wrong --data-dir / schema prefix)",
            store=service,
            partition=number,
        )
        for number in sorted(archives)
        for service in sorted(archives[number] - found.get(number, set()), key=SERVICES.index)
        if (service, number) not in said
    ]


def _names(services: list[str]) -> str:
    return " and ".join(services) if len(services) < 3 else ", ".join(services)
