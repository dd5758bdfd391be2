"""A local single-node Apache Kafka broker (KRaft: broker and controller in one JVM).

The jars come from Maven Central (``programs.py``); the broker starts
from them with Java 17+ (``kafka.tools.StorageTool format``, then ``kafka.Kafka``).
Every internal topic has replication factor 1 and the transaction log a minimum
ISR of 1, so idempotent and transactional producers work on the single node.

``auth`` (``PB_KAFKA_AUTH``): ``scram`` (the default), SASL/SCRAM on loopback and over TLS,
deny-by-default ACLs (``kafka_auth.py``); ``none``, one PLAINTEXT listener on loopback. With
``scram`` the storage is formatted with the SCRAM users; a data folder formatted without
them is moved aside (``data.before-auth-<time>``) and formatted afresh. Each start then
creates the project topics (prefix "") with their configs and grants the ACL matrix
(``kafka_acls.py``) as the admin.
"""

from __future__ import annotations

import base64
import os
import shlex
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.dev.infra import common
from services.dev.infra.common import (
    Credentials,
    InfraError,
    ServiceStatus,
    load_state,
    save_state,
    write_private,
)
from services.dev.infra.kafka_admin import broker_lists_itself
from services.dev.infra.kafka_auth import (
    ADMIN,
    AUTH_NONE,
    AUTH_SCRAM,
    SCRAM_MECHANISM,
    address,
    advertised_tls_host,
    auth_from_env,
    broker_settings,
    scram_format_arguments,
    tls_host_from_env,
    tls_names,
)
from services.dev.infra.kafka_principals import BrokerPrincipals
from services.dev.infra.kafka_tls import TlsFiles, ensure_tls
from services.dev.infra.ports import LOOPBACK, choose_port, port_answers
from services.dev.infra.processes import (
    is_alive,
    locked,
    progress,
    read_from,
    run_async,
    running_pid,
    start_detached,
    stop_process,
    tail_text,
    wait_until,
)
from services.dev.infra.programs import KAFKA_VERSION, checked_java, ensure_jars
from services.shared.platform.settings import KafkaAuth

DEFAULT_PORT = 9092
PORT_OPTION = "--kafka-port (or PB_KAFKA_PORT)"
TLS_PORT_OPTION = "PB_KAFKA_TLS_PORT"

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.state.name = state.change.logger
logger.state.level = WARN
"""


class _PortTaken(Exception):
    """The broker died because a port it should listen on was taken meanwhile."""


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (as Kafka's Uuid)."""
    # StorageTool reads an id that starts with "-" as an option (about 1 start in 64): avoid it.
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def broker_answers(bootstrap: str, login: KafkaAuth | None = None) -> bool:
    """True when the broker answers a metadata request and lists itself (logged in as
    ``login`` when given). Safe to call from async code."""
    return run_async(broker_lists_itself(bootstrap, login))


