"""The three services of one benchmark run as ``punto-banco serve`` subprocesses.

Each run gets its own topic prefix, data folder (with the run's signing keys and the shoe's
secret key in ``keys/``) and (on PostgreSQL) schema prefix, so runs never see each other's
messages or events; :meth:`Cluster.stop` stops every child (SIGTERM, bounded wait, SIGKILL) and
drops the run's PostgreSQL schemas. :class:`MemorySampler` samples each child's resident memory
(psutil) while a load runs.

With ``instances`` (``PB_BENCH_INSTANCES``, :mod:`services.dev.bench.instances`) each service
runs partitioned (``PB_PARTITIONED=yes``) as that many processes on topics of ``partitions``
partitions; a service is ready once every process serves and the group's partitions are
settled (each owned once, a cell serving for each).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from services.dev.bench.instances import partitions_settled
from services.dev.demo.bus import delete_topics
from services.dev.demo.processes import (
    SERVICES,
    ServiceProcess,
    ServiceSettings,
    prepare_keys,
    service_env,
    stop_all,
    wait_for,
)
from services.dev.demo.system import end_run, secure_run
from services.dev.infra.kafka_clients import ADMIN, KafkaLogins

START_TIMEOUT = 120.0
"""Seconds each service may take to log ``<name>: serving`` (a busy 2-core machine is slow)."""


def run_id() -> str:
    """A short unique id for a run's topic prefix, schemas and table ids."""
    return uuid.uuid4().hex[:8]


@dataclass
class Cluster:
    """Shoe, dealing and settlement serving one store, on one broker, with their own names."""

    bootstrap: str
    data_dir: Path
    postgres: Mapping[str, str] = field(default_factory=dict)
    tag: str = field(default_factory=run_id)
    processes: list[ServiceProcess] = field(default_factory=list)
    logins: KafkaLogins = field(default_factory=KafkaLogins)
    instances: int | None = None
    """Processes per service, partitioned; None: one process each, not partitioned."""
    partitions: int = 3
    """Partitions of every topic of the run."""

    @property
    def topic_prefix(self) -> str:
        return f"bench-{self.tag}."

    @property
    def schema_prefix(self) -> str:
        return f"bench_{self.tag}_"

    @property
    def store(self) -> str:
        return "postgres" if self.postgres else "sqlite"

    def service_settings(self) -> ServiceSettings:
        extra = {
            "PB_HTTP_PORT": "off",
            "PB_LOG_LEVEL": "INFO",
            "PB_POSTGRES_SCHEMA_PREFIX": self.schema_prefix,
            # The bench drives the house's gateway topics (one operator): whatever the shell
            # says, the services it measures serve the house alone.
            "PB_OPERATORS": "house",
        }
        if self.instances is not None:
            extra["PB_PARTITIONED"] = "yes"
            extra["PB_TOPIC_PARTITIONS"] = str(self.partitions)
        return ServiceSettings(
            bootstrap=self.bootstrap,
            data_dir=self.data_dir,
            topic_prefix=self.topic_prefix,
            postgres=dict(self.postgres),
            extra=extra,
            logins=self.logins,
        )

    def env(self, service: str | None = None) -> dict[str, str]:
        """A service's environment (with ``service``: its principal's Kafka login)."""
        return service_env(self.service_settings(), service=service)

    async def start(self) -> None:
        """Create the run's topics and keys, start the three services, wait until each serves."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(prepare_keys, self.service_settings())
        await secure_run(self.service_settings(), partitions=self.partitions)
        count = self.instances or 1
        self.processes = [
            ServiceProcess(name, self.env(name), self.data_dir / "logs" / f"{label}.log")
            for name in SERVICES
            for label in _labels(name, count)
        ]
        for process in self.processes:
            process.start()
        for process in self.processes:
            marker = f"{process.name}: serving"
            await self._wait(
                lambda p=process, m=marker: m in p.log_text_since_start(),  # type: ignore[misc]
                f"{process.name} did not serve within {START_TIMEOUT:.0f} s",
                process,
            )
        if self.instances is not None:
            for name in SERVICES:
                mine = [p for p in self.processes if p.name == name]
                await self._wait(
                    lambda m=mine: partitions_settled(  # type: ignore[misc]
                        [p.log_text_since_start() for p in m], self.partitions
                    ),
                    f"{name}'s {count} processes did not settle their {self.partitions} "
                    f"partitions within {START_TIMEOUT:.0f} s",
                    mine[-1],
                )

    async def _wait(self, check: Callable[[], bool], failure: str, shown: ServiceProcess) -> None:
        ready = await asyncio.to_thread(
            wait_for, check, timeout=START_TIMEOUT, interval=0.2, watch=self.processes
        )
        if not ready:
            raise TimeoutError(f"{failure}:\n{shown.log_tail()}")

    def check_alive(self) -> None:
        """Raise if a service died during the load."""
        for process in self.processes:
            if not process.running():
                raise RuntimeError(
                    f"service {process.name} exited with code {process.exit_code()}:\n"
                    f"{process.log_tail()}"
                )

    def pids(self) -> dict[str, int]:
        """Each process's pid, by its label (``<service>``, or ``<service>-<n>``)."""
        return {p.log_path.stem: p.pid for p in self.processes if p.pid is not None}

    def service_pids(self) -> dict[str, list[int]]:
        """The pids of each service's processes."""
        pids: dict[str, list[int]] = {}
        for process in self.processes:
            if process.pid is not None:
                pids.setdefault(process.name, []).append(process.pid)
        return pids

    def stop(self) -> None:
        """Stop every child, delete the run's topics and drop its PostgreSQL schemas."""
        stop_all(self.processes, timeout=20.0)
        with contextlib.suppress(Exception):  # best effort: the figures are already taken
            asyncio.run(self._forget_topics())
        if self.postgres:
            drop_schemas(self.postgres, self.schema_prefix)

    async def _forget_topics(self) -> None:
        await delete_topics(self.bootstrap, self.topic_prefix, auth=self.logins.auth(ADMIN))
        await end_run(self.service_settings())


