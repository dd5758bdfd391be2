"""Audit a partitioned deployment: every partition's three stores, as one closed history each.

Partition N's stores (shoe-pN, dealing-pN, settlement-pN, ``partitions.py``) hold every record
of N's tables, so the streaming audit (``auditor.audit``) runs on each partition in turn, with
its memory bounded as for one store, and its seals compared with THAT partition's anchors
(an anchor names its partition: one of partition 1 never vouches for partition 0's store).
The partitions' reports become one :class:`AuditReport`: stores named ``<service>-p<N>``,
every finding naming its partition, the checks and totals over all partitions, and what each
partition showed (``AuditReport.partitions``). Anchored stores that were not there to audit
(a partition's store deleted) are errors too.

``--checkpoint FILE`` keeps one checkpoint per partition beside it (:func:`checkpoint_of`:
``audit.json`` -> ``audit-p0.json``, ...), each written when its partition has no error.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from services.shared.platform.settings import store_name
from services.tools.audit.anchor_reader import AnchorRecords
from services.tools.audit.anchors import AnchorSummary
from services.tools.audit.auditor import Progress, audit
from services.tools.audit.checks import Filters
from services.tools.audit.findings import Code, Finding, Severity
from services.tools.audit.result import AuditReport, PartitionSummary
from services.tools.audit.stores import StoreReader
from services.tools.audit.totals import Tally, Totals

Opener = Callable[[int], Mapping[str, StoreReader]]
"""``open_partition(n)``: partition n's stores by service (closed by the caller's audit)."""


def checkpoint_of(checkpoint: Path, partition: int) -> Path:
    """Partition ``partition``'s checkpoint file beside ``checkpoint`` (its name + ``-p<N>``)."""
    return checkpoint.with_name(f"{checkpoint.stem}-p{partition}{checkpoint.suffix}")


def audit_partitions(
    partitions: Sequence[int],
    open_partition: Opener,
    layout: Sequence[Finding] = (),
    *,
    filters: Filters | None = None,
    progress: Progress | None = None,
    anchors: AnchorRecords | None = None,
    checkpoint: Path | None = None,
    **options: Any,
) -> AuditReport:
    """Audit each partition's stores (``auditor.audit``'s ``options``); one report, errors
    first. ``layout``: the findings about missing partition stores (``partitions.py``)."""
    started = time.perf_counter()
    filters = filters or Filters()
    combined = AuditReport(
        findings=[],
        totals=Totals(detail=options.get("coup_totals", True)),
        seals={},
        events={},
        checked={},
        filters=filters,
        seconds=0.0,
        anchors={} if anchors is not None else None,
        anchors_topic=anchors.topic if anchors is not None else "",
        partitions={},
    )
    refused = list(anchors.findings) if anchors is not None else []
    findings = [*layout, *refused]
    # the seals topic's refused records: every partition's audit lists them, the report once
    refused_ids = {id(finding) for finding in refused}
    audited: set[tuple[str, int | None]] = set()
    for number in partitions:
        stores = open_partition(number)
        try:
            report = audit(
                stores,
                filters,
                _named(progress, number),
                anchors=anchors,
                checkpoint=checkpoint_of(checkpoint, number) if checkpoint else None,
                partition=number,
                **options,
            )
        finally:
            for store in stores.values():
                store.close()
        audited |= {(service, number) for service in stores}
        own = [replace(f, partition=number) for f in report.findings if id(f) not in refused_ids]
        findings += own
        _add(combined, report, number, own + [f for f in layout if f.partition == number])
    if anchors is not None:
        findings += _anchored_not_audited(anchors, audited)
    combined.findings = sorted(findings, key=lambda f: f.severity is not Severity.ERROR)
    combined.seconds = time.perf_counter() - started
    return combined


def _named(progress: Progress | None, partition: int) -> Progress | None:
    if progress is None:
        return None
    return lambda service, rows: progress(store_name(service, partition), rows)


def _add(combined: AuditReport, report: AuditReport, number: int, own: list[Finding]) -> None:
    """One partition's report into the combined one (``own``: every finding of the partition,
    its missing stores' included)."""
    names = {service: store_name(service, number) for service in report.stores}
    combined.stores.update({names[s]: where for s, where in report.stores.items()})
    combined.events.update({names[s]: count for s, count in report.events.items()})
    combined.seals.update({names[s]: seal for s, seal in report.seals.items()})
    for what, count in report.checked.items():
        combined.checked[what] = combined.checked.get(what, 0) + count
    if combined.anchors is not None and report.anchors is not None:
        summaries: dict[str, AnchorSummary] = report.anchors
        combined.anchors.update({names[s]: summary for s, summary in summaries.items()})
    _merge(combined.totals, report.totals)
    assert combined.partitions is not None
    combined.partitions[number] = PartitionSummary(
        stores=list(report.stores),
        events=report.total_events,
        checked=dict(report.checked),
        errors=sum(f.severity is Severity.ERROR for f in own),
        warnings=sum(f.severity is Severity.WARNING for f in own),
    )


def _merge(into: Totals, part: Totals) -> None:
    """A partition's totals into the totals over all (its tables are its own)."""
    into.overall.add(part.overall)
    for mine, theirs in (
        (into.days, part.days),
        (into.tables, part.tables),
        (into.shoes, part.shoes),
        (into.coups, part.coups),
    ):
        for key, tally in theirs.items():
            mine.setdefault(key, Tally()).add(tally)


def _anchored_not_audited(
    anchors: AnchorRecords, audited: set[tuple[str, int | None]]
) -> list[Finding]:
    """An error for each partition store that signed anchors vouch for but that is not there."""
    return [
        Finding(
            Severity.ERROR,
            Code.ANCHOR_MISSING_IN_STORE,
            f"{len(anchors.book(service, partition).anchors)} seals of the {service} store "
            f"of partition {partition} are anchored, but that store was not found: it was "
            "deleted (or the audit reads the wrong --data-dir / schema prefix)",
            store=service,
            partition=partition,
        )
        for service, partition in sorted(anchors.stores() - audited, key=str)
        if partition is not None
    ]
