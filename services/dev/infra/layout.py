"""Where the local infrastructure keeps its files.

- data: ``PB_DATA_DIR`` (default ``./var``, git-ignored): ``kafka/`` and ``postgres/``.
- cache: ``PB_CACHE_DIR`` (default ``$XDG_CACHE_HOME/punto-banco`` or
  ``~/.cache/punto-banco``): the Kafka jars, shared by every clone on the machine,
  so a second run or a fresh CI checkout does not download them again.
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[3]


def data_dir() -> Path:
    return Path(os.environ.get("PB_DATA_DIR") or "var").resolve()


def cache_dir() -> Path:
    explicit = os.environ.get("PB_CACHE_DIR")
    if explicit:
        return Path(explicit).resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return (base / "punto-banco").resolve()


def env_port(name: str) -> int | None:
    """A port asked for through the environment (unset, empty or 0: none)."""
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    try:
        return int(value) or None
    except ValueError:
        from services.dev.infra.errors import InfraError

        raise InfraError(
            f"{name}={value!r} is not a port number.", f"set {name} to 1..65535"
        ) from None
