"""Files only their owner may read: a 0700 folder, 0600 files, written atomically.

A secret (a password, a private key) is written to a temporary file created with mode 0600
and renamed into place, so it is never readable by others, not even for a moment; reading
one refuses a file that group or others may read (someone loosened it: say how to fix it).
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from services.dev.infra.errors import InfraError

FOLDER_MODE = 0o700
FILE_MODE = 0o600


def private_folder(folder: Path) -> Path:
    """``folder``, created if missing, with mode 0700 (also when it existed)."""
    folder.mkdir(parents=True, exist_ok=True, mode=FOLDER_MODE)
    os.chmod(folder, FOLDER_MODE)  # mkdir's mode is masked by the umask
    return folder


def write_private(path: Path, content: str | bytes) -> None:
    """Write ``content`` to ``path`` (mode 0600), replacing it atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode() if isinstance(content, str) else content
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), FILE_MODE)
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def read_private(path: Path) -> str:
    """The text of a secret file; an :class:`InfraError` if group or others may read it."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise InfraError(
            f"{path} holds a secret but has mode {mode:04o} (group or others may read it).",
            f"run `chmod 600 {path}`, and replace the secret if someone else may have read it",
        )
    return path.read_text()