def _labels(service: str, count: int) -> list[str]:
    """The processes of a service: ``<service>`` alone, or ``<service>-1`` .. ``-<count>``."""
    return [service] if count == 1 else [f"{service}-{n}" for n in range(1, count + 1)]


def drop_schemas(postgres: Mapping[str, str], prefix: str) -> None:
    """Drop every schema whose name starts with ``prefix`` (a run's own schemas only)."""
    import psycopg

    with (
        contextlib.suppress(psycopg.Error),
        psycopg.connect(postgres_conninfo(postgres), autocommit=True) as connection,
    ):
        rows = connection.execute(
            "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)", (prefix,)
        ).fetchall()
        for (name,) in rows:
            connection.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def postgres_conninfo(postgres: Mapping[str, str]) -> str:
    """A psycopg connection string from ``POSTGRES_*`` settings."""
    from psycopg.conninfo import make_conninfo

    keys = {
        "POSTGRES_HOST": "host",
        "POSTGRES_PORT": "port",
        "POSTGRES_DBNAME": "dbname",
        "POSTGRES_USER": "user",
        "POSTGRES_PASSWORD": "password",
    }
    return make_conninfo(**{name: postgres[key] for key, name in keys.items() if postgres.get(key)})


class MemorySampler:
    """Samples the resident memory of some processes every ``interval`` s; keeps each peak."""

    def __init__(self, pids: Mapping[str, int], interval: float = 0.2) -> None:
        self.interval = interval
        self.peaks: dict[str, int] = dict.fromkeys(pids, 0)
        self._processes: dict[str, psutil.Process] = {}
        for name, pid in pids.items():
            with contextlib.suppress(psutil.Error):
                self._processes[name] = psutil.Process(pid)
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> None:
        for name, process in self._processes.items():
            with contextlib.suppress(psutil.Error):
                self.peaks[name] = max(self.peaks[name], process.memory_info().rss)

    async def _loop(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        self.sample()
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> dict[str, int]:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.sample()
        return dict(self.peaks)
