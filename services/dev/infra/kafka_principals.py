"""The principals of an authenticating local broker: their logins, and what `infra` grants.

:class:`BrokerPrincipals` works on one broker's folder: the passwords
(``<home>/secrets/<name>.password``), the CA file for TLS clients, the principals added after
the format (``extra_principals`` in the broker's state file, name -> role), and, as the admin,
what the ACL matrix and the gateways' quotas (``kafka_acls.py``) give: the project topics on
every `infra up`, a run's own topics (``secure_run``: tests, demo, bench); a principal added
later (`infra credentials NAME --add`) and a run's operator gateways are admitted one way
(:meth:`BrokerPrincipals.admit`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from contracts import HOUSE
from services.dev.infra.common import Credentials, InfraError, load_state, save_state
from services.dev.infra.kafka_acls import (
    GATEWAY_QUOTA,
    ROLES,
    Quota,
    ensure_project_topics,
    gateway_operator,
    grant_project_acls,
    project_acls,
    project_principals,
    project_quotas,
    role_of,
)
from services.dev.infra.kafka_admin import AdminSession, broker_lists_itself
from services.dev.infra.kafka_auth import ADMIN, scram_login
from services.dev.infra.kafka_tls import TlsFiles
from services.dev.infra.processes import progress, run_async
from services.shared.platform.settings import KafkaAuth, check_operators


def served_operators() -> tuple[str, ...]:
    """The operators of the deployment (``PB_OPERATORS``): their topics and gateways."""
    return check_operators(os.environ.get("PB_OPERATORS", ""))


def topic_partitions() -> int:
    """Partitions of the project topics `infra up` creates: ``PB_TOPIC_PARTITIONS``, else 3
    (the services' default)."""
    raw = os.environ.get("PB_TOPIC_PARTITIONS", "").strip()
    try:
        return max(1, int(raw)) if raw else 3
    except ValueError:
        raise InfraError(
            f"PB_TOPIC_PARTITIONS={raw!r} is not a number.", "set it to 1 or more, or unset it"
        ) from None


GATEWAY_BYTE_RATE = "PB_KAFKA_GATEWAY_BYTE_RATE"


def gateway_quota() -> Quota:
    """The quota `infra` gives every gateway principal: ``GATEWAY_QUOTA``, its byte rate from
    ``PB_KAFKA_GATEWAY_BYTE_RATE`` when set (bytes per second; 0: no byte rate quota)."""
    raw = os.environ.get(GATEWAY_BYTE_RATE, "").strip()
    if not raw:
        return GATEWAY_QUOTA
    if not raw.isdigit():
        raise InfraError(
            f"{GATEWAY_BYTE_RATE}={raw!r} is not a number of bytes per second.",
            "set it to 0 (no quota) or more, or unset it",
        )
    return replace(GATEWAY_QUOTA, producer_byte_rate=int(raw))


async def logs_in(bootstrap: str, login: KafkaAuth, wait: float) -> bool:
    """True once ``login`` is accepted (a new credential reaches the broker a moment after
    the controller stored it); False after ``wait`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while not await broker_lists_itself(bootstrap, login):
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.2)
    return True


@dataclass(frozen=True)
class BrokerPrincipals:
    """The principals of the broker living in ``home``."""

    home: Path

    @property
    def credentials(self) -> Credentials:
        """The SCRAM passwords (``<home>/secrets``, 0700; a 0600 file each)."""
        return Credentials(self.home / "secrets")

    @property
    def tls_files(self) -> TlsFiles:
        return TlsFiles.under(self.home)

    @property
    def _state_file(self) -> Path:
        return self.home / "state.json"

    def login(self, principal: str, *, tls: bool = False) -> KafkaAuth:
        """``principal``'s credentials; with ``tls`` for the TLS listener (checked by the CA)."""
        password = self.credentials.read(principal)
        if password is None:
            raise InfraError(
                f"the local broker has no credentials for {principal!r} "
                f"({self.credentials.path(principal)}).",
                f"`punto-banco infra credentials {principal} --add` creates them "
                "(with the broker up, started without PB_KAFKA_AUTH=none)",
            )
        return scram_login(principal, password, self.tls_files.ca_cert if tls else None)

    def admin_login(self) -> KafkaAuth:
        return self.login(ADMIN)

    def roles(self) -> dict[str, str]:
        """Every principal -> its role: the matrix's (each its own), then those added."""
        extra = load_state(self._state_file).get("extra_principals", {})
        return {**project_principals(served_operators()), **extra}

    def passwords(self) -> dict[str, str]:
        """The admin's and every principal's password (made where missing)."""
        return {name: self.credentials.ensure(name) for name in [ADMIN, *self.roles()]}

    async def admit(
        self, bootstrap: str, roles: Mapping[str, str], operators: Sequence[str], *, acls: bool
    ) -> None:
        """Give each principal (name -> role) SCRAM credentials (its password made if missing),
        its role's quota and, with ``acls``, its role's ACLs on the project topics; wait until
        each logs in."""
        passwords = {name: self.credentials.ensure(name) for name in roles}
        async with AdminSession(bootstrap, self.admin_login()) as session:
            await session.upsert_scram_users(passwords)
            if acls:
                await session.create_acls(project_acls("", "", roles, operators))
            await session.set_user_quotas(project_quotas(roles, gateway_quota()))
        for name in roles:
            if not await logs_in(bootstrap, self.login(name), wait=15):
                raise InfraError(
                    f"Kafka accepted the credentials of {name!r} but refuses them.",
                    f"look at {self.home / 'logs' / 'server.log'}",
                )

    def secure_project(self, bootstrap: str) -> None:
        """As the admin: the project topics (prefix "") with their configs, and the ACLs and
        quotas of every principal (idempotent)."""
        admin, roles, operators = self.admin_login(), self.roles(), served_operators()

        async def secure() -> list[str]:
            partitions = topic_partitions()
            created = await ensure_project_topics(bootstrap, admin, "", partitions, operators)
            await grant_project_acls(bootstrap, admin, principals=roles, operators=operators)
            async with AdminSession(bootstrap, admin) as session:
                await session.set_user_quotas(project_quotas(roles, gateway_quota()))
            return created

        created = run_async(secure())
        if created:
            progress(f"created Kafka topics {', '.join(created)}")
        progress(f"Kafka ACLs granted to {', '.join(roles)} (everything else is denied)")

    async def secure_run(
        self, bootstrap: str, prefix: str, partitions: int, operators: Sequence[str]
    ) -> None:
        """As the admin: a run's project topics (``<prefix><topic>``, every operator's) with
        their configs, each operator's gateway (``gateway-<operator>``, :meth:`admit`ted with
        its quota), and the ACL matrix for those topics and the consumer groups under the same
        prefix (what ``Settings.consumer_group`` names)."""
        admin = self.admin_login()
        gateways = {f"gateway-{operator}": "gateway" for operator in operators if operator != HOUSE}
        if gateways:
            await self.admit(bootstrap, gateways, operators, acls=False)
        await ensure_project_topics(bootstrap, admin, prefix, partitions, operators)
        await grant_project_acls(bootstrap, admin, prefix, prefix, operators=tuple(operators))

    def add(self, bootstrap: str, name: str, role: str | None = None) -> KafkaAuth:
        """Give ``name`` SCRAM credentials and ``role``'s ACLs (default: the role of that
        exact name, :func:`role_of`) on the broker at ``bootstrap``; idempotent. Returns its
        login."""
        if name == ADMIN:
            raise InfraError(f"{ADMIN!r} is the broker's super user, not a principal to add.")
        chosen = role or role_of(name, served_operators())
        if chosen is None or chosen not in ROLES:
            raise InfraError(
                f"no role for principal {name!r}" + (f" ({role!r} is not one)." if role else "."),
                f"give --role, one of {', '.join(ROLES)} (a name alone gives a role only when "
                "it is the role's own, or gateway-<operator> for an operator of PB_OPERATORS)",
            )
        if chosen == "gateway":
            try:
                gateway_operator(name)
            except ValueError as error:
                raise InfraError(f"{error}.", "name it gateway-<operator>") from None
        run_async(self.admit(bootstrap, {name: chosen}, served_operators(), acls=True))
        if name not in ROLES:
            state = load_state(self._state_file)
            state["extra_principals"] = {**state.get("extra_principals", {}), name: chosen}
            save_state(self._state_file, state)
        return self.login(name)
