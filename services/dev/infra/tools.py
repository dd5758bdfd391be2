"""Finding the external programs the local infrastructure needs: Java 17+ and Maven."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from services.dev.infra.errors import InfraError

MIN_JAVA = 17
_JAVA_FIX = (
    f"install Java {MIN_JAVA} or newer "
    f"(Debian: apt-get install -y openjdk-{MIN_JAVA}-jre-headless) "
    "and put it on PATH, or set JAVA_HOME to its folder"
)


def find_java(java: str | None = None) -> str:
    """The java executable: ``java`` if given, else ``$JAVA_HOME/bin/java``, else PATH."""
    if java:
        return java
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if not candidate.is_file():
            raise InfraError(f"JAVA_HOME is {home}, but there is no {candidate}.", _JAVA_FIX)
        return str(candidate)
    found = shutil.which("java")
    if not found:
        raise InfraError("Java was not found (no `java` on PATH, JAVA_HOME unset).", _JAVA_FIX)
    return found


def java_major_version(java: str) -> int:
    """The major version `java -version` reports (8 for "1.8.0_392", 17 for "17.0.15")."""
    try:
        result = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as error:
        raise InfraError(f"Java could not be run ({java}: {error.strerror}).", _JAVA_FIX) from None
    output = result.stderr + result.stdout
    match = re.search(r'version "(\d+)(?:\.(\d+))?', output)
    if result.returncode != 0 or not match:
        raise InfraError(
            f"`{java} -version` did not report a version: {output.strip()[:200]}", _JAVA_FIX
        )
    major = int(match.group(1))
    if major == 1 and match.group(2):
        major = int(match.group(2))
    return major


def checked_java(java: str | None = None) -> str:
    """A java executable of version 17 or newer, or an :class:`InfraError` saying what to do."""
    executable = find_java(java)
    major = java_major_version(executable)
    if major < MIN_JAVA:
        raise InfraError(
            f"Java {major} found ({executable}), "
            f"but the Kafka broker needs Java {MIN_JAVA} or newer.",
            _JAVA_FIX,
        )
    return executable


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
