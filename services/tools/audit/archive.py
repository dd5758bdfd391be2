"""Daily archives of a store: sealed, verifiable files the audit reads like the store.

An archive holds one store's rows of one day, cut on its seals so the seal chain runs on
from one file to the next and into the hot store: the rows after the last seal recorded
before that day (UTC) up to the last seal recorded that day, seal rows included, as they
are stored. ``<store>-<day>.jsonl.gz``: a header line (``pb-archive-v1``: store, day, the
notification ids ``after`` and ``to_id`` it spans, the digest of its last seal), then one
JSON line per row (state as stored, text). Beside it ``<file>.sha256`` (``sha256sum``'s
format) is the file's own digest, checked before it is read. The store is named as in the
reports: the service (``shoe``), or ``<service>-p<N>`` for partition N's store
(``PB_PARTITIONED``), so the partitions' archives share a folder without colliding, and a
store reads only the files of its name whose header names it too (partition 0's archive
never stands in for partition 1's).

:class:`ArchiveStore` reads a store's archives in order, then the hot store after the last
of them: the audit verifies the one chain across both, so a changed, missing or reordered
row in an archive is found as in the store. Removing archived rows from the hot store is
an operator's step (the events are append-only by trigger, docs/security.md): the archive
reader reads the hot store from after the archives whether the rows are still there or not.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from services.shared.platform.store import LEDGER_ID
from services.tools.audit.stores import BATCH, Row, StoreReader, scan_row_at, scan_rows_of
from services.tools.audit.stream import moment_of
from services.tools.history.from_store import read_json

FORMAT = "pb-archive-v1"


class ArchiveDamaged(ValueError):
    """An archive does not match its digest, or is not an archive (the message says which)."""


def day_span(store: StoreReader, day: str) -> tuple[int, int] | None:
    """``(after, to_id)``: the rows of ``day`` (``YYYY-MM-DD``), cut on seals; None: no seal
    was recorded that day."""
    after, to_id = 0, None
    for row in store.rows_of(LEDGER_ID.bytes, 1 << 62):
        if row.originator_version < 2:
            continue  # the ledger's start
        sealed_on = moment_of(row.state)[:10]
        if sealed_on < day:
            after = int(read_json(row.state)["to_id"])
        elif sealed_on == day:
            to_id = int(read_json(row.state)["to_id"])
    return None if to_id is None else (after, to_id)


def write_day(store: StoreReader, day: str, folder: Path, name: str | None = None) -> Path | None:
    """Write ``store``'s archive of ``day`` into ``folder``; its path (None: nothing sealed
    that day). ``name``: the store's (default its service's; ``<service>-p<N>``: a partition's)."""
    span = day_span(store, day)
    return None if span is None else write_span(store, day, *span, folder, name)


def write_span(
    store: StoreReader, day: str, after: int, to_id: int, folder: Path, name: str | None = None
) -> Path:
    """Write the rows ``after`` < id <= ``to_id`` as the archive of ``day``."""
    folder.mkdir(parents=True, exist_ok=True)
    name = name or store.service
    path = folder / f"{name}-{day}.jsonl.gz"
    header = {"format": FORMAT, "store": name, "day": day, "after": after, "to_id": to_id}
    part = path.with_name(path.name + ".part")
    with gzip.open(part, "wb") as out:
        for line in _lines(store, header, after, to_id):
            out.write(line)
    part.replace(path)
    sidecar = path.with_name(path.name + ".sha256")
    sidecar.write_text(f"{_file_digest(path)}  {path.name}\n")
    return path


def _lines(store: StoreReader, header: dict[str, Any], after: int, to_id: int) -> Iterator[bytes]:
    yield json.dumps(header).encode() + b"\n"
    for batch in store.rows(after):
        for nid, oid, version, topic, state in batch:
            if nid > to_id:
                return
            row = {"id": nid, "oid": oid.hex(), "v": version, "topic": topic}
            yield (
                json.dumps({**row, "state": state.decode("utf-8", "surrogateescape")}).encode(
                    "utf-8", "surrogateescape"
                )
                + b"\n"
            )


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


