"""A checkpointed streaming audit: stop at each store's last seal, carry the open state over.

:func:`capture` turns a finished :class:`~services.tools.audit.stream.StreamAudit` (stopped at
the seals ``marks`` name) into the checkpoint's JSON; :func:`resume` verifies a checkpoint's
seals against the stores and brings its state into a new StreamAudit, reading the open
shoes, coups and books again from the stores. The file and what it trusts:
``checkpoint.py``.
"""

from __future__ import annotations

from typing import Any

from services.tools.audit.checkpoint import (
    done_from,
    done_state,
    table_from,
    table_state,
    totals_from,
    totals_state,
    verify_seal,
)
from services.tools.audit.findings import Finding
from services.tools.audit.stream import StreamAudit

_OPEN = (("shoe", "shoe_oids"), ("dealing", "coup_oids"), ("settlement", "book_oids"))


def capture(run: StreamAudit, marks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The checkpoint of ``run``, which stopped at the seals ``marks`` name."""
    window, feed = run.window, run.feed
    ctx = window.ctx
    return {
        "stores": {
            service: {
                **marks[service],
                "versions": {oid.hex(): v for oid, v in reader.versions.items()},
            }
            for service, reader in run.readers.items()
        },
        "open": {
            service: [oid.hex() for oid in getattr(feed, name).values()] for service, name in _OPEN
        },
        "tables": {t: table_state(view) for t, view in feed.history.tables.items()},
        "window": {
            "shoe_seq": [[t, s, n] for (t, s), n in window._shoe_seq.items()],
            "shoes_of": dict(window._shoes_of),
            "latest_shoe": window._latest_shoe,
            "dealing_shoe": window._dealing_shoe,
            "last_draw": feed.last_draw,
            "progress": window.progress,
            "books_seen": window.books_seen,
            "unverified": window.unverified,
            "now": window.now,
            "done": [done_state(done) for done in window.done.values()],
        },
        "checked": dict(ctx.checked),
        "totals": totals_state(ctx.totals),
    }


def resume(run: StreamAudit, state: dict[str, Any]) -> list[Finding]:
    """Bring a checkpoint into ``run`` (before it runs); the errors that forbid it (a seal
    the checkpoint starts from that changed), if any: then nothing was brought in."""
    marks: dict[str, dict[str, Any]] = state["stores"]
    errors = [
        finding
        for service, mark in marks.items()
        if service in run.readers
        and (finding := verify_seal(service, run.stores[service], mark)) is not None
    ]
    if errors:
        return errors
    window, feed = run.window, run.feed
    ctx, history = window.ctx, feed.history
    for service, mark in marks.items():
        reader = run.readers.get(service)
        if reader is None:
            continue
        summary = reader.verifier.summary
        summary.head_to_id, summary.head_digest = int(mark["to_id"]), str(mark["digest"])
        reader.verifier.resume(int(mark["version"]))
        reader.versions.update({bytes.fromhex(k): v for k, v in mark["versions"].items()})
        reader.hashed_only = reader.position = int(mark["nid"])
        run.after[service] = int(mark["to_id"])
    history.tables.update({t: table_from(t, data) for t, data in state["tables"].items()})
    saved = state["window"]
    window._shoe_seq.update({(t, s): n for t, s, n in saved["shoe_seq"]})
    window._shoes_of.update(saved["shoes_of"])
    window._latest_shoe.update(saved["latest_shoe"])
    window._dealing_shoe.update(saved["dealing_shoe"])
    feed.last_draw.update(saved["last_draw"])
    window.progress.update(saved["progress"])
    window.books_seen, window.unverified = saved["books_seen"], saved["unverified"]
    window.now = saved["now"]
    for data in saved["done"]:
        done = done_from(data)
        key = (done.table_id, done.coup_id)
        window.done[key] = done
        for oid in (done.coup_oid, done.book_oid):
            if oid is not None:
                window.done_oids[oid] = key
    ctx.checked.update(state["checked"])
    ctx.totals = totals_from(state["totals"])
    for service, _name in _OPEN:  # shoes, then coups (books read their coup's close)
        reader = run.readers.get(service)
        if reader is None:
            continue
        before = int(marks[service]["nid"]) + 1
        for oid in state["open"][service]:
            reader.project(list(run.stores[service].rows_of(bytes.fromhex(oid), before)))
    return []
