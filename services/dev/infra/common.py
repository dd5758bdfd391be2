"""What both servers share: the error type, their folders, state files and secret files.

- data: ``PB_DATA_DIR`` (default ``./var``, git-ignored): ``kafka/`` and ``postgres/``.
- cache: ``PB_CACHE_DIR`` (default ``$XDG_CACHE_HOME/punto-banco`` or ``~/.cache/punto-banco``):
  the Kafka jars, shared by every clone on the machine.
- secrets (passwords, private keys): written to a temporary file created with mode 0600 and
  renamed into place, so never readable by others, not even for a moment; reading one refuses
  a file that group or others may read (someone loosened it: say how to fix it). A server's
  JSON state file (ports, cluster id, passwords) is one of them.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[3]

NAME = re.compile(r"^[a-z][a-z0-9._-]{0,63}$")
"""A principal's or role's name: lower case, digits, ``.``, ``_``, ``-``; at most 64 characters
(it is also a file name, and SCRAM would have to escape ``,`` and ``=``)."""


class InfraError(Exception):
    """A problem a person can fix; the CLI prints it without a stack trace.

    ``problem`` says what is wrong, ``fix`` what to do about it.
    """

    def __init__(self, problem: str, fix: str = "") -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem}\n  what to do: {fix}" if fix else problem)


@dataclass(frozen=True)
class ServiceStatus:
    """What `infra status` reports for one server."""

    name: str
    running: bool
    pid: int | None = None
    port: int | None = None
    detail: str = ""
    env: dict[str, str] = field(default_factory=dict)


def data_dir() -> Path:
    return Path(os.environ.get("PB_DATA_DIR") or "var").resolve()


def cache_dir() -> Path:
    explicit = os.environ.get("PB_CACHE_DIR")
    if explicit:
        return Path(explicit).resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return ((Path(xdg) if xdg else Path.home() / ".cache") / "punto-banco").resolve()


def env_port(name: str) -> int | None:
    """A port asked for through the environment (unset, empty or 0: none)."""
    value = os.environ.get(name, "").strip()
    try:
        return int(value or 0) or None
    except ValueError:
        raise InfraError(
            f"{name}={value!r} is not a port number.", f"set {name} to 1..65535"
        ) from None


def private_folder(folder: Path) -> Path:
    """``folder``, created if missing, with mode 0700 (also when it existed)."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)  # mkdir's mode is masked by the umask
    return folder


def write_private(path: Path, content: str | bytes) -> None:
    """Write ``content`` to ``path`` (mode 0600), replacing it atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode() if isinstance(content, str) else content
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), 0o600)
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


def load_state(path: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def save_state(path: Path, state: dict[str, Any]) -> None:
    write_private(path, json.dumps(state, indent=2, sort_keys=True))


class Credentials:
    """A server's passwords (Kafka principals, PostgreSQL roles): a 0600 file each in a 0700
    folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, name: str) -> Path:
        if not NAME.match(name):
            raise InfraError(
                f"{name!r} is not a principal name.",
                "use lower case letters, digits, '.', '_' and '-' (at most 64, a letter first)",
            )
        return self.folder / f"{name}.password"

    def read(self, name: str) -> str | None:
        path = self.path(name)
        return (read_private(path).strip() or None) if path.is_file() else None

    def ensure(self, name: str) -> str:
        """``name``'s password, made (random, 256 bits) if it has none yet."""
        found = self.read(name)
        if found:
            return found
        password = secrets.token_urlsafe(32)
        private_folder(self.folder)
        write_private(self.path(name), password + "\n")
        return password
