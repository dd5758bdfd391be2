"""Run an audit: read the three stores, verify their seals, rebuild and check the history.

``audit(stores, filters, progress)`` reads each store once, in notification
order: every row is hashed for the seal chain (``services.tools.audit.seals``),
checked for gaps in its aggregate's versions, and read into the history
(``services.tools.history.from_store``); then ``services.tools.audit.checks`` recomputes and
compares everything. The result is an :class:`AuditReport` (``result.py``). Given the
anchors read from Kafka (``anchor_reader.py``), each store's seals are also compared with
what its service anchored (``anchors.py``).
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from services.shared.platform.sealing import SEALED_TOPIC, STARTED_TOPIC
from services.shared.platform.supervisors import SupervisorKeyring
from services.tools.audit.anchor_reader import AnchorRecords
from services.tools.audit.anchors import AnchorCheck, AnchorSummary
from services.tools.audit.checks import Checker, Filters
from services.tools.audit.findings import Code, Finding, Severity
from services.tools.audit.result import AuditReport, bulk_loading
from services.tools.audit.seals import SealSummary, SealVerifier
from services.tools.audit.stores import SERVICES, SPLIT_BYTE, StoreReader
from services.tools.audit.totals import Totals
from services.tools.history.from_store import StoreFeed, read_state
from services.tools.history.views import History

_UNREADABLE = (KeyError, TypeError, ValueError, AttributeError, IndexError, StopIteration)

Progress = Callable[[str, int], None]
"""``progress(store, rows_done_in_this_step)``."""

_ROW_PREFIX = b"pb-row-v1"


__all__ = ["AuditReport", "audit", "read_history"]


def read_history(
    stores: Mapping[str, StoreReader], progress: Progress | None = None
) -> tuple[History, list[Finding], dict[str, SealSummary]]:
    """Read every store once; the history, the store-level findings and seal summaries."""
    with bulk_loading():
        return _read_history(stores, progress)


def _verifier(service: str, anchors: AnchorRecords | None) -> SealVerifier:
    """The seal verifier of one store, comparing its seals with its anchors if given."""
    check = AnchorCheck(anchors.book(service)) if anchors is not None else None
    return SealVerifier(service, anchors=check)


def _read_history(
    stores: Mapping[str, StoreReader],
    progress: Progress | None,
    anchors: AnchorRecords | None = None,
) -> tuple[History, list[Finding], dict[str, SealSummary]]:
    history = History()
    feed = StoreFeed(history)
    findings: list[Finding] = []
    summaries: dict[str, SealSummary] = {}
    for service in SERVICES:
        if service not in stores:
            continue
        verifier = _verifier(service, anchors)
        history.events[service] = _read_store(
            service, stores[service], feed, verifier, findings, progress
        )
        verifier.finish()
        findings.extend(_place(verifier.findings, verifier.located, history))
        summaries[service] = verifier.summary
    feed.close()
    return history, findings, summaries


def _read_store(
    service: str,
    store: StoreReader,
    feed: StoreFeed,
    verifier: SealVerifier,
    findings: list[Finding],
    progress: Progress | None,
    lower_half_only: bool = False,
) -> int:
    """Hash, version-check and read every row; ``lower_half_only``: read only the bet
    books whose id starts with a byte < SPLIT_BYTE (a parallel audit's other process does the
    rest), but still note every book's owner for locating findings."""
    readers = feed.readers
    book_topics, book_opened = feed.book_topics, feed.book_opened_topic
    sha256 = hashlib.sha256
    pending = verifier.pending
    topic_bytes: dict[str, bytes] = {}
    versions: dict[bytes, int] = {}
    rows = 0
    for batch in store.rows():
        for nid, oid, version, topic, state in batch:
            encoded = topic_bytes.get(topic)
            if encoded is None:
                raw = topic.encode()
                encoded = topic_bytes[topic] = len(raw).to_bytes(2, "big") + raw
            pending.append(
                (
                    nid,
                    sha256(
                        b"".join((_ROW_PREFIX, oid, version.to_bytes(8, "big"), encoded, state))
                    ).digest(),
                    oid,
                )
            )
            previous = versions.get(oid, 0)
            if version != previous + 1:
                findings.append(
                    Finding(
                        Severity.ERROR,
                        Code.VERSION_GAP,
                        f"event version {version} of aggregate {oid.hex()} follows version "
                        f"{previous}: an event was deleted, inserted or moved",
                        store=service,
                        notification_id=nid,
                    )
                )
            versions[oid] = version
            handler = readers.get(topic)
            if lower_half_only and oid[0] >= SPLIT_BYTE and topic in book_topics:
                if topic == book_opened:
                    handler = feed.book_owner
                else:
                    continue
            if handler is not None:
                try:
                    handler(oid, nid, read_state(state))
                except _UNREADABLE as error:
                    findings.append(_unreadable(topic, error, nid, service))
            elif topic == SEALED_TOPIC:
                verifier.sealed(nid, version, state)
            elif topic == STARTED_TOPIC:
                verifier.started(version)
        rows += len(batch)
        verifier.summary.rows += len(batch)
        if progress is not None:
            progress(service, len(batch))
    return rows


