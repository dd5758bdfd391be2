"""A local PostgreSQL server: its own cluster in the project's data folder.

The server binaries come from Debian's ``postgresql`` package (installed with
apt-get when missing and we are root). The cluster listens on 127.0.0.1 only (no
Unix socket), uses password (SCRAM) authentication, and gets a role and a
database for the project; the role may create databases (the test fixtures make
a fresh one per test session) and roles: it is the local administrator. As root, the
server runs as the ``postgres`` OS user, which PostgreSQL requires.

Every start (also of a server already running) provisions, as that administrator, the
services' least-privilege roles for the default schemas of the project database
(``services/tools/admin/provisioning.py``: ``shoe``, ``dealing``, ``settlement`` and their
``*_owner`` roles, ``auditor``). Their passwords are made here and kept in
``<home>/secrets/<role>.password`` (0600, folder 0700); :meth:`PostgresServer.role_env` gives a
role's ``POSTGRES_*`` settings, to run a service (or the audit) as that role.
"""

from __future__ import annotations

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

from services.dev.infra import common
from services.dev.infra.common import (
    Credentials,
    InfraError,
    ServiceStatus,
    load_state,
    save_state,
    write_private,
)
from services.dev.infra.ports import LOOPBACK, choose_port
from services.dev.infra.processes import (
    locked,
    progress,
    read_from,
    running_pid,
    stop_process,
    tail_text,
    wait_until,
)
from services.dev.infra.programs import find_bin_dir
from services.shared.platform.settings import PostgresSettings
from services.tools.admin.provisioning import SERVICES, Provisioning, provision, store_roles

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
        kwargs.setdefault("port", common.env_port("PB_POSTGRES_PORT"))
        home = kwargs.pop("home", None) or common.data_dir() / "postgres"
        return cls(home=home, **kwargs)

    @property
    def state_file(self) -> Path:
        return self.home / "state.json"

    @property
    def log_file(self) -> Path:
        return self.home / "postgres.log"

    @property
    def secrets_dir(self) -> Path:
        return self.home / "secrets"

    def data_dir(self) -> Path:
        return self.home / "data"

    def pid(self) -> int | None:
        data = self.data_dir()
        return running_pid(data / "postmaster.pid", str(data))

    def current_port(self) -> int | None:
        """The port of the running server (from postmaster.pid), else the last one used."""
        try:
            return int((self.data_dir() / "postmaster.pid").read_text().splitlines()[3])
        except (OSError, ValueError, IndexError):
            port = load_state(self.state_file).get("port")
            return int(port) if port else None

    def _conninfo(self, user: str | None = None, password: str | None = None) -> dict[str, Any]:
        """How to log in to the project database: as ``user`` (default its administrator)."""
        state = load_state(self.state_file)
        return {
            "host": LOOPBACK,
            "port": self.current_port(),
            "dbname": self.database,
            "user": user or self.user,
            "password": password if user else str(state.get("password", "")),
            "connect_timeout": 3,
        }

    def superuser_conninfo(self) -> dict[str, Any]:
        password = load_state(self.state_file).get("superuser_password")
        return {**self._conninfo(SUPERUSER, password), "dbname": "postgres"}

    @staticmethod
    def _connects(conninfo: dict[str, Any]) -> bool:
        try:
            with psycopg.connect(**conninfo) as connection:
                connection.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def answers(self) -> bool:
        return self._connects(self._conninfo())

    def env(self) -> dict[str, str]:
        """The POSTGRES_* settings (the names eventsourcing.postgres reads)."""
        info = self._conninfo()
        return {
            "POSTGRES_HOST": LOOPBACK,
            "POSTGRES_PORT": str(info["port"] or ""),
            "POSTGRES_DBNAME": self.database,
            "POSTGRES_USER": self.user,
            "POSTGRES_PASSWORD": info["password"],
        }

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
        return Credentials(self.secrets_dir).ensure(role)

    def role_env(self, role: str) -> dict[str, str]:
        """The settings of a service (or the auditor) logging in as its own role."""
        env = {**self.env(), "POSTGRES_USER": role, "POSTGRES_PASSWORD": self.role_password(role)}
        if role != "auditor":
            env["PB_POSTGRES_CREATE_TABLES"] = "no"
        return env

    def provision_roles(self) -> Provisioning:
        """Provision the default schemas' roles (idempotent); make the stored passwords work."""
        info = self._conninfo()
        admin = PostgresSettings(
            host=LOOPBACK,
            port=int(info["port"]),
            dbname=self.database,
            user=self.user,
            password=info["password"],
        )
        passwords = {role: self.role_password(role) for role in self.login_roles()}
        done = provision(admin, SERVICES, passwords=passwords)
        created = {role.name for role in done.roles if role.created}
        for role, password in passwords.items():
            if role not in created and not self._connects(self._conninfo(role, password)):
                self._set_password(role, password)  # an existing role, its file replaced
        return done

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

    def status(self) -> ServiceStatus:
        pid = self.pid()
        if pid is None:
            return ServiceStatus("postgres", False, detail=f"not running (home {self.home})")
        port, ok = self.current_port(), self.answers()
        detail = f"PostgreSQL pid {pid} on {LOOPBACK}:{port}, database {self.database}"
        detail += "" if ok else " (not answering)"
        return ServiceStatus("postgres", ok, pid, port, detail, self.env() if ok else {})

    # -- the server's programs, run as the postgres OS user when we are root ------------------

    def _run(self, command: list[str]) -> subprocess.CompletedProcess[str]:
        if os.geteuid() == 0:
            command = ["runuser", "-u", SUPERUSER, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=False, cwd="/")

    def _failed(self, what: str, result: subprocess.CompletedProcess[str], log: str) -> InfraError:
        return InfraError(
            f"{what} failed: {(result.stdout + result.stderr).strip()[-800:]}\n{tail_text(log)}",
            f"read {self.log_file}; to start afresh, `punto-banco infra down` "
            f"and remove {self.home}",
        )

    def _give_to_owner(self, path: Path) -> None:
        if os.geteuid() == 0:
            entry = pwd.getpwnam(SUPERUSER)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    # -- start / stop ------------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> dict[str, str]:
        """Start the cluster unless it already runs; wait until it answers; return its env."""
        with locked(self.home / ".lock"):
            pid = self.pid()
            if pid is None:
                self._start(timeout)
            else:
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
            self._ensure_role_and_database()
            try:
                done = self.provision_roles()
            except psycopg.Error as error:
                raise InfraError(
                    f"provisioning the services' PostgreSQL roles failed: {error}",
                    f"read {self.log_file}; `punto-banco infra up` again once it is fixed",
                ) from None
            made = ", ".join(role.name for role in done.roles if role.created)
            if made:
                progress(f"PostgreSQL roles created: {made} (passwords in {self.secrets_dir})")
            return self.env()

    def _start(self, timeout: float) -> None:
        if self.port:  # a port asked for and taken: say so before anything else
            choose_port(what="PostgreSQL", requested=self.port, preferred=(), option=PORT_OPTION)
        bin_dir = self.bin_dir or find_bin_dir()
        if os.geteuid() == 0:
            try:
                pwd.getpwnam(SUPERUSER)
            except KeyError:
                raise InfraError(
                    "running as root, but there is no `postgres` OS user to run the server as.",
                    "install Debian's postgresql package (it creates the user), "
                    "or run as a normal user",
                ) from None
        state = load_state(self.state_file)
        state.setdefault("password", secrets.token_hex(16))
        state.setdefault("superuser_password", secrets.token_hex(16))
        self.home.mkdir(parents=True, exist_ok=True)
        self.log_file.touch()
        self._give_to_owner(self.log_file)
        if self._run(["test", "-w", str(self.log_file)]).returncode != 0:
            raise InfraError(
                f"the `{SUPERUSER}` OS user, which runs PostgreSQL when we are root, cannot "
                f"reach {self.home}.",
                "choose a data folder every folder above which others may enter "
                "(`--data-dir` or PB_DATA_DIR, e.g. under /var/tmp), or `chmod o+x` those",
            )
        data = self.data_dir()
        if not (data / "PG_VERSION").is_file():
            self._initdb(bin_dir, state["superuser_password"])
        cluster, binaries = (data / "PG_VERSION").read_text().strip(), bin_dir.parent.name
        if re.fullmatch(r"\d+", binaries) and binaries != cluster:
            raise InfraError(
                f"the cluster in {data} was made by PostgreSQL {cluster}, "
                f"but the server programs are version {binaries} ({bin_dir}).",
                f"set PB_POSTGRES_BIN to a PostgreSQL {cluster} bin folder, or remove {self.home}",
            )
        for attempt in range(3):
            port = choose_port(
                what="PostgreSQL",
                requested=self.port,
                preferred=() if attempt else (state.get("port"), self.preferred_port),
                option=PORT_OPTION,
            )
            state["port"] = port
            save_state(self.state_file, state)
            progress(f"starting PostgreSQL on {LOOPBACK}:{port} (data {data}) ...")
            offset = self.log_file.stat().st_size
            started = self._run(
                [
                    *(str(bin_dir / "pg_ctl"), "start", "--pgdata", str(data)),
                    *("--log", str(self.log_file), "--wait", "--timeout", str(int(timeout))),
                    *("-o", f"-p {port}"),
                ]
            )
            if started.returncode == 0:
                break
            log = read_from(self.log_file, offset)
            if "Address already in use" not in log or self.pid() is not None:
                raise self._failed("starting PostgreSQL", started, log)
            if self.port:
                raise InfraError(
                    f"PostgreSQL: port {port} on {LOOPBACK} was taken by another program.",
                    f"stop that program, or choose another port with {PORT_OPTION}",
                )
            progress(f"port {port} was taken while PostgreSQL started; retrying on a free port")
        else:
            raise InfraError("PostgreSQL found no free port in 3 tries.", f"use {PORT_OPTION}")
        superuser = self.superuser_conninfo  # the port is the started server's now
        if not wait_until(lambda: self._connects(superuser()), timeout=timeout, interval=0.3):
            raise InfraError(
                f"PostgreSQL did not answer on {LOOPBACK}:{port}.\n"
                + tail_text(read_from(self.log_file)),
                f"read {self.log_file}",
            )
        progress(f"PostgreSQL is up on {LOOPBACK}:{port}, database {self.database}")

    def _initdb(self, bin_dir: Path, superuser_password: str) -> None:
        data = self.data_dir()
        data.mkdir(parents=True, exist_ok=True)
        os.chmod(data, 0o700)
        self._give_to_owner(data)
        password_file = data.parent / f".pw-{secrets.token_hex(4)}"
        write_private(password_file, superuser_password + "\n")
        self._give_to_owner(password_file)
        progress(f"creating a PostgreSQL cluster in {data} ...")
        try:
            result = self._run(
                [
                    *(str(bin_dir / "initdb"), "--pgdata", str(data), "--username", SUPERUSER),
                    *("--pwfile", str(password_file), "--auth-host", "scram-sha-256"),
                    *("--auth-local", "peer", "--encoding", "UTF8", "--no-locale"),
                    "--no-instructions",
                ]
            )
        finally:
            password_file.unlink(missing_ok=True)
        if result.returncode != 0:
            raise self._failed("initdb", result, read_from(self.log_file))
        with open(data / "postgresql.conf", "a") as conf:
            conf.write(
                "\n# punto-banco (services/dev/infra/postgres.py): loopback TCP only\n"
                f"listen_addresses = '{LOOPBACK}'\n"
                "unix_socket_directories = ''\n"
                "max_connections = 200\n"
            )

    def _ensure_role_and_database(self) -> None:
        password = load_state(self.state_file)["password"]
        with psycopg.connect(**self.superuser_conninfo(), autocommit=True) as connection:
            exists = connection.execute(
                "SELECT 1 FROM pg_roles WHERE rolname = %s", (self.user,)
            ).fetchone()
            connection.execute(
                sql.SQL("{} ROLE {} LOGIN CREATEDB CREATEROLE PASSWORD {}").format(
                    sql.SQL("ALTER" if exists else "CREATE"),
                    sql.Identifier(self.user),
                    sql.Literal(password),
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

    def stop(self, timeout: float = 60.0) -> bool:
        """Stop the cluster (fast shutdown, then kill). True if one was running."""
        with locked(self.home / ".lock"):
            pid = self.pid()
            if pid is None:
                return False
            progress(f"stopping PostgreSQL (pid {pid}) ...")
            bin_dir = self.bin_dir or find_bin_dir(install=False)
            result = self._run(
                [
                    *(str(bin_dir / "pg_ctl"), "stop", "--pgdata", str(self.data_dir())),
                    *("--mode", "fast", "--wait", "--timeout", str(int(timeout))),
                ]
            )
            if result.returncode != 0 and self.pid() is not None:
                stop_process(pid, timeout=10)
            return True
