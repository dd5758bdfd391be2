"""The three services as child processes: `punto-banco serve shoe|dealing|settlement`.

Each child gets the same settings through its environment (:func:`service_env`), its own
Kafka principal's login, the run's
signing keys and the shoe's secret key (:func:`prepare_keys`: ``<data dir>/keys/``, made when
missing), its output in
a log file, its own session (so a Ctrl-C reaches only us and we stop the children in order) and,
on Linux, a parent-death signal so that even if we are killed the children do not outlive us.
Stopping is SIGTERM, a bounded wait, then SIGKILL: no child is left behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from services.dev.infra.kafka_clients import KafkaLogins

if TYPE_CHECKING:
    from services.tools.admin.supervisors import (
        SupervisorSigner,
    )

SERVICES: tuple[str, ...] = ("shoe", "dealing", "settlement")
PROJECT_ROOT = Path(__file__).resolve().parents[3]
_PR_SET_PDEATHSIG = 1
SUPERVISOR_KEYRING = "PB_SUPERVISOR_KEYRING"
LOCAL_SUPERVISOR = "supervisor-1"
"""The supervisor of a local run (``punto-banco up``, the end-to-end tests)."""
KEY_VARIABLES = ("PB_SIGNING_KEY", "PB_KEYRING", "PB_SHOE_SECRET_KEY_FILE", "PB_SHOE_SECRET_KEY")


@dataclass(frozen=True, slots=True)
class ServiceSettings:
    """The settings every service of one run shares (see services/shared/platform/settings.py)."""

    bootstrap: str
    data_dir: Path
    topic_prefix: str = ""
    postgres: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, str] = field(default_factory=dict)
    logins: KafkaLogins = field(default_factory=KafkaLogins)
    """How each process logs in to Kafka: every service as its own principal."""


def service_env(
    settings: ServiceSettings, base: Mapping[str, str] | None = None, service: str | None = None
) -> dict[str, str]:
    """The environment of a service process: ``base`` (default ours) plus the run's settings,
    and with ``service`` its principal's Kafka login (``KAFKA_SECURITY_PROTOCOL``,
    ``KAFKA_SASL_*``: all of them, so none of ours leaks in).

    SQLite unless ``settings.postgres`` holds ``POSTGRES_*`` variables. Inherited PostgreSQL,
    persistence or key variables are dropped so that a run uses exactly what it was given (its
    keys: ``<data dir>/keys/`` unless ``settings.extra`` names ``PB_SIGNING_KEY`` / ``PB_KEYRING``
    / ``PB_SHOE_SECRET_KEY_FILE`` / ``PB_SHOE_SECRET_KEY``).
    """
    dropped = (
        "POSTGRES_",
        "PB_POSTGRES",
        "PB_PERSISTENCE",
        "PB_TOPIC_PREFIX",
        SUPERVISOR_KEYRING,
        *KEY_VARIABLES,
    )
    env = {
        key: value
        for key, value in (os.environ if base is None else base).items()
        if not key.startswith(dropped)
    }
    env.update(
        {
            "KAFKA_BOOTSTRAP_SERVERS": settings.bootstrap,
            "PB_DATA_DIR": str(settings.data_dir.resolve()),
            "PB_TOPIC_PREFIX": settings.topic_prefix,
            "PB_PERSISTENCE": "postgres" if settings.postgres else "sqlite",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(settings.postgres)
    env.update(settings.extra)
    if service is not None:
        env.update(settings.logins.env(service))
    return env


def prepare_keys(settings: ServiceSettings, services: Iterable[str] = SERVICES) -> list[str]:
    """The run's signing keys, keyring and the shoe's secret key in ``<data dir>/keys/``, made
    when missing (what was done); nothing when ``settings.extra`` names its own keys. The run's
    supervisor too (:func:`run_supervisor`) unless ``settings.extra`` names
    ``PB_SUPERVISOR_KEYRING``."""
    done: list[str] = []
    if not any(name in settings.extra for name in KEY_VARIABLES):
        from services.tools.admin.keys import (
            init_run_keys,
        )

        done = init_run_keys(settings.data_dir.resolve(), tuple(services))
    if SUPERVISOR_KEYRING not in settings.extra:
        signer = run_supervisor(settings)
        done.append(f"supervisor {signer.supervisor_id}: key {signer.kid}")
    return done


def run_supervisor(settings: ServiceSettings) -> SupervisorSigner:
    """The run's supervisor, made when missing: its key ``<data dir>/keys/supervisors/
    supervisor-1.pem`` in the keyring dealing reads (``<data dir>/keys/supervisors.json``);
    ``punto-banco supervisor void --key`` that file to void a coup of the run."""
    from services.tools.admin.supervisors import (
        SupervisorSigner,
        ensure_supervisor_key,
    )

    keys = settings.data_dir.resolve() / "keys"
    private, key = ensure_supervisor_key(
        keys / "supervisors.json",
        keys / "supervisors" / f"{LOCAL_SUPERVISOR}.pem",
        LOCAL_SUPERVISOR,
    )
    return SupervisorSigner(key.kid, key.supervisor, private)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class ServiceFailed(RuntimeError):
    """A service did not start, or died; the message quotes the end of its log."""


@dataclass
class ServiceProcess:
    """One `punto-banco serve <name>` child."""

    name: str
    env: Mapping[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def command(self) -> list[str]:
        return [sys.executable, "-m", "services.tools.cli.main", "serve", self.name]

    def start(self) -> None:
        """Start the child (again, after a kill); output appended to ``log_path``."""
        if self.running():
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        with open(self.log_path, "ab") as log, open(os.devnull, "rb") as devnull:
            log.write(f"\n----- start #{self.starts} of {self.name} -----\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                self.command(),
                stdin=devnull,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=PROJECT_ROOT,
                env=dict(self.env),
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def exit_code(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join("    " + line for line in text.splitlines()[-lines:])

    def log_text_since_start(self) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        marker = f"----- start #{self.starts} of {self.name} -----"
        return text.rsplit(marker, 1)[-1]

    def signal(self, signum: int) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL now (a crash, for the tests) and reap it."""
        self.signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(timeout=10)

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the child to end; True if it ended."""
        if self.process is None:
            return True
        try:
            self.process.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            return False
        return True


def stop_all(processes: Iterable[ServiceProcess], timeout: float = 15.0) -> list[str]:
    """SIGTERM every running child, wait together up to ``timeout`` s, SIGKILL the rest.

    Returns the names of those that had to be killed. Safe to call twice.
    """
    children = [p for p in processes if p.running()]
    for child in children:
        child.signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    killed: list[str] = []
    for child in children:
        if not child.wait(deadline - time.monotonic()):
            killed.append(child.name)
            child.kill()
    return killed


def wait_for(
    check: Callable[[], bool],
    *,
    timeout: float,
    interval: float = 0.1,
    watch: Iterable[ServiceProcess] = (),
) -> bool:
    """Poll ``check`` until true or ``timeout``; raise ServiceFailed if a watched child dies."""
    watched = list(watch)
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        for child in watched:
            if not child.running():
                raise ServiceFailed(
                    f"service {child.name} exited with code {child.exit_code()}; "
                    f"end of {child.log_path}:\n{child.log_tail()}"
                )
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