def _unreadable(topic: str, error: BaseException, nid: int, store: str = "settlement") -> Finding:
    return Finding(
        Severity.ERROR,
        Code.UNREADABLE_EVENT,
        f"{topic.rsplit(':', 1)[-1]} cannot be read or names nothing known "
        f"({type(error).__name__}: {error})",
        store=store,
        notification_id=nid,
    )


def _place(findings: list[Finding], located: dict[int, bytes], history: History) -> list[Finding]:
    """Name the table/shoe/coup of tampered rows where the aggregate is known."""
    out = []
    for finding in findings:
        oid = located.get(finding.notification_id or -1)
        owner = history.owners.get(oid) if oid else None
        if owner is not None:
            table_id, shoe_id, coup_id = owner
            finding = Finding(
                finding.severity,
                finding.code,
                finding.message,
                table_id=table_id,
                shoe_id=shoe_id,
                coup_id=coup_id,
                store=finding.store,
                notification_id=finding.notification_id,
            )
        out.append(finding)
    return out


def audit(
    stores: Mapping[str, StoreReader],
    filters: Filters | None = None,
    progress: Progress | None = None,
    parallel: bool | None = None,
    supervisors: SupervisorKeyring | None = None,
    require_decisions: bool = False,
    anchors: AnchorRecords | None = None,
) -> AuditReport:
    """Read, verify and check; errors first.

    ``parallel`` (default: when the settlement store is big and the machine has two
    cores or more): a second process decodes and checks half of the bet books while
    this one reads, hashes and verifies every row and checks the other half.
    ``supervisors``: the keyring every void's signed decision is verified with (none: the
    decisions are not verified, and ``require_decisions`` says so in a warning).
    ``anchors``: the seal anchors read from Kafka (``anchor_reader.read_anchors``), each
    store's seals are compared with (None: not compared, the report as before).
    """
    started = time.perf_counter()
    filters = filters or Filters()
    with bulk_loading():
        if parallel is None:
            parallel = _worth_a_second_process(stores)
        if parallel:
            checker = Checker(History(), filters, supervisors, require_decisions)
            history, findings, seals = _audit_in_two_processes(stores, checker, progress, anchors)
        else:
            history, findings, seals = _read_history(stores, progress, anchors)
            checker = Checker(history, filters, supervisors, require_decisions)
            checker.run()
        events = dict(history.events)
        totals, checked = checker.totals, dict(checker.checked)
        findings = (anchors.findings if anchors is not None else []) + findings + checker.findings
        # Free the rebuilt history while the collector is still off: it holds no cycles,
        # so reference counting frees it at once; with the collector back on first, its
        # first pass would scan every one of its millions of objects.
        del history, checker
    findings.sort(key=lambda f: (f.severity is not Severity.ERROR,))
    return AuditReport(
        findings=findings,
        totals=totals,
        seals=seals,
        events=events,
        checked=checked,
        filters=filters,
        seconds=time.perf_counter() - started,
        stores={name: store.description for name, store in stores.items()},
        anchors=_anchor_summaries(seals, anchors),
        anchors_topic=anchors.topic if anchors is not None else "",
    )


