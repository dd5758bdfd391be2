"""Finding PostgreSQL's server programs, installing Debian's package when they are missing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from services.dev.infra.errors import InfraError
from services.dev.infra.processes import progress

_INSTALL_FIX = (
    "install the server (Debian: apt-get install -y postgresql), or set PB_POSTGRES_BIN to the "
    "folder holding initdb and pg_ctl"
)


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", path.parent.parent.name))


def find_bin_dir(install: bool = True) -> Path:
    """The folder with initdb/pg_ctl/postgres: ``PB_POSTGRES_BIN``, the newest
    /usr/lib/postgresql/*/bin, or PATH; installs Debian's package when missing (root only)."""
    explicit = os.environ.get("PB_POSTGRES_BIN")
    if explicit:
        if not (Path(explicit) / "pg_ctl").is_file():
            raise InfraError(f"PB_POSTGRES_BIN={explicit} has no pg_ctl.", _INSTALL_FIX)
        return Path(explicit)
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=_version_key)
    if found:
        return found[-1].parent
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).resolve().parent
    if install and os.geteuid() == 0 and shutil.which("apt-get"):
        _apt_install_postgresql()
        return find_bin_dir(install=False)
    raise InfraError("PostgreSQL server programs (initdb, pg_ctl) were not found.", _INSTALL_FIX)


def _apt_install_postgresql() -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "postgresql"]
    progress("PostgreSQL is missing: apt-get install -y postgresql ...")
    if subprocess.run(command, env=env, capture_output=True, check=False).returncode == 0:
        return
    progress("apt-get update ...")
    subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, check=False)
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise InfraError(f"apt-get install postgresql failed: {result.stderr[-600:]}", _INSTALL_FIX)
