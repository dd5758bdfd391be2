"""An :class:`~services.tools.audit.auditor.AuditReport` as text for a person, JSON, or HTML."""

from __future__ import annotations

import html
import json
from collections.abc import Iterable

from services.shared.platform.settings import store_name
from services.tools.audit.auditor import AuditReport
from services.tools.audit.findings import Finding
from services.tools.audit.totals import Tally

MAX_TEXT_FINDINGS = 200


def _money(amount: int) -> str:
    return f"{amount:,}"


def _tally_line(name: str, tally: Tally) -> str:
    t = tally.to_json()
    voided = f" ({tally.voided} voided, {_money(tally.refunded)} refunded)" if tally.voided else ""
    return (
        f"  {name}: {tally.coups} coups{voided}, {tally.bets:,} bets, staked "
        f"{_money(tally.staked)}, paid {_money(tally.paid)}, house result "
        f"{_money(tally.house_result)}, hold {t['hold'] or '-'} "
        f"(theoretical edge {t['theoretical_edge'] or '-'})"
    )


def to_text(report: AuditReport, *, verbose: bool = False) -> str:
    lines = []
    verdict = "PASSED" if report.passed else "FAILED" if report.errors else "PASSED WITH WARNINGS"
    lines.append(
        f"Audit {verdict}: {len(report.errors)} errors, {len(report.warnings)} warnings; "
        f"{report.total_events:,} stored events read in {report.seconds:.2f} s"
    )
    for name, where in report.stores.items():
        lines.append(f"  {name}: {where} ({report.events.get(name, 0):,} events)")
    filters = {k: v for k, v in report.filters.to_json().items() if v}
    if filters:
        lines.append("Filters: " + ", ".join(f"{k} {v}" for k, v in filters.items()))
    checked = report.checked
    lines.append(
        f"Checked {checked.get('shoes', 0)} shoes, {checked.get('coups', 0)} coups, "
        f"{checked.get('books', 0)} bet books, {checked.get('bets', 0):,} accepted bets"
    )
    if checked.get("shoes_secret"):
        lines.append(
            f"  {checked['shoes_secret']} shoes not revealed yet: their order is encrypted, "
            "their cards are checked against it once revealed"
        )
    if checked.get("studio_shoes"):
        reasons = [
            f"{key.split(':', 1)[1]} {count}"
            for key, count in sorted(checked.items())
            if key.startswith("studio_holds:")
        ]
        lines.append(
            f"  {checked['studio_shoes']} studio shoes: no commitment, their cards checked "
            f"against their device's {checked.get('studio_reads', 0):,} reads; "
            f"{checked.get('studio_holds', 0)} holds"
            + (f" ({', '.join(reasons)})" if reasons else "")
        )
    if checked.get("decisions"):
        lines.append(
            f"  {checked['decisions']} voids: their supervisors' signed decisions checked "
            "against the supervisors keyring"
        )
    if report.partitions is not None:
        lines.extend(_partition_lines(report))
    lines.append("Seals (tamper evidence):")
    for name, seal in report.seals.items():
        lines.append(
            f"  {name}: {seal.seals} seals cover {seal.sealed_rows:,} of {seal.rows:,} events "
            f"(up to notification {seal.head_to_id}); {seal.unsealed_rows:,} unsealed; "
            f"head digest {seal.head_digest}"
        )
    if report.anchors is not None:
        lines.extend(_anchor_lines(report))
    totals = report.totals
    lines.append("Totals (minor units):")
    lines.append(_tally_line("all", totals.overall))
    for day, tally in sorted(totals.days.items()):
        lines.append(_tally_line(f"day {day}", tally))
    for table, tally in sorted(totals.tables.items()):
        lines.append(_tally_line(f"table {table}", tally))
    for shoe, tally in totals.shoes.items():
        lines.append(_tally_line(f"shoe {shoe}", tally))
    if verbose:
        for coup, tally in totals.coups.items():
            lines.append(_tally_line(f"coup {coup}", tally))
    if report.findings:
        lines.append("Findings:")
        for finding in report.findings[:MAX_TEXT_FINDINGS]:
            lines.append(f"  {finding}")
        if len(report.findings) > MAX_TEXT_FINDINGS:
            lines.append(
                f"  ... and {len(report.findings) - MAX_TEXT_FINDINGS} more "
                "(--json or --html list them all)"
            )
    return "\n".join(lines) + "\n"


def _partition_lines(report: AuditReport) -> list[str]:
    partitions = report.partitions or {}
    lines = [f"Partitions ({len(partitions)}; the checks above and the totals below are over all):"]
    for number, part in sorted(partitions.items()):
        checked = part.checked
        lines.append(
            f"  partition {number}: stores {', '.join(part.stores) or 'none'}; "
            f"{part.events:,} events; checked {checked.get('shoes', 0)} shoes, "
            f"{checked.get('coups', 0)} coups, {checked.get('books', 0)} bet books, "
            f"{checked.get('bets', 0):,} accepted bets; {part.errors} errors, "
            f"{part.warnings} warnings"
        )
    return lines


def _anchor_lines(report: AuditReport) -> list[str]:
    lines = [f"Anchors (signed seal heads on {report.anchors_topic}):"]
    for name, anchors in (report.anchors or {}).items():
        if not anchors.head_seal:
            lines.append(f"  {name}: no anchor")
            continue
        lines.append(
            f"  {name}: anchored head seal {anchors.head_seal} (up to notification "
            f"{anchors.head_to_id}, {anchors.head_sealed_at}), digest {anchors.head_digest}; "
            f"{anchors.matched} of {anchors.anchors} anchored seals match the store; "
            f"{anchors.before_anchoring} sealed before anchoring began, "
            f"{anchors.not_anchored_yet} not anchored yet"
        )
    return lines


