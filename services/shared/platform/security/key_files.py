"""Writing key files: owner-only from the first byte, replaced atomically.

Used by ``keys.py`` (the signing keys and the keyring) and ``secret_keys.py`` (the shoe's
secret keys). A folder made here is mode 0700; a private file is mode 0600 from its creation
(never readable by others, whatever the umask, not even for a moment).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def private_folder(folder: Path) -> None:
    """Make ``folder`` (mode 0700 when it is new)."""
    if not folder.exists():
        folder.mkdir(parents=True, mode=0o700)
        os.chmod(folder, 0o700)  # mkdir's mode is masked by the umask


def create_private(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file ``path``, mode 0600; FileExistsError if it exists."""
    private_folder(path.parent)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        os.fchmod(file.fileno(), 0o600)
        file.write(data)


def replace_file(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to a new file beside ``path`` and rename it over ``path`` (atomic)."""
    private_folder(path.parent)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as file:
            os.fchmod(file.fileno(), mode)
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
