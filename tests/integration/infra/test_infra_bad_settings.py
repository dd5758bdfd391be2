"""Bad settings give a message saying what is wrong and what to do, never a stack trace."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.dev.infra.common import InfraError
from services.dev.infra.kafka import KafkaBroker
from services.dev.infra.ports import LOOPBACK, free_port
from services.dev.infra.programs import checked_java, ensure_jars

PUNTO_BANCO = [sys.executable, "-m", "services.tools.cli.main"]


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind((LOOPBACK, 0))
        listener.listen()
        yield listener.getsockname()[1]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PUNTO_BANCO, "infra", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )


def _assert_readable_failure(result: subprocess.CompletedProcess[str], *phrases: str) -> None:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "what to do:" in result.stderr
    for phrase in phrases:
        assert phrase in result.stderr
    assert result.stdout == ""


def _fake_java(folder: Path, version: str) -> Path:
    java = folder / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2023-01-17' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    return java


def test_kafka_port_in_use_is_named_with_the_option_to_change_it(
    tmp_path: Path, busy_port: int
) -> None:
    result = _cli(
        "up", "--only", "kafka", "--data-dir", str(tmp_path), "--kafka-port", str(busy_port)
    )
    _assert_readable_failure(result, f"port {busy_port}", "already in use", "--kafka-port")


@pytest.mark.postgres
def test_postgres_port_in_use_is_named_with_the_option_to_change_it(
    tmp_path: Path, busy_port: int
) -> None:
    result = _cli(
        "up", "--only", "postgres", "--data-dir", str(tmp_path), "--postgres-port", str(busy_port)
    )
    _assert_readable_failure(result, f"port {busy_port}", "--postgres-port")


def test_java_missing_says_how_to_install_it(tmp_path: Path) -> None:
    result = _cli(
        "up", "--only", "kafka", "--data-dir", str(tmp_path), env={"JAVA_HOME": str(tmp_path)}
    )
    _assert_readable_failure(result, "JAVA_HOME", "Java 17")


def test_java_too_old_is_refused(tmp_path: Path) -> None:
    java = _fake_java(tmp_path, "11.0.20")
    with pytest.raises(InfraError) as caught:
        KafkaBroker(home=tmp_path / "kafka", java=str(java)).start()
    assert "Java 11 found" in caught.value.problem
    assert "17" in caught.value.fix
    result = _cli(
        "up",
        "--only",
        "kafka",
        "--data-dir",
        str(tmp_path),
        env={"JAVA_HOME": str(tmp_path.parent)},
    )
    assert "Traceback" not in result.stderr


def test_java_too_old_from_java_home_via_cli(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    _fake_java(tmp_path / "bin", "1.8.0_392")
    result = _cli(
        "up",
        "--only",
        "kafka",
        "--data-dir",
        str(tmp_path / "var"),
        env={"JAVA_HOME": str(tmp_path)},
    )
    _assert_readable_failure(result, "Java 8 found", "Java 17")


def test_no_maven_and_no_cached_jars_says_how_to_get_maven(tmp_path: Path) -> None:
    with pytest.raises(InfraError) as caught:
        ensure_jars(cache=tmp_path / "cache", mvn="no-such-mvn-here")
    assert "Maven" in caught.value.problem
    assert "apt-get install -y maven" in caught.value.fix

    try:
        real_java = checked_java()
    except InfraError:
        pytest.skip("no Java here: the CLI would stop at the Java check first")
    only_java = tmp_path / "bin"
    only_java.mkdir()
    (only_java / "java").symlink_to(real_java)
    result = _cli(
        "up",
        "--only",
        "kafka",
        "--data-dir",
        str(tmp_path / "var"),
        env={
            "PATH": str(only_java),
            "PB_CACHE_DIR": str(tmp_path / "cache"),
            "JAVA_HOME": "",
        },
    )
    _assert_readable_failure(result, "Maven", "apt-get install -y maven")


def test_missing_postgres_programs_say_how_to_install_them(tmp_path: Path) -> None:
    result = _cli(
        "up",
        "--only",
        "postgres",
        "--data-dir",
        str(tmp_path),
        "--postgres-port",
        str(free_port()),
        env={"PB_POSTGRES_BIN": str(tmp_path / "nowhere")},
    )
    _assert_readable_failure(result, "PB_POSTGRES_BIN", "apt-get install -y postgresql")


def test_status_of_nothing_running_exits_3_without_settings(tmp_path: Path) -> None:
    result = _cli("status", "--data-dir", str(tmp_path))
    assert result.returncode == 3
    assert "kafka: down" in result.stderr and "postgres: down" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("command", "env", "phrase"),
    [
        (["serve", "shoe"], {"PB_HTTP_HOST": "http://0.0.0.0"}, "PB_HTTP_HOST must be an IP"),
        (["serve", "shoe"], {"PB_HTTP_ALLOWED_HOSTS": "shoe:8101"}, "without port"),
        (["serve", "shoe"], {"POSTGRES_PORT": "five"}, "POSTGRES_PORT must be a whole number"),
        (
            ["serve", "shoe"],
            {"PB_SHOE_SECRET_KEY": "k1:AAAA", "PB_SHOE_SECRET_KEY_FILE": "/run/keys/secret.json"},
            "PB_SHOE_SECRET_KEY and PB_SHOE_SECRET_KEY_FILE are both set",
        ),
        (["dashboard", "--host", "http://x"], {}, "PB_HTTP_HOST must be an IP"),
        (["dashboard"], {"PB_HTTP_ALLOWED_HOSTS": "*bad"}, "PB_HTTP_ALLOWED_HOSTS"),
    ],
)
def test_bad_http_and_store_settings_name_the_variable(
    tmp_path: Path, command: list[str], env: dict[str, str], phrase: str
) -> None:
    result = subprocess.run(
        [*PUNTO_BANCO, *command],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PB_DATA_DIR": str(tmp_path), **env},
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert phrase in result.stderr