Archived = list[tuple[Path, dict[str, Any]]]
"""A store's archives, by day, each with its checked header (:func:`archived`)."""


def archived(folder: Path, name: str, listing: Iterable[Path] | None = None) -> Archived:
    """The archives of store ``name`` in ``folder`` (``<name>-<day>.jsonl.gz``), by day, each
    with its header once checked (:func:`check_file`); ArchiveDamaged names the first bad one.
    ``listing``: the folder's files, when already listed (many stores share one folder)."""
    pattern = re.compile(rf"^{re.escape(name)}-([0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}})\.jsonl\.gz$")
    paths = folder.iterdir() if listing is None else listing
    found = sorted((match[1], path) for path in paths if (match := pattern.match(path.name)))
    return [(path, check_file(path, name, day)) for day, path in found]


def check_file(path: Path, name: str | None = None, day: str | None = None) -> dict[str, Any]:
    """The archive's header, once the file matches its ``.sha256`` (and, given, the header
    names store ``name`` and ``day``: an archive renamed to another store's is refused)."""
    sidecar = path.with_name(path.name + ".sha256")
    try:
        recorded = sidecar.read_text().split()[0]
    except (OSError, IndexError):
        raise ArchiveDamaged(f"{path}: no digest beside it ({sidecar.name})") from None
    if recorded != _file_digest(path):
        raise ArchiveDamaged(f"{path} does not match its digest {sidecar.name}: it was changed")
    with gzip.open(path, "rb") as file:
        header: dict[str, Any] = json.loads(file.readline())
    if header.get("format") != FORMAT:
        raise ArchiveDamaged(f"{path} is not an archive of this version ({FORMAT})")
    for field, expected in (("store", name), ("day", day)):
        if expected is not None and header.get(field) != expected:
            raise ArchiveDamaged(
                f"{path} is the archive of {field} {header.get(field)!r}, not {expected!r} "
                "as its name says: it was renamed"
            )
    return header


class ArchiveStore:
    """A store read as its archives (in order), then the hot store after them (``name``: the
    store's, default its service's; ``<service>-p<N>`` for a partition's). ``files``: its
    archives already checked (:func:`archived`), not checked again; default: checked here."""

    def __init__(
        self,
        hot: StoreReader,
        folder: Path,
        name: str | None = None,
        files: Archived | None = None,
    ) -> None:
        self.service = hot.service
        self.hot = hot
        if files is None:
            files = archived(folder, name or hot.service) if folder.is_dir() else []
        self.files = [path for path, _header in files]
        self.headers = [header for _path, header in files]
        self.archived_to = int(self.headers[-1]["to_id"]) if self.headers else 0
        self.description = f"{len(self.files)} daily archives in {folder}, then {hot.description}"

    def count(self) -> int:
        archived = sum(int(h["to_id"]) - int(h["after"]) for h in self.headers)
        return archived + self.hot.count()

    def rows(self, after: int = 0) -> Iterator[list[Row]]:
        batch: list[Row] = []
        for path, header in zip(self.files, self.headers, strict=True):
            if header["to_id"] <= after:
                continue
            with gzip.open(path, "rb") as file:
                file.readline()
                for line in file:
                    data = json.loads(line.decode("utf-8", "surrogateescape"))
                    if data["id"] <= after:
                        continue
                    state = data["state"].encode("utf-8", "surrogateescape")
                    batch.append(
                        Row(data["id"], bytes.fromhex(data["oid"]), data["v"], data["topic"], state)
                    )
                    if len(batch) >= BATCH:
                        yield batch
                        batch = []
        if batch:
            yield batch
        yield from self.hot.rows(max(after, self.archived_to))

    def rows_of(self, originator_id: bytes, before: int) -> Iterator[Row]:
        return scan_rows_of(self, originator_id, before)

    def row_at(self, originator_id: bytes, version: int | None) -> Row | None:
        found = self.hot.row_at(originator_id, version)
        if found is not None and found.notification_id > self.archived_to:
            return found
        return scan_row_at(self, originator_id, version)

    def close(self) -> None:
        self.hot.close()