def to_json(report: AuditReport) -> str:
    return json.dumps(report.to_json(), indent=2, sort_keys=False) + "\n"


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.5em}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;font-size:.9em}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.error{color:#a00}.warning{color:#a60}.ok{color:#070}
code{font-size:.85em}
"""


def _rows(cells: Iterable[Iterable[object]], numeric_from: int = 1) -> str:
    out = []
    for row in cells:
        tds = []
        for index, cell in enumerate(row):
            css = ' class="n"' if index >= numeric_from and isinstance(cell, int) else ""
            text = f"{cell:,}" if isinstance(cell, int) and not isinstance(cell, bool) else cell
            tds.append(f"<td{css}>{html.escape(str(text if text is not None else '-'))}</td>")
        out.append("<tr>" + "".join(tds) + "</tr>")
    return "\n".join(out)


def _tally_table(title: str, tallies: Iterable[tuple[str, Tally]]) -> str:
    head = (
        "<tr><th>" + html.escape(title) + "</th><th>coups</th><th>voided</th><th>bets</th>"
        "<th>staked</th><th>paid</th><th>house result</th><th>refunded</th>"
        "<th>hold</th><th>theoretical edge</th></tr>"
    )
    body = _rows(
        (
            name,
            t.coups,
            t.voided,
            t.bets,
            t.staked,
            t.paid,
            t.house_result,
            t.refunded,
            t.to_json()["hold"],
            t.to_json()["theoretical_edge"],
        )
        for name, t in tallies
    )
    return f"<table>{head}\n{body}</table>"


def _store_of(finding: Finding) -> str | None:
    """The store a finding names (``<service>-p<N>`` in a partition; the partition alone when
    it names no store)."""
    if finding.partition is None:
        return finding.store
    return (
        store_name(finding.store, finding.partition) if finding.store else f"p{finding.partition}"
    )


def _partitions_html(report: AuditReport) -> str:
    head = (
        "<h2>Partitions</h2><table><tr><th>partition</th><th>stores</th><th>events</th>"
        "<th>shoes</th><th>coups</th><th>bet books</th><th>bets</th><th>errors</th>"
        "<th>warnings</th></tr>"
    )
    body = _rows(
        (
            f"partition {number}",
            ", ".join(p.stores),
            p.events,
            p.checked.get("shoes", 0),
            p.checked.get("coups", 0),
            p.checked.get("books", 0),
            p.checked.get("bets", 0),
            p.errors,
            p.warnings,
        )
        for number, p in sorted((report.partitions or {}).items())
    )
    return f"{head}\n{body}</table>"


def to_html(report: AuditReport) -> str:
    verdict, css = (
        ("PASSED", "ok")
        if report.passed
        else ("FAILED", "error")
        if report.errors
        else ("PASSED WITH WARNINGS", "warning")
    )
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        "<title>punto-banco audit</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>punto-banco audit: <span class='{css}'>{verdict}</span></h1>",
        f"<p>Generated {html.escape(report.generated_at)}; {report.total_events:,} stored "
        f"events read in {report.seconds:.2f} s; {len(report.errors)} errors, "
        f"{len(report.warnings)} warnings.</p>",
        "<h2>Stores and seals</h2><table><tr><th>store</th><th>where</th><th>events</th>"
        "<th>seals</th><th>sealed</th><th>unsealed</th><th>head digest</th></tr>",
    ]
    for name, seal in report.seals.items():
        parts.append(
            _rows(
                [
                    (
                        name,
                        report.stores.get(name, ""),
                        seal.rows,
                        seal.seals,
                        seal.sealed_rows,
                        seal.unsealed_rows,
                        seal.head_digest,
                    )
                ]
            )
        )
    parts.append("</table>")
    if report.partitions is not None:
        parts.append(_partitions_html(report))
    filters = {k: v for k, v in report.filters.to_json().items() if v}
    if filters:
        parts.append(
            "<p>Filters: " + html.escape(", ".join(f"{k} {v}" for k, v in filters.items())) + "</p>"
        )
    parts.append("<h2>Findings</h2>")
    if report.findings:
        parts.append(
            "<table><tr><th>severity</th><th>code</th><th>table</th><th>shoe</th><th>coup</th>"
            "<th>bet</th><th>store</th><th>notification</th><th>what</th></tr>"
        )
        for f in report.findings:
            parts.append(
                f"<tr class='{f.severity.value}'>"
                + "".join(
                    f"<td>{html.escape(str(v) if v is not None else '')}</td>"
                    for v in (
                        f.severity.value,
                        f.code.value,
                        f.table_id,
                        f.shoe_id,
                        f.coup_id,
                        f.bet_id,
                        _store_of(f),
                        f.notification_id,
                        f.message,
                    )
                )
                + "</tr>"
            )
        parts.append("</table>")
    else:
        parts.append("<p class='ok'>None: every check passed.</p>")
    totals = report.totals
    parts.append("<h2>Totals (minor units)</h2>")
    parts.append(_tally_table("overall", [("all", totals.overall)]))
    parts.append("<h2>Per day</h2>" + _tally_table("day", sorted(totals.days.items())))
    parts.append("<h2>Per table</h2>" + _tally_table("table", sorted(totals.tables.items())))
    parts.append("<h2>Per shoe</h2>" + _tally_table("shoe", totals.shoes.items()))
    parts.append("<h2>Per coup</h2>" + _tally_table("coup", totals.coups.items()))
    parts.append("</body></html>\n")
    return "\n".join(parts)
