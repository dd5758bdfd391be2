"""One writer per SQLite store: a second instance waits as a standby until the writer goes.

The lease is an exclusive flock on ``<store>.writer`` (platform/store/lease.py):
the kernel lets it go when the holder ends, however it ends (SIGKILL included).
"""

from __future__ import annotations

from pathlib import Path

from services.shared.platform.settings import Settings
from services.shared.platform.store.lease import FileLease, writer_lease


def test_each_store_kind_has_its_lease(tmp_path: Path) -> None:
    sqlite = Settings.from_env("shoe", {"PB_DATA_DIR": str(tmp_path)})
    lease = writer_lease(sqlite)
    assert isinstance(lease, FileLease)
    assert lease.path == Path(sqlite.sqlite_path).with_name(
        Path(sqlite.sqlite_path).name + ".writer"
    )
    postgres = Settings.from_env("shoe", {"PB_PERSISTENCE": "postgres"})
    assert type(writer_lease(postgres)).__name__ == "PostgresLease"
