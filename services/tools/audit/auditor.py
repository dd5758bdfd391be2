"""Run an audit: read the three stores in step, verify their seals, check as the history streams.

``audit(stores, filters, progress)`` reads each store once, in notification order: every
row is hashed for the seal chain (``services.tools.audit.seals``), checked for gaps in its
aggregate's versions and projected into a bounded window of the history
(``services.tools.history.from_store``); each coup, with its shoe's cards and its bet book,
is checked by ``services.tools.audit.checks`` once it is complete in every store, then
dropped (``stream.py``, ``window.py``): memory is bounded by the tables and their open
coups, not by the length of the history. The result is an :class:`AuditReport`
(``result.py``). Given the anchors read from Kafka (``anchor_reader.py``), each store's
seals are also compared with what its service anchored (``anchors.py``).

``read_history`` reads the whole history into memory instead (``recall``, ``replay``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path

from services.shared.platform.security import SupervisorKeyring
from services.tools.audit.anchor_reader import AnchorRecords
from services.tools.audit.anchors import AnchorSummary
from services.tools.audit.checkpoint import last_seal
from services.tools.audit.checkpoint import read as read_checkpoint
from services.tools.audit.checkpoint import write as write_checkpoint
from services.tools.audit.checks import Checker, Filters
from services.tools.audit.findings import Code, Finding, Severity
from services.tools.audit.reading import RowReader, place
from services.tools.audit.result import AuditReport, bulk_loading
from services.tools.audit.resume import capture, resume
from services.tools.audit.seals import SealSummary
from services.tools.audit.stores import SERVICES, StoreReader
from services.tools.audit.stream import StreamAudit, verifier
from services.tools.audit.totals import Totals
from services.tools.audit.window import REVIVE_WITHIN
from services.tools.history.from_store import StoreFeed
from services.tools.history.views import History

Progress = Callable[[str, int], None]
"""``progress(store, rows_done_in_this_step)``."""

__all__ = ["AuditReport", "audit", "read_history"]


def read_history(
    stores: Mapping[str, StoreReader], progress: Progress | None = None
) -> tuple[History, list[Finding], dict[str, SealSummary]]:
    """Read every store whole; the history, the store-level findings and seal summaries."""
    with bulk_loading():
        history = History()
        feed = StoreFeed(history)
        findings: list[Finding] = []
        summaries: dict[str, SealSummary] = {}
        for service in SERVICES:
            if service not in stores:
                continue
            reader = RowReader(service, feed, verifier(service, None))
            for batch in stores[service].rows():
                reader.read(batch)
                if progress is not None:
                    progress(service, len(batch))
            history.events[service] = reader.rows
            reader.verifier.finish()
            findings += reader.findings
            findings += place(reader.verifier.findings, reader.verifier.located, history.owners.get)
            summaries[service] = reader.verifier.summary
        feed.close()
        return history, findings, summaries


def audit(
    stores: Mapping[str, StoreReader],
    filters: Filters | None = None,
    progress: Progress | None = None,
    supervisors: SupervisorKeyring | None = None,
    require_decisions: bool = False,
    anchors: AnchorRecords | None = None,
    revive_within: timedelta = REVIVE_WITHIN,
    checkpoint: Path | None = None,
    coup_totals: bool = True,
    partition: int | None = None,
) -> AuditReport:
    """Read, verify and check; errors first.

    ``supervisors``: the keyring every void's signed decision is verified with (none: the
    decisions are not verified, and ``require_decisions`` says so in a warning).
    ``anchors``: the seal anchors read from Kafka (``anchor_reader.read_anchors``), each
    store's seals are compared with (None: not compared, the report as before).
    ``revive_within``: how long after a coup opened a late event (a void) may still bring
    it back to be checked again (``window.REVIVE_WITHIN``).
    ``checkpoint``: resume from this file if it exists (checking only what is new), stop
    each store at its last seal, and (no errors) write the file anew (``checkpoint.py``).
    ``coup_totals``: keep totals per coup and per shoe (False: per day and table, which do
    not grow with the history's length).
    ``partition``: the stores are that partition's of a partitioned deployment (their seals
    are compared with that partition's anchors; ``partitions.py`` audits every partition).
    """
    started = time.perf_counter()
    filters = filters or Filters()
    with bulk_loading():
        checker = Checker(History(), filters, supervisors, require_decisions)
        checker.totals = Totals(detail=coup_totals)
        run = StreamAudit(stores, checker, anchors, revive_within, partition=partition)
        refused = (
            resume(run, read_checkpoint(checkpoint))
            if checkpoint is not None and checkpoint.exists()
            else []
        )
        marks = {s: last_seal(stores[s]) for s in run.readers} if checkpoint else {}
        sealed = {s: mark for s, mark in marks.items() if mark is not None}
        if not refused:
            run.run(progress, {s: m["nid"] for s, m in sealed.items()} if checkpoint else None)
        found = refused or run.findings()
        if checkpoint is not None and not refused:
            if len(sealed) < len(marks):
                found.append(_not_checkpointed(set(marks) - set(sealed)))
            elif not any(f.severity is Severity.ERROR for f in found):
                write_checkpoint(checkpoint, capture(run, sealed))
        findings = (anchors.findings if anchors is not None else []) + found
        seals = run.summaries
        report = AuditReport(
            findings=sorted(findings, key=lambda f: (f.severity is not Severity.ERROR,)),
            totals=checker.totals,
            seals=seals,
            events=run.events,
            checked=dict(checker.checked),
            filters=filters,
            seconds=0.0,
            stores={name: store.description for name, store in stores.items()},
            anchors=_anchor_summaries(seals, anchors),
            anchors_topic=anchors.topic if anchors is not None else "",
        )
        del run, checker
    report.seconds = time.perf_counter() - started
    return report


def _not_checkpointed(unsealed: set[str]) -> Finding:
    return Finding(
        Severity.WARNING,
        Code.NOT_SEALED,
        f"no checkpoint written: the {', '.join(sorted(unsealed))} store was never sealed "
        "(a checkpoint starts from each store's last seal)",
    )


def _anchor_summaries(
    seals: Mapping[str, SealSummary], anchors: AnchorRecords | None
) -> dict[str, AnchorSummary] | None:
    if anchors is None:
        return None
    return {name: s.anchors for name, s in seals.items() if s.anchors is not None}
