"""The programs the servers need: Java 17+, Kafka's jars (fetched once by Maven), PostgreSQL.

``deploy/kafka/pom.xml`` copies the runtime classpath of ``kafka_2.13`` plus a log4j2 binding
into ``<cache>/kafka-<version>/libs`` once (Maven's ``~/.m2`` is reused as well); a ``.complete``
marker makes an interrupted download start again. PostgreSQL's server programs are Debian's
(installed with apt-get when missing and we are root).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from services.dev.infra.common import PROJECT_ROOT, InfraError, cache_dir
from services.dev.infra.processes import locked, progress

MIN_JAVA = 17
_JAVA_FIX = (
    f"install Java {MIN_JAVA} or newer "
    f"(Debian: apt-get install -y openjdk-{MIN_JAVA}-jre-headless) "
    "and put it on PATH, or set JAVA_HOME to its folder"
)


def checked_java(java: str | None = None) -> str:
    """A java executable of version 17 or newer (``java``, else ``$JAVA_HOME/bin/java``, else
    PATH's), or an :class:`InfraError` saying what to do."""
    home = os.environ.get("JAVA_HOME")
    if not java and home:
        java = str(Path(home) / "bin" / "java")
        if not Path(java).is_file():
            raise InfraError(f"JAVA_HOME is {home}, but there is no {java}.", _JAVA_FIX)
    java = java or shutil.which("java")
    if not java:
        raise InfraError("Java was not found (no `java` on PATH, JAVA_HOME unset).", _JAVA_FIX)
    try:
        result = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as error:
        raise InfraError(f"Java could not be run ({java}: {error.strerror}).", _JAVA_FIX) from None
    output = result.stderr + result.stdout
    match = re.search(r'version "(\d+)(?:\.(\d+))?', output)  # "1.8.0_392": 8, "17.0.15": 17
    if result.returncode != 0 or not match:
        raise InfraError(
            f"`{java} -version` did not report a version: {output.strip()[:200]}", _JAVA_FIX
        )
    major = int(match.group(2) if match.group(1) == "1" and match.group(2) else match.group(1))
    if major < MIN_JAVA:
        raise InfraError(
            f"Java {major} found ({java}), but the Kafka broker needs Java {MIN_JAVA} or newer.",
            _JAVA_FIX,
        )
    return java


def find_maven(mvn: str | None = None) -> str:
    """The mvn executable, or an :class:`InfraError` saying how to install Maven."""
    found = shutil.which(mvn or "mvn")
    if not found:
        raise InfraError(
            "Maven (`mvn`) was not found; it is needed once, to download the Kafka jars "
            "from Maven Central into the cache.",
            "install it (Debian: apt-get install -y maven) or put `mvn` on PATH; "
            "afterwards the cached jars are reused without Maven",
        )
    return found


KAFKA_VERSION = "4.3.1"  # keep in step with deploy/kafka/pom.xml and deploy/compose.yaml
POM = PROJECT_ROOT / "deploy" / "kafka" / "pom.xml"


def ensure_jars(
    version: str = KAFKA_VERSION, cache: Path | None = None, mvn: str | None = None
) -> Path:
    """The folder with the broker's jars, downloading them with Maven when not cached."""
    libs = (cache or cache_dir()) / f"kafka-{version}" / "libs"
    if (libs / ".complete").is_file():
        return libs
    maven = find_maven(mvn)
    with locked(libs.parent / ".lock"):
        if (libs / ".complete").is_file():
            return libs
        progress(f"downloading Kafka {version} jars from Maven Central into {libs} (once) ...")
        staging = libs.parent / "libs.partial"
        shutil.rmtree(staging, ignore_errors=True)
        command = [
            maven,
            "-B",
            "-q",
            "-f",
            str(POM),
            f"-Dkafka.version={version}",
            f"-Dkafka.libs.dir={staging}",
            "dependency:copy-dependencies",
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip().splitlines()[-15:]
            raise InfraError(
                "Maven could not fetch the Kafka jars:\n    " + "\n    ".join(output),
                "check that Maven Central is reachable (a proxy in ~/.m2/settings.xml?) and retry",
            )
        (staging / ".complete").write_text(f"kafka {version}\n")
        shutil.rmtree(libs, ignore_errors=True)
        staging.rename(libs)
    return libs


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
