"""The tests' supervisor: a key that signs voids, and the keyring dealing verifies them with.

A void is a supervisor's signed decision (``platform/security/decisions.py``): a test
that voids a coup signs its ``VoidCoup`` with :func:`supervisor` (``supervisor().void(table,
coup, reason)``) and gives dealing :func:`keyring` (``DealingApplication(supervisors=...)``) or
:func:`supervisor_env` (``PB_SUPERVISOR_KEYRING`` for a dealing process). One folder per test
session, removed when it ends.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from functools import cache
from pathlib import Path

from services.shared.platform.security import (
    SupervisorKeyring,
)
from services.tools.admin.supervisors import (
    SupervisorSigner,
    ensure_supervisor_key,
)

SUPERVISOR = "sup-7"
"""The tests' supervisor id (what ``CoupVoided.supervisor_id`` says of their voids)."""


@cache
def _folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="pb-test-supervisors-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def keyring_path() -> Path:
    """This session's supervisors keyring file (the tests' supervisor is in it)."""
    supervisor()
    return _folder() / "supervisors.json"


@cache
def supervisor(supervisor_id: str = SUPERVISOR) -> SupervisorSigner:
    """A supervisor of this session's keyring (made on first use)."""
    folder = _folder()
    private, key = ensure_supervisor_key(
        folder / "supervisors.json", folder / f"{supervisor_id}.pem", supervisor_id
    )
    return SupervisorSigner(key.kid, key.supervisor, private)


def keyring() -> SupervisorKeyring:
    """The session's supervisors keyring, as dealing loads it."""
    return SupervisorKeyring.load(keyring_path())


def supervisor_env() -> dict[str, str]:
    """``PB_SUPERVISOR_KEYRING`` of this session (for a dealing Application or process)."""
    return {"PB_SUPERVISOR_KEYRING": str(keyring_path())}