def _anchor_summaries(
    seals: Mapping[str, SealSummary], anchors: AnchorRecords | None
) -> dict[str, AnchorSummary] | None:
    if anchors is None:
        return None
    return {name: s.anchors for name, s in seals.items() if s.anchors is not None}


# -- a parallel audit ---------------------------------------------------------------------
PARALLEL_FROM_ROWS = 200_000
"""Settlement stores at least this big are audited by two processes (when possible)."""

_SHARED: dict[str, Any] = {}
"""What the second process inherits when it is forked: the checker and the store."""


def _worth_a_second_process(stores: Mapping[str, StoreReader]) -> bool:
    settlement = stores.get("settlement")
    if settlement is None or not hasattr(settlement, "reopen"):
        return False
    if (os.cpu_count() or 1) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return False
    return settlement.count() >= PARALLEL_FROM_ROWS


def _audit_in_two_processes(
    stores: Mapping[str, StoreReader],
    checker: Checker,
    progress: Progress | None,
    anchors: AnchorRecords | None,
) -> tuple[History, list[Finding], dict[str, SealSummary]]:
    """Dealing and shoe first (here); then the bet books split between two processes
    (``checker``: the checks to run, on the history read here)."""
    history = checker.history
    feed = StoreFeed(history)
    findings: list[Finding] = []
    summaries: dict[str, SealSummary] = {}
    for service in ("shoe", "dealing"):
        if service in stores:
            verifier = _verifier(service, anchors)
            history.events[service] = _read_store(
                service, stores[service], feed, verifier, findings, progress
            )
            verifier.finish()
            findings.extend(_place(verifier.findings, verifier.located, history))
            summaries[service] = verifier.summary
    checker.check_dealing()
    settlement = stores["settlement"]
    _SHARED.update(checker=checker, store=settlement)
    try:
        with multiprocessing.get_context("fork").Pool(1) as pool:
            upper = pool.apply_async(_check_upper_half)
            verifier = _verifier("settlement", anchors)
            history.events["settlement"] = _read_store(
                "settlement",
                settlement,
                feed,
                verifier,
                findings,
                progress,
                lower_half_only=True,
            )
            verifier.finish()
            findings.extend(_place(verifier.findings, verifier.located, history))
            summaries["settlement"] = verifier.summary
            checker.check_books()
            their_findings, their_totals, their_checked, their_books = upper.get()
    finally:
        _SHARED.clear()
    feed.close()
    checker.findings.extend(their_findings)
    checker.totals.merge(their_totals)
    checker.checked.update(their_checked)
    checker.check_missing_books(set(history.books) | their_books)
    return history, findings, summaries


def _check_upper_half() -> tuple[list[Finding], Totals, dict[str, int], set[tuple[str, str]]]:
    """In the forked process: read and check the bet books of the upper half."""
    checker: Checker = _SHARED["checker"]
    store = _SHARED["store"].reopen()
    checker.findings = []
    checker.totals = Totals()
    checker.checked = Counter()
    feed = StoreFeed(checker.history)
    readers, book_topics = feed.readers, feed.book_topics
    try:
        for batch in store.rows(upper_half=True):
            for nid, oid, _version, topic, state in batch:
                handler = readers.get(topic)
                if handler is None or (oid[0] < SPLIT_BYTE and topic in book_topics):
                    continue
                try:
                    handler(oid, nid, read_state(state))
                except _UNREADABLE as error:
                    if oid[0] >= SPLIT_BYTE and topic in book_topics:  # others: the first process
                        checker.findings.append(_unreadable(topic, error, nid))
    finally:
        store.close()
        feed.close()
    books = {key for key, book in checker.history.books.items()}
    checker.check_books()
    return checker.findings, checker.totals, dict(checker.checked), books
