"""The Kafka broker's jars, from Maven Central into a cache shared by every clone.

``deploy/kafka/pom.xml`` copies the runtime classpath of ``kafka_2.13`` plus a log4j2
binding into ``<cache>/kafka-<version>/libs`` once (Maven's ``~/.m2`` is reused as
well); a ``.complete`` marker makes an interrupted download start again.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from services.dev.infra import layout
from services.dev.infra.errors import InfraError
from services.dev.infra.processes import locked, progress
from services.dev.infra.tools import find_maven

KAFKA_VERSION = "4.3.1"  # keep in step with deploy/kafka/pom.xml and deploy/compose.yaml
POM = layout.PROJECT_ROOT / "deploy" / "kafka" / "pom.xml"


def libs_dir(version: str = KAFKA_VERSION, cache: Path | None = None) -> Path:
    return (cache or layout.cache_dir()) / f"kafka-{version}" / "libs"


def ensure_jars(
    version: str = KAFKA_VERSION, cache: Path | None = None, mvn: str | None = None
) -> Path:
    """The folder with the broker's jars, downloading them with Maven when not cached."""
    libs = libs_dir(version, cache)
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
