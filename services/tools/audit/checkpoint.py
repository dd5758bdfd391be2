"""Audit checkpoints: where an audit without errors stopped, so the next one reads only what is new.

A checkpointed audit stops each store at its last seal (the rows after it cannot be proven
unchanged yet) and checks what is complete by then; the checkpoint (a JSON file the auditor
names) records, per store, that seal (its ledger version, notification id, ``to_id`` and
digest), the last version of each aggregate still alive, and the open state carried over:
the ids of the open shoes, coups and bet books (read again from the store on resume, so no
view is serialised), the tables' terms, the running totals and counts, and the small
``Done`` of recently checked coups (a late void may still bring one back).

On resume (:func:`resume`) each store's seal at the checkpoint is read again and must still
be the recorded one, notification id and digest: earlier history was not rewritten under
it (a store whose seal changed is an error, and nothing after it is trusted). Reading then
starts after the seal's ``to_id`` (rows up to the checkpoint are hashed for the next seal,
not checked again). What the checkpoint trusts is the auditor's own file: keep it where
only the auditor writes; its digests are those each service anchored on Kafka
(``audit --anchors`` compares a store's seals with them), so a checkpoint can be checked
against the anchors too.
"""

from __future__ import annotations

import json
from dataclasses import astuple
from fractions import Fraction
from pathlib import Path
from typing import Any

from services.shared.platform.store import LEDGER_ID
from services.tools.audit.findings import Code, Finding, Severity
from services.tools.audit.stores import StoreReader
from services.tools.audit.totals import Tally, Totals
from services.tools.audit.window_checks import Done
from services.tools.history.from_store import read_json
from services.tools.history.views import TableSettings, TableView

FORMAT = "pb-audit-checkpoint-v1"


class CheckpointError(ValueError):
    """The checkpoint file cannot be read (the message says why)."""


def last_seal(store: StoreReader) -> dict[str, Any] | None:
    """The store's last seal: ``{"version", "nid", "to_id", "digest"}`` (None: never sealed)."""
    row = store.row_at(LEDGER_ID.bytes, None)
    if row is None or row.originator_version < 2:  # version 1: the ledger's start
        return None
    return _seal(row.notification_id, row.originator_version, row.state)


def _seal(nid: int, version: int, state: bytes) -> dict[str, Any]:
    sealed = read_json(state)
    return {
        "version": version,
        "nid": nid,
        "to_id": int(sealed["to_id"]),
        "digest": sealed["digest"],
    }


def verify_seal(service: str, store: StoreReader, mark: dict[str, Any]) -> Finding | None:
    """The seal a checkpoint starts from, still as recorded? (None: yes.)"""
    row = store.row_at(LEDGER_ID.bytes, int(mark["version"]))
    found = None if row is None else _seal(row.notification_id, row.originator_version, row.state)
    if found == {k: mark[k] for k in ("version", "nid", "to_id", "digest")}:
        return None
    return Finding(
        Severity.ERROR,
        Code.SEAL_CHAIN_BROKEN,
        f"seal {int(mark['version']) - 1} the checkpoint starts from (notifications up to "
        f"{mark['to_id']}, digest {str(mark['digest'])[:16]}...) is "
        + ("gone" if found is None else f"now {found}")
        + ": history before the checkpoint was rewritten; audit the store whole (without "
        "--checkpoint)",
        store=service,
        notification_id=mark["nid"],
    )


# -- totals and the window's small records as JSON ------------------------------------------
def _tally(tally: Tally) -> list[Any]:
    return [*astuple(tally)[:6], str(tally.expected)]


def _untally(data: list[Any]) -> Tally:
    coups, voided, bets, staked, paid, refunded = (int(value) for value in data[:6])
    return Tally(coups, voided, bets, staked, paid, refunded, Fraction(data[6]))


def totals_state(totals: Totals) -> dict[str, Any]:
    return {
        "detail": totals.detail,
        "overall": _tally(totals.overall),
        **{
            level: {key: _tally(t) for key, t in getattr(totals, level).items()}
            for level in ("coups", "shoes", "tables", "days")
        },
    }


def totals_from(data: dict[str, Any]) -> Totals:
    totals = Totals(overall=_untally(data["overall"]), detail=bool(data["detail"]))
    for level in ("coups", "shoes", "tables", "days"):
        getattr(totals, level).update({key: _untally(t) for key, t in data[level].items()})
    return totals


def done_state(done: Done) -> list[Any]:
    fields = [getattr(done, name) for name in Done.__slots__ if name != "tally"]
    tally = None if done.tally is None else _tally(done.tally)
    return [value.hex() if isinstance(value, bytes) else value for value in fields] + [tally]


def done_from(data: list[Any]) -> Done:
    table_id, coup_id, shoe_id, opened_at, coup_oid, book_oid, shoe_oid = data[:7]
    coup_nid, book_nid, counted, tally = data[7:]
    return Done(
        table_id,
        coup_id,
        shoe_id,
        opened_at,
        _oid(coup_oid),
        _oid(book_oid),
        _oid(shoe_oid),
        coup_nid,
        book_nid,
        (int(counted[0]), int(counted[1]), int(counted[2]), int(counted[3])),
        None if tally is None else _untally(tally),
    )


def _oid(value: str | None) -> bytes | None:
    return None if value is None else bytes.fromhex(value)


def table_state(table: TableView) -> list[Any]:
    return [list(table.settings), table.opened_at, table.closed_at, table.close_reason]


def table_from(table_id: str, data: list[Any]) -> TableView:
    settings, opened_at, closed_at, reason = data
    return TableView(table_id, TableSettings(*settings), opened_at, [], closed_at, reason)


# -- the file -------------------------------------------------------------------------------
def write(path: Path, state: dict[str, Any]) -> None:
    """Write the checkpoint (a new file, then renamed over the old: never half written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps({"format": FORMAT, **state}, separators=(",", ":")))
    part.replace(path)


def read(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise CheckpointError(f"cannot read the checkpoint {path}: {error}") from None
    if data.get("format") != FORMAT:
        raise CheckpointError(
            f"{path} is not an audit checkpoint of this version ({FORMAT}): give another file, "
            "or audit without --checkpoint"
        )
    return data
