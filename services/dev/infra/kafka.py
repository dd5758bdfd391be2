"""A local single-node Apache Kafka broker (KRaft: broker and controller in one JVM).

The jars come from Maven Central (services/dev/infra/jars.py); the broker starts
from them with Java 17+ (``kafka.tools.StorageTool format``, then ``kafka.Kafka``).
Every internal topic has replication factor 1 and the transaction log a minimum
ISR of 1, so idempotent and transactional producers work on the single node.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import os
import shlex
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.dev.infra import layout
from services.dev.infra.errors import InfraError
from services.dev.infra.jars import KAFKA_VERSION, ensure_jars
from services.dev.infra.ports import LOOPBACK, choose_port, port_answers
from services.dev.infra.processes import (
    is_alive,
    locked,
    progress,
    read_from,
    running_pid,
    start_detached,
    stop_process,
    tail_text,
    wait_until,
)
from services.dev.infra.state import load_state, save_state
from services.dev.infra.status import ServiceStatus
from services.dev.infra.tools import checked_java

DEFAULT_PORT = 9092
DEFAULT_CONTROLLER_PORT = 9093
PORT_OPTION = "--kafka-port (or PB_KAFKA_PORT)"

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


async def _probe(bootstrap: str) -> bool:
    from aiokafka.client import AIOKafkaClient

    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        await client.bootstrap()
        return bool(client.cluster.brokers())
    except Exception:
        return False
    finally:
        await client.close()


def broker_answers(bootstrap: str) -> bool:
    """True when the broker answers a metadata request and lists itself.

    Runs in its own thread and event loop, so it is safe to call from async code.
    """
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, _probe(bootstrap)).result()


@dataclass
class KafkaBroker:
    """One broker instance living in ``home`` (config, data, logs, pid and state files).

    ``port``/``controller_port``: ports asked for (must be free); otherwise the ports
    of the last start, then ``preferred_port`` (None: any free port).
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

    @classmethod
    def for_project(cls, **kwargs: Any) -> KafkaBroker:
        kwargs.setdefault("port", layout.env_port("PB_KAFKA_PORT"))
        return cls(home=layout.data_dir() / "kafka", **kwargs)

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

    def pid(self) -> int | None:
        return running_pid(self.pid_file, str(self.config_file))

    def bootstrap(self) -> str | None:
        port = load_state(self.state_file).get("port")
        return f"{LOOPBACK}:{port}" if port else None

    def status(self) -> ServiceStatus:
        pid = self.pid()
        bootstrap = self.bootstrap()
        if pid is None or bootstrap is None:
            return ServiceStatus("kafka", False, detail=f"not running (home {self.home})")
        port = int(bootstrap.rsplit(":", 1)[1])
        answers = port_answers(port) and broker_answers(bootstrap)
        detail = f"Kafka {self.version} pid {pid} on {bootstrap}" + (
            "" if answers else " (not answering)"
        )
        env = {"KAFKA_BOOTSTRAP_SERVERS": bootstrap} if answers else {}
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
            if self.port and self.port != state["port"]:
                raise InfraError(
                    f"Kafka already runs on {bootstrap} (pid {pid}), not on port {self.port}.",
                    "run `punto-banco infra down` first to move it to another port",
                )
            if not wait_until(lambda: broker_answers(bootstrap), timeout=timeout, interval=1.0):
                raise InfraError(
                    f"Kafka (pid {pid}) runs but does not answer on {bootstrap}.",
                    f"see {self.log_dir / 'server.log'}; `punto-banco infra down` then `up` again",
                )
            progress(f"Kafka already running on {bootstrap} (pid {pid})")
            return bootstrap
        java = checked_java(self.java)
        libs = ensure_jars(self.version, self.cache, self.mvn)
        for attempt in range(3):
            port, controller_port = self._choose_ports(state, fresh=attempt > 0)
            cluster_id = state.get("cluster_id") or new_cluster_id()
            state = {"port": port, "controller_port": controller_port, "cluster_id": cluster_id}
            save_state(self.state_file, state)
            self._write_config(port, controller_port)
            if not (self.data_dir / "meta.properties").is_file():
                self._format(java, f"{libs}/*", cluster_id)
            try:
                return self._launch(java, libs, port, timeout)
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
        raise InfraError(
            "Kafka found no free port in 3 tries.", f"choose a port with {PORT_OPTION}"
        )

    def _choose_ports(self, state: dict[str, Any], *, fresh: bool) -> tuple[int, int]:
        """Ports asked for, else those of the last start, else the defaults, else free ones
        (only free ones when ``fresh``: a retry after a port was taken)."""
        port = choose_port(
            what="Kafka",
            requested=self.port,
            preferred=() if fresh else (state.get("port"), self.preferred_port),
            option=PORT_OPTION,
        )
        controller_port = choose_port(
            what="Kafka controller",
            requested=self.controller_port,
            preferred=()
            if fresh
            else (
                state.get("controller_port"),
                DEFAULT_CONTROLLER_PORT if self.preferred_port else None,
            ),
            option="a free controller port",
            avoid=frozenset({port}),
        )
        return port, controller_port

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
            return port_answers(port) and broker_answers(bootstrap)

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

    def _write_config(self, port: int, controller_port: int) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
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
        lines += [f"{key}={value}" for key, value in settings.items()]
        self.config_file.write_text("\n".join(lines) + "\n")
        (self.home / "log4j2.properties").write_text(_LOG4J2)

    def _format(self, java: str, classpath: str, cluster_id: str) -> None:
        progress(f"formatting Kafka storage in {self.data_dir} (cluster id {cluster_id}) ...")
        command = [
            java,
            f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.log_dir}",
            "-cp",
            classpath,
            "kafka.tools.StorageTool",
            "format",
            "--cluster-id",
            cluster_id,
            "--config",
            str(self.config_file),
            "--ignore-formatted",
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise InfraError(
                "formatting Kafka's storage failed: "
                + (result.stdout + result.stderr).strip()[-800:],
                f"remove {self.data_dir} and retry",
            )