@dataclass
class KafkaBroker:
    """One broker instance living in ``home`` (config, data, logs, pid and state files).

    ``port``/``controller_port``: ports asked for (must be free); otherwise the ports
    of the last start, then ``preferred_port`` (None: any free port).
    ``auth``: ``scram`` (default) or ``none`` (``kafka_auth.py``); with ``scram`` also a TLS
    listener on ``tls_host`` (port ``tls_port``, else as above from 9094).
    """

    home: Path
    port: int | None = None
    controller_port: int | None = None
    preferred_port: int | None = DEFAULT_PORT
    version: str = KAFKA_VERSION
    java: str | None = None
    mvn: str | None = None
    cache: Path | None = None
    heap: str = "1g"
    auth: str = AUTH_SCRAM
    tls_host: str = LOOPBACK
    tls_port: int | None = None

    @classmethod
    def for_project(cls, **kwargs: Any) -> KafkaBroker:
        """The project's broker, as the environment says (``PB_KAFKA_PORT``,
        ``PB_KAFKA_AUTH``, ``PB_KAFKA_TLS_HOST``, ``PB_KAFKA_TLS_PORT``)."""
        kwargs.setdefault("port", common.env_port("PB_KAFKA_PORT"))
        kwargs.setdefault("auth", auth_from_env())
        kwargs.setdefault("tls_host", tls_host_from_env())
        kwargs.setdefault("tls_port", common.env_port(TLS_PORT_OPTION))
        home = kwargs.pop("home", None) or common.data_dir() / "kafka"
        return cls(home=home, **kwargs)

    @property
    def config_file(self) -> Path:
        return self.home / "server.properties"

    @property
    def state_file(self) -> Path:
        return self.home / "state.json"

    @property
    def pid_file(self) -> Path:
        return self.home / "kafka.pid"

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def principals(self) -> BrokerPrincipals:
        """Logins, roles and grants of the principals (authentication on)."""
        return BrokerPrincipals(self.home)

    @property
    def credentials(self) -> Credentials:
        return self.principals.credentials

    @property
    def tls_files(self) -> TlsFiles:
        return self.principals.tls_files

    def pid(self) -> int | None:
        return running_pid(self.pid_file, str(self.config_file))

    def bootstrap(self) -> str | None:
        port = load_state(self.state_file).get("port")
        return f"{LOOPBACK}:{port}" if port else None

    def running_auth(self) -> str:
        """The authentication mode of the last start (that of the running broker)."""
        return str(load_state(self.state_file).get("auth", AUTH_NONE))

    def login(self, principal: str, *, tls: bool = False) -> KafkaAuth:
        """``principal``'s credentials; with ``tls`` for the TLS listener (checked by the CA)."""
        return self.principals.login(principal, tls=tls)

    def admin_login(self) -> KafkaAuth:
        return self.principals.admin_login()

    def add_principal(self, name: str, role: str | None = None) -> KafkaAuth:
        """Give ``name`` credentials and ``role``'s ACLs on the running broker (see
        :meth:`BrokerPrincipals.add`)."""
        with locked(self.home / ".lock"):
            bootstrap = self.bootstrap()
            if self.pid() is None or bootstrap is None or self.running_auth() != AUTH_SCRAM:
                raise InfraError(
                    "adding a Kafka principal needs the broker up with authentication.",
                    "run `punto-banco infra up` first (without PB_KAFKA_AUTH=none)",
                )
            return self.principals.add(bootstrap, name, role)

    def tls_bootstrap(self) -> str | None:
        state = load_state(self.state_file)
        if state.get("auth") != AUTH_SCRAM or not state.get("tls_port"):
            return None
        return address(str(state.get("tls_advertised", LOOPBACK)), int(state["tls_port"]))

    def _probe_login(self) -> KafkaAuth | None:
        return self.admin_login() if self.running_auth() == AUTH_SCRAM else None

    def client_env(self) -> dict[str, str]:
        """The shared client settings of the running broker (what `infra up` prints)."""
        bootstrap = self.bootstrap()
        if bootstrap is None:
            return {}
        env = {"KAFKA_BOOTSTRAP_SERVERS": bootstrap}
        tls_bootstrap = self.tls_bootstrap()
        if tls_bootstrap:
            env.update(
                {
                    "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                    "KAFKA_SASL_MECHANISM": SCRAM_MECHANISM,
                    "KAFKA_TLS_BOOTSTRAP_SERVERS": tls_bootstrap,
                    "KAFKA_SSL_CAFILE": str(self.tls_files.ca_cert),
                }
            )
        return env

    def status(self) -> ServiceStatus:
        pid = self.pid()
        bootstrap = self.bootstrap()
        if pid is None or bootstrap is None:
            return ServiceStatus("kafka", False, detail=f"not running (home {self.home})")
        port = int(bootstrap.rsplit(":", 1)[1])
        answers = port_answers(port) and broker_answers(bootstrap, self._probe_login())
        tls = self.tls_bootstrap()
        detail = (
            f"Kafka {self.version} pid {pid} on {bootstrap}"
            + (f" (SASL/SCRAM; TLS on {tls})" if tls else "")
            + ("" if answers else " (not answering)")
        )
        env = self.client_env() if answers else {}
        return ServiceStatus("kafka", answers, pid, port, detail, env)

    def start(self, timeout: float = 180.0) -> str:
        """Start the broker unless it already runs; wait until it answers; return bootstrap."""
        with locked(self.home / ".lock"):
            return self._start(timeout)

    def _start(self, timeout: float) -> str:
        state = load_state(self.state_file)
        pid = self.pid()
        if pid is not None:
            bootstrap = f"{LOOPBACK}:{state['port']}"
            asked = {"port": self.port, "auth": self.auth}
            if self.auth == AUTH_SCRAM:
                asked["tls_host"] = self.tls_host  # PB_KAFKA_TLS_HOST
            for key, value in asked.items():
                running = state.get(key, AUTH_NONE if key == "auth" else None)
                if value and value != running:
                    raise InfraError(
                        f"Kafka already runs on {bootstrap} (pid {pid}) with {key} {running!r}, "
                        f"not {value!r}.",
                        "run `punto-banco infra down` first, then `up` again",
                    )
            login = self._probe_login()
            if not wait_until(
                lambda: broker_answers(bootstrap, login), timeout=timeout, interval=1.0
            ):
                raise InfraError(
                    f"Kafka (pid {pid}) runs but does not answer on {bootstrap}.",
                    f"see {self.log_dir / 'server.log'}; `punto-banco infra down` then `up` again",
                )
            progress(f"Kafka already running on {bootstrap} (pid {pid})")
            if self.auth == AUTH_SCRAM:
                self.principals.secure_project(bootstrap)
            return bootstrap
        java = checked_java(self.java)
        libs = ensure_jars(self.version, self.cache, self.mvn)
        for attempt in range(3):
            port, controller_port, tls_port = self._choose_ports(state, fresh=attempt > 0)
            state = {
                **state,
                "port": port,
                "controller_port": controller_port,
                "cluster_id": state.get("cluster_id") or new_cluster_id(),
                "auth": self.auth,
            }
            if self.auth == AUTH_SCRAM:
                state["tls_port"] = tls_port
                state["tls_host"] = self.tls_host
                state["tls_advertised"] = advertised_tls_host(self.tls_host)
            state = self._prepare_storage(java, f"{libs}/*", state)
            try:
                bootstrap = self._launch(java, libs, port, timeout)
            except _PortTaken:
                if self.port or self.controller_port:
                    raise InfraError(
                        f"Kafka could not listen on port {port} or {controller_port}: "
                        "another program took it.",
                        f"stop that program, or choose another port with {PORT_OPTION}",
                    ) from None
                progress(
                    f"port {port} or {controller_port} was taken while Kafka started "
                    "(another server starting at the same time?); retrying on free ports"
                )
                continue
            if self.auth == AUTH_SCRAM:
                self.principals.secure_project(bootstrap)
            return bootstrap
        raise InfraError(
            "Kafka found no free port in 3 tries.", f"choose a port with {PORT_OPTION}"
        )

    def _prepare_storage(self, java: str, classpath: str, state: dict[str, Any]) -> dict[str, Any]:
        """Write the config; format the storage unless formatted (moving aside a data
        folder formatted without the SCRAM users when authentication is on)."""
        formatted = (self.data_dir / "meta.properties").is_file()
        if formatted and self.auth == AUTH_SCRAM and state.get("formatted_auth") != AUTH_SCRAM:
            aside = self.home / f"data.before-auth-{time.strftime('%Y%m%d-%H%M%S')}"
            self.data_dir.rename(aside)
            progress(
                f"Kafka's data in {self.data_dir} was formatted without authentication (no "
                f"SCRAM users): moved it to {aside} and formatting afresh (a new cluster; "
                "remove the old folder once you no longer need its topics)"
            )
            formatted = False
            state = {**state, "cluster_id": new_cluster_id()}
        save_state(self.state_file, state)
        passwords = self.principals.passwords() if self.auth == AUTH_SCRAM else {}
        self._write_config(state, passwords.get(ADMIN, ""))
        if not formatted:
            self._format(java, classpath, state["cluster_id"], passwords)
            state = {**state, "formatted_auth": self.auth}
            save_state(self.state_file, state)
        return state

    def _choose_ports(self, state: dict[str, Any], *, fresh: bool) -> tuple[int, int, int]:
        """The broker's, controller's and TLS listener's ports (the TLS one 0 when
        authentication is off): asked for, else those of the last start, else the defaults,
        else free ones (only free ones when ``fresh``: a retry after a port was taken)."""
        chosen: list[int] = []
        for what, key, usual, option, host in (
            ("Kafka", "port", self.preferred_port, PORT_OPTION, LOOPBACK),
            ("Kafka controller", "controller_port", 9093, "a free controller port", LOOPBACK),
            ("Kafka TLS listener", "tls_port", 9094, TLS_PORT_OPTION, self.tls_host),
        ):
            if key == "tls_port" and self.auth != AUTH_SCRAM:
                return chosen[0], chosen[1], 0
            usual = usual if self.preferred_port else None
            chosen.append(
                choose_port(
                    what=what,
                    requested=getattr(self, key),
                    preferred=() if fresh else (state.get(key), usual),
                    option=option,
                    avoid=frozenset(chosen),
                    host=host,
                )
            )
        return chosen[0], chosen[1], chosen[2]

    def _launch(self, java: str, libs: Path, port: int, timeout: float) -> str:
        bootstrap = f"{LOOPBACK}:{port}"
        progress(f"starting Kafka {self.version} on {bootstrap} (data {self.data_dir}) ...")
        command = [
            java,
            "-Xms256m",
            f"-Xmx{self.heap}",
            # Quick start-up over peak throughput (a local development broker): the C1
            # compiler only and the serial collector cut the cold start by about a third.
            # PB_KAFKA_JVM_OPTS (appended last, so it wins) can undo it for benchmarks.
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            f"-Dkafka.logs.dir={self.log_dir}",
            f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
            *shlex.split(os.environ.get("PB_KAFKA_JVM_OPTS", "")),
            "-cp",
            f"{libs}/*",
            "kafka.Kafka",
            str(self.config_file),
        ]
        logs = [self.log_dir / "stdout.log", self.log_dir / "server.log"]
        offsets = [log.stat().st_size if log.exists() else 0 for log in logs]
        pid = start_detached(command, log_file=logs[0], cwd=self.home)
        self.pid_file.write_text(f"{pid}\n")

        def new_log_text() -> list[str]:
            return [read_from(log, offset) for log, offset in zip(logs, offsets, strict=True)]

        def new_log_lines() -> str:
            return "\n".join(tail_text(text) for text in new_log_text())

        login = self.admin_login() if self.auth == AUTH_SCRAM else None

        def ready() -> bool:
            if not is_alive(pid):
                self.pid_file.unlink(missing_ok=True)
                if any("Address already in use" in text for text in new_log_text()):
                    raise _PortTaken()
                lines = new_log_lines()
                raise InfraError(
                    f"Kafka exited during start-up. Last lines of its logs:\n{lines}",
                    f"read {self.log_dir}; if the data is damaged, `punto-banco infra down` and "
                    f"remove {self.home}",
                )
            return port_answers(port) and broker_answers(bootstrap, login)

        if not wait_until(ready, timeout=timeout, interval=0.5):
            stop_process(pid, timeout=30)
            self.pid_file.unlink(missing_ok=True)
            raise InfraError(
                f"Kafka did not answer on {bootstrap} within {timeout:.0f} s. Last log lines:\n"
                + new_log_lines(),
                f"read {self.log_dir}; a slow machine may need a longer --timeout",
            )
        progress(f"Kafka is up on {bootstrap} (pid {pid})")
        return bootstrap

    def stop(self, timeout: float = 60.0) -> bool:
        """Stop the broker (controlled shutdown, then kill). True if one was running."""
        with locked(self.home / ".lock"):
            pid = self.pid()
            if pid is None:
                self.pid_file.unlink(missing_ok=True)
                return False
            progress(f"stopping Kafka (pid {pid}) ...")
            if stop_process(pid, timeout=timeout):
                progress("Kafka did not stop in time and was killed")
            self.pid_file.unlink(missing_ok=True)
            return True

    def _write_config(self, state: Mapping[str, Any], admin_password: str = "") -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        port, controller_port = int(state["port"]), int(state["controller_port"])
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{LOOPBACK}:{controller_port}",
            "listeners": f"PLAINTEXT://{LOOPBACK}:{port},CONTROLLER://{LOOPBACK}:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "10",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "10",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            "delete.topic.enable": "true",
            "log.retention.hours": "168",
        }
        lines = ["# Written by `punto-banco infra up` (services/dev/infra); edits are lost."]
        if self.auth == AUTH_SCRAM:
            names = tls_names(str(state["tls_host"]), str(state["tls_advertised"]))
            tls = ensure_tls(self.home, names, str(state["cluster_id"]))
            settings.update(broker_settings(state, admin_password, tls))
            lines.append("# Holds the admin's password: readable by its owner only.")
        lines += [f"{key}={value}" for key, value in settings.items()]
        text = "\n".join(lines) + "\n"
        if self.auth == AUTH_SCRAM:
            write_private(self.config_file, text)
        else:
            self.config_file.write_text(text)
        (self.home / "log4j2.properties").write_text(_LOG4J2)

    def _format(
        self, java: str, classpath: str, cluster_id: str, passwords: Mapping[str, str]
    ) -> None:
        users = f", SCRAM users {', '.join(passwords)}" if passwords else ""
        progress(
            f"formatting Kafka storage in {self.data_dir} (cluster id {cluster_id}{users}) ..."
        )
        arguments = [
            "kafka.tools.StorageTool",
            "format",
            "--cluster-id",
            cluster_id,
            "--config",
            str(self.config_file),
            "--ignore-formatted",
            *scram_format_arguments(passwords),
        ]
        # The passwords go in a 0600 argument file (`java @file`), never on a command line
        # that every local user can read in /proc.
        argfile = self.credentials.folder / "format.args"
        write_private(argfile, "\n".join(_argfile_quote(a) for a in arguments) + "\n")
        command = [
            java,
            f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.log_dir}",
            "-cp",
            classpath,
            f"@{argfile}",
        ]
        try:
            result = subprocess.run(command, capture_output=True, text=True, check=False)
        finally:
            argfile.unlink(missing_ok=True)
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip()[-800:]
            for password in passwords.values():
                output = output.replace(password, "***")
            raise InfraError(
                "formatting Kafka's storage failed: " + output,
                f"remove {self.data_dir} and retry",
            )


def _argfile_quote(argument: str) -> str:
    """One argument of a java ``@argfile``: in double quotes, ``\\`` and ``"`` escaped."""
    return '"' + argument.replace("\\", "\\\\").replace('"', '\\"') + '"'
