"""A local PostgreSQL server: its own cluster in the project's data folder.

The server binaries come from Debian's ``postgresql`` package (installed with
apt-get when missing and we are root). The cluster listens on 127.0.0.1 only (no
Unix socket), uses password (SCRAM) authentication, and gets a role and a
database for the project; the role may create databases (the test fixtures make
a fresh one per test session) and roles: it is the local administrator. As root, the
server runs as the ``postgres`` OS user, which PostgreSQL requires.

Every start (also of a server already running) provisions, as that administrator, the
services' least-privilege roles for the default schemas of the project database
(``services/shared/platform/store/provisioning.py``: ``shoe``, ``dealing``, ``settlement`` and their
``*_owner`` roles, ``auditor``). Their passwords are made here and kept in
``<home>/secrets/<role>.password`` (0600, folder 0700); :meth:`PostgresServer.role_env` gives a
role's ``POSTGRES_*`` settings, to run a service (or the audit) as that role.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from services.dev.infra import layout
from services.dev.infra.errors import InfraError
from services.dev.infra.pg_binaries import find_bin_dir
from services.dev.infra.ports import LOOPBACK, choose_port
from services.dev.infra.private_files import private_folder, read_private, write_private
from services.dev.infra.processes import (
    locked,
    progress,
    read_from,
    running_pid,
    stop_process,
    tail,
    tail_text,
    wait_until,
)
from services.dev.infra.state import load_state, save_state
from services.dev.infra.status import ServiceStatus
from services.shared.platform.settings import PostgresSettings
from services.shared.platform.store import SERVICES, Provisioning, provision, store_roles

DEFAULT_PORT = 55432
PORT_OPTION = "--postgres-port (or PB_POSTGRES_PORT)"
SUPERUSER = "postgres"


@dataclass
class PostgresServer:
    """One PostgreSQL cluster living in ``home`` (state file, log, and usually the data).

    ``port``: a port asked for (must be free); otherwise the port of the last start,
    then ``preferred_port`` (None: any free port).
    """

    home: Path
    port: int | None = None
    preferred_port: int | None = DEFAULT_PORT
    database: str = "punto_banco"
    user: str = "punto_banco"
    bin_dir: Path | None = None

    @classmethod
    def for_project(cls, **kwargs: Any) -> PostgresServer:
        kwargs.setdefault("port", layout.env_port("PB_POSTGRES_PORT"))
        return cls(home=layout.data_dir() / "postgres", **kwargs)

    @property
    def state_file(self) -> Path:
        return self.home / "state.json"

    @property
    def log_file(self) -> Path:
        return self.home / "postgres.log"

    def _state(self) -> dict[str, Any]:
        return load_state(self.state_file)

    def data_dir(self) -> Path:
        recorded = self._state().get("data_dir")
        return Path(recorded) if recorded else self.home / "data"

    def pid(self) -> int | None:
        data = self.data_dir()
        return running_pid(data / "postmaster.pid", str(data))

    def current_port(self) -> int | None:
        """The port of the running server (from postmaster.pid), else the last one used."""
        try:
            return int((self.data_dir() / "postmaster.pid").read_text().splitlines()[3])
        except (OSError, ValueError, IndexError):
            port = self._state().get("port")
            return int(port) if port else None

    def env(self) -> dict[str, str]:
        """The POSTGRES_* settings (the names eventsourcing.postgres reads)."""
        state = self._state()
        return {
            "POSTGRES_HOST": LOOPBACK,
            "POSTGRES_PORT": str(self.current_port() or ""),
            "POSTGRES_DBNAME": self.database,
            "POSTGRES_USER": self.user,
            "POSTGRES_PASSWORD": str(state.get("password", "")),
        }

    @property
    def secrets_dir(self) -> Path:
        return self.home / "secrets"

    def login_roles(self) -> list[str]:
        """The LOGIN roles provisioned for the default schemas: the services and the auditor."""
        return [store.login for store in store_roles(SERVICES)] + ["auditor"]

    def role_password(self, role: str) -> str:
        """``role``'s password (made, random, if it has none yet)."""
        if role not in self.login_roles():
            raise InfraError(
                f"{role!r} is not a role of the local PostgreSQL.",
                f"use one of {', '.join(self.login_roles())}",
            )
        path = self.secrets_dir / f"{role}.password"
        if path.is_file():
            found = read_private(path).strip()
            if found:
                return found
        password = secrets.token_urlsafe(32)
        private_folder(self.secrets_dir)
        write_private(path, password + "\n")
        return password

    def role_env(self, role: str) -> dict[str, str]:
        """The settings of a service (or the auditor) logging in as its own role."""
        env = {**self.env(), "POSTGRES_USER": role, "POSTGRES_PASSWORD": self.role_password(role)}
        if role != "auditor":
            env["PB_POSTGRES_CREATE_TABLES"] = "no"
        return env

    def provision_roles(self) -> Provisioning:
        """Provision the default schemas' roles (idempotent); make the stored passwords work."""
        env = self.env()
        admin = PostgresSettings(
            host=env["POSTGRES_HOST"],
            port=int(env["POSTGRES_PORT"]),
            dbname=self.database,
            user=self.user,
            password=env["POSTGRES_PASSWORD"],
        )
        passwords = {role: self.role_password(role) for role in self.login_roles()}
        done = provision(admin, SERVICES, passwords=passwords)
        created = {role.name for role in done.roles if role.created}
        for role, password in passwords.items():
            if role not in created and not self._logs_in(role, password):
                self._set_password(role, password)  # an existing role, its file replaced
        return done

    def _logs_in(self, role: str, password: str) -> bool:
        conninfo = {**self.superuser_conninfo(self.database), "user": role, "password": password}
        try:
            with psycopg.connect(**conninfo):
                return True
        except psycopg.OperationalError:
            return False

    def _set_password(self, role: str, password: str) -> None:
        with psycopg.connect(**self.superuser_conninfo(), autocommit=True) as connection:
            verifier = connection.pgconn.encrypt_password(
                password.encode(), role.encode(), b"scram-sha-256"
            )
            connection.execute(
                sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                    sql.Identifier(role), sql.Literal(verifier.decode())
                )
            )

    def superuser_conninfo(self, dbname: str = "postgres") -> dict[str, Any]:
        state = self._state()
        return {
            "host": LOOPBACK,
            "port": self.current_port(),
            "dbname": dbname,
            "user": SUPERUSER,
            "password": state.get("superuser_password"),
            "connect_timeout": 3,
        }

    def answers(self) -> bool:
        env = self.env()
        try:
            with psycopg.connect(
                host=env["POSTGRES_HOST"],
                port=env["POSTGRES_PORT"],
                dbname=env["POSTGRES_DBNAME"],
                user=env["POSTGRES_USER"],
                password=env["POSTGRES_PASSWORD"],
                connect_timeout=3,
            ) as connection:
                connection.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def status(self) -> ServiceStatus:
        pid = self.pid()
        if pid is None:
            return ServiceStatus("postgres", False, detail=f"not running (home {self.home})")
        port = self.current_port()
        ok = self.answers()
        detail = f"PostgreSQL pid {pid} on {LOOPBACK}:{port}, database {self.database}"
        return ServiceStatus(
            "postgres",
            ok,
            pid,
            port,
            detail + ("" if ok else " (not answering)"),
            self.env() if ok else {},
        )

    # -- running the server's programs, as the postgres OS user when we are root ------------

    def _as_owner(self, command: list[str]) -> list[str]:
        if os.geteuid() != 0:
            return command
        return ["runuser", "-u", SUPERUSER, "--", *command]

    def _run(self, command: list[str], what: str) -> None:
        result = subprocess.run(
            self._as_owner(command), capture_output=True, text=True, check=False, cwd="/"
        )
        if result.returncode != 0:
            raise InfraError(
                f"{what} failed: {(result.stdout + result.stderr).strip()[-800:]}\n"
                + tail(self.log_file),
                f"read {self.log_file}; to start afresh, `punto-banco infra down` "
                f"and remove {self.home}",
            )

    def _give_to_owner(self, path: Path) -> None:
        if os.geteuid() == 0:
            entry = pwd.getpwnam(SUPERUSER)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def _owner_can_use(self, directory: Path) -> bool:
        if os.geteuid() != 0:
            return True
        probe = ["runuser", "-u", SUPERUSER, "--", "test", "-w", str(directory)]
        return subprocess.run(probe, capture_output=True, check=False).returncode == 0

    def _check_owner_exists(self) -> None:
        if os.geteuid() != 0:
            return
        try:
            pwd.getpwnam(SUPERUSER)
        except KeyError:
            raise InfraError(
                "running as root, but there is no `postgres` OS user to run the server as.",
                "install Debian's postgresql package (it creates the user), "
                "or run as a normal user",
            ) from None

    # -- start / stop ------------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> dict[str, str]:
        """Start the cluster unless it already runs; wait until it answers; return its env."""
        with locked(self.home / ".lock"):
            return self._start(timeout)

    def _start(self, timeout: float) -> dict[str, str]:
        pid = self.pid()
        state = self._state()
        if pid is not None:
            running_port = self.current_port()
            if self.port and self.port != running_port:
                raise InfraError(
                    f"PostgreSQL already runs on port {running_port} (pid {pid}), "
                    f"not on {self.port}.",
                    "run `punto-banco infra down` first to move it to another port",
                )
            if not wait_until(self.answers, timeout=timeout, interval=0.5):
                raise InfraError(
                    f"PostgreSQL (pid {pid}) runs but does not answer.",
                    f"read {self.log_file}; `punto-banco infra down` then `up` again",
                )
            progress(f"PostgreSQL already running on {LOOPBACK}:{running_port} (pid {pid})")
            self._ensure_role_and_database(state["password"])
            self._provision()
            return self.env()
        bin_dir = self.bin_dir or find_bin_dir()
        self._check_owner_exists()
        state.setdefault("password", secrets.token_hex(16))
        state.setdefault("superuser_password", secrets.token_hex(16))
        self.home.mkdir(parents=True, exist_ok=True)
        data = Path(state.get("data_dir") or self.home / "data")
        if not (data / "PG_VERSION").is_file():
            data = self._initdb(bin_dir, state)
        self._check_version(bin_dir, data)
        state["data_dir"] = str(data)
        if not self.log_file.exists():
            self.log_file.touch()
        self._give_to_owner(self.log_file)
        for attempt in range(3):
            port = choose_port(
                what="PostgreSQL",
                requested=self.port,
                preferred=() if attempt else (state.get("port"), self.preferred_port),
                option=PORT_OPTION,
            )
            state["port"] = port
            save_state(self.state_file, state)
            if self._pg_ctl_start(bin_dir, data, port, timeout):
                break
            if self.port:
                raise InfraError(
                    f"PostgreSQL: port {port} on {LOOPBACK} was taken by another program.",
                    f"stop that program, or choose another port with {PORT_OPTION}",
                )
            progress(f"port {port} was taken while PostgreSQL started; retrying on a free port")
        else:
            raise InfraError("PostgreSQL found no free port in 3 tries.", f"use {PORT_OPTION}")
        if not wait_until(self.answers_as_superuser, timeout=timeout, interval=0.3):
            raise InfraError(
                f"PostgreSQL did not answer on {LOOPBACK}:{port}.\n{tail(self.log_file)}",
                f"read {self.log_file}",
            )
        self._ensure_role_and_database(state["password"])
        self._provision()
        progress(f"PostgreSQL is up on {LOOPBACK}:{port}, database {self.database}")
        return self.env()

    def _pg_ctl_start(self, bin_dir: Path, data: Path, port: int, timeout: float) -> bool:
        """Start the server; False if it could not bind ``port`` (taken meanwhile)."""
        progress(f"starting PostgreSQL on {LOOPBACK}:{port} (data {data}) ...")
        offset = self.log_file.stat().st_size
        command = [
            str(bin_dir / "pg_ctl"),
            "start",
            "--pgdata",
            str(data),
            "--log",
            str(self.log_file),
            "--wait",
            "--timeout",
            str(int(timeout)),
            "-o",
            f"-p {port}",
        ]
        result = subprocess.run(
            self._as_owner(command), capture_output=True, text=True, check=False, cwd="/"
        )
        if result.returncode == 0:
            return True
        new_lines = read_from(self.log_file, offset)
        if "Address already in use" in new_lines and self.pid() is None:
            return False
        raise InfraError(
            f"starting PostgreSQL failed: {(result.stdout + result.stderr).strip()[-400:]}\n"
            + tail_text(new_lines),
            f"read {self.log_file}; to start afresh, `punto-banco infra down` "
            f"and remove {self.home}",
        )

    def answers_as_superuser(self) -> bool:
        try:
            with psycopg.connect(**self.superuser_conninfo()) as connection:
                connection.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def _initdb(self, bin_dir: Path, state: dict[str, Any]) -> Path:
        data = self.home / "data"
        data.mkdir(parents=True, exist_ok=True)
        os.chmod(data, 0o700)
        self._give_to_owner(data)
        if not self._owner_can_use(data):
            digest = hashlib.sha256(str(self.home).encode()).hexdigest()[:12]
            data = Path("/var/tmp") / f"punto-banco-{digest}" / "data"
            progress(
                f"the postgres OS user cannot reach {self.home}; keeping the cluster in {data}"
            )
            data.mkdir(parents=True, exist_ok=True)
            os.chmod(data.parent, 0o755)
            os.chmod(data, 0o700)
            self._give_to_owner(data)
        password_file = data.parent / f".pw-{secrets.token_hex(4)}"
        fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(state["superuser_password"] + "\n")
        self._give_to_owner(password_file)
        progress(f"creating a PostgreSQL cluster in {data} ...")
        try:
            self._run(
                [
                    str(bin_dir / "initdb"),
                    "--pgdata",
                    str(data),
                    "--username",
                    SUPERUSER,
                    "--pwfile",
                    str(password_file),
                    "--auth-host",
                    "scram-sha-256",
                    "--auth-local",
                    "peer",
                    "--encoding",
                    "UTF8",
                    "--no-locale",
                    "--no-instructions",
                ],
                "initdb",
            )
        finally:
            password_file.unlink(missing_ok=True)
        with open(data / "postgresql.conf", "a") as conf:
            conf.write(
                "\n# punto-banco (services/dev/infra/postgres.py): loopback TCP only\n"
                f"listen_addresses = '{LOOPBACK}'\n"
                "unix_socket_directories = ''\n"
                "max_connections = 200\n"
            )
        return data

    def _check_version(self, bin_dir: Path, data: Path) -> None:
        cluster = (data / "PG_VERSION").read_text().strip()
        binaries = bin_dir.parent.name
        if re.fullmatch(r"\d+", binaries) and binaries != cluster:
            raise InfraError(
                f"the cluster in {data} was made by PostgreSQL {cluster}, "
                f"but the server programs are version {binaries} ({bin_dir}).",
                f"set PB_POSTGRES_BIN to a PostgreSQL {cluster} bin folder, or remove {self.home}",
            )

    def _ensure_role_and_database(self, password: str) -> None:
        with psycopg.connect(**self.superuser_conninfo(), autocommit=True) as connection:
            exists = connection.execute(
                "SELECT 1 FROM pg_roles WHERE rolname = %s", (self.user,)
            ).fetchone()
            verb = "ALTER" if exists else "CREATE"
            connection.execute(
                sql.SQL("{} ROLE {} LOGIN CREATEDB CREATEROLE PASSWORD {}").format(
                    sql.SQL(verb), sql.Identifier(self.user), sql.Literal(password)
                )
            )
            if not connection.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (self.database,)
            ).fetchone():
                connection.execute(
                    sql.SQL("CREATE DATABASE {} OWNER {}").format(
                        sql.Identifier(self.database), sql.Identifier(self.user)
                    )
                )

    def _provision(self) -> None:
        try:
            done = self.provision_roles()
        except psycopg.Error as error:
            raise InfraError(
                f"provisioning the services' PostgreSQL roles failed: {error}",
                f"read {self.log_file}; `punto-banco infra up` again once it is fixed",
            ) from None
        made = [role.name for role in done.roles if role.created]
        if made:
            progress(
                f"PostgreSQL roles created: {', '.join(made)} (passwords in {self.secrets_dir})"
            )

    def stop(self, timeout: float = 60.0) -> bool:
        """Stop the cluster (fast shutdown, then kill). True if one was running."""
        with locked(self.home / ".lock"):
            pid = self.pid()
            if pid is None:
                return False
            progress(f"stopping PostgreSQL (pid {pid}) ...")
            bin_dir = self.bin_dir or find_bin_dir(install=False)
            command = [
                str(bin_dir / "pg_ctl"),
                "stop",
                "--pgdata",
                str(self.data_dir()),
                "--mode",
                "fast",
                "--wait",
                "--timeout",
                str(int(timeout)),
            ]
            result = subprocess.run(
                self._as_owner(command), capture_output=True, check=False, cwd="/"
            )
            if result.returncode != 0 and self.pid() is not None:
                stop_process(pid, timeout=10)
            return True
