"""How the developer tools' Kafka clients log in: each as its own principal.

`punto-banco up`, the bench and the tests start the services and talk to them as a gateway,
an operator, a supervisor and a reader. On the local authenticating broker each of them logs
in as its own principal with the password in the broker's folder (``BrokerPrincipals``),
the run's topics being made and granted by the admin (:meth:`KafkaLogins.secure_run`). On a
broker given from outside, every client uses the one login of the environment
(``KAFKA_SECURITY_PROTOCOL``, ``KAFKA_SASL_*``): the tools cannot know other principals'
passwords. Without authentication, everyone is anonymous (PLAINTEXT).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts import HOUSE
from services.dev.infra import common
from services.dev.infra.kafka_auth import ADMIN as ADMIN  # what the tools log in as to set up
from services.shared.platform.settings import KafkaAuth, Settings

KAFKA_HOME = "PB_KAFKA_HOME"
"""The local broker's folder whose principals the developer tools log in as, when
``KAFKA_BOOTSTRAP_SERVERS`` names it (default ``<PB_DATA_DIR>/kafka``; the tests set it)."""

GATEWAY, OPERATOR, SUPERVISOR = "gateway", "operator", "supervisor"
AUDITOR, DASHBOARD = "auditor", "dashboard"

COMMAND_SENDERS: Mapping[str, str] = {"PlaceBet": GATEWAY, "VoidCoup": SUPERVISOR}
"""The principal that sends a command type (the others: ``operator``)."""


def sender_of(message_type: str) -> str:
    """Who sends a command of this type: the gateway bets, a supervisor voids, an operator
    runs the table."""
    return COMMAND_SENDERS.get(message_type, OPERATOR)


@dataclass(frozen=True)
class KafkaLogins:
    """Per principal, how a client logs in (see the module docstring).

    ``home``: the local authenticating broker's folder (each principal its own password);
    else ``shared`` for everyone (PLAINTEXT by default).
    """

    home: Path | None = None
    shared: KafkaAuth = field(default_factory=KafkaAuth)

    @classmethod
    def of_broker(cls, broker: Any) -> KafkaLogins:
        """The logins of a local ``KafkaBroker``: its principals when it authenticates."""
        from services.dev.infra.kafka_auth import AUTH_SCRAM

        return cls(home=broker.home) if broker.running_auth() == AUTH_SCRAM else cls()

    @classmethod
    def for_bootstrap(cls, bootstrap: str, *homes: Path) -> KafkaLogins:
        """The logins for the broker at ``bootstrap``: the principals of a local broker that
        is that one (in ``homes``, ``PB_KAFKA_HOME``, ``<PB_DATA_DIR>/kafka``) and
        authenticates, else the environment's one login (``KAFKA_SECURITY_PROTOCOL``,
        ``KAFKA_SASL_*``; SettingsError if incomplete)."""
        from services.dev.infra.kafka import KafkaBroker

        named = os.environ.get(KAFKA_HOME, "").strip()
        candidates = [*homes, *([Path(named)] if named else []), common.data_dir() / "kafka"]
        for home in dict.fromkeys(path.resolve() for path in candidates):
            broker = KafkaBroker(home=home)
            if broker.bootstrap() == bootstrap and broker.pid() is not None:
                return cls.of_broker(broker)
        return cls(shared=Settings.from_env("infra").kafka_auth)

    @property
    def authenticated(self) -> bool:
        return self.home is not None or self.shared.sasl

    def auth(self, principal: str) -> KafkaAuth:
        """How ``principal`` (``admin`` for the run's set-up) logs in."""
        if self.home is None:
            return self.shared
        from services.dev.infra.kafka_principals import BrokerPrincipals

        return BrokerPrincipals(self.home).login(principal)

    def options(self, principal: str) -> dict[str, Any]:
        """aiokafka keyword arguments of ``principal``'s login (none for PLAINTEXT)."""
        return self.auth(principal).client_options()

    def env(self, principal: str) -> dict[str, str]:
        """``principal``'s ``KAFKA_SECURITY_PROTOCOL`` and ``KAFKA_SASL_*`` for a child process."""
        return self.auth(principal).env()

    def admin_login(self) -> KafkaAuth | None:
        """The local broker's admin (None without one)."""
        if self.home is None:
            return None
        from services.dev.infra.kafka_principals import BrokerPrincipals

        return BrokerPrincipals(self.home).admin_login()

    async def secure_run(
        self,
        bootstrap: str,
        topic_prefix: str,
        partitions: int = 3,
        operators: Sequence[str] = (HOUSE,),
    ) -> bool:
        """:meth:`BrokerPrincipals.secure_run` on the local broker; False (nothing done)
        without a local admin."""
        if self.home is None or self.admin_login() is None:
            return False
        from services.dev.infra.kafka_principals import BrokerPrincipals

        await BrokerPrincipals(self.home).secure_run(bootstrap, topic_prefix, partitions, operators)
        return True

    @contextlib.contextmanager
    def unthrottled(self, bootstrap: str, principal: str = GATEWAY) -> Iterator[None]:
        """``principal`` without its quota meanwhile, given back after (the bench measures
        capacity, not fairness); nothing without a local admin."""
        admin = self.admin_login()
        if admin is None:
            yield
            return
        from services.dev.infra.kafka_acls import Quota
        from services.dev.infra.kafka_admin import AdminSession
        from services.dev.infra.kafka_principals import gateway_quota
        from services.dev.infra.processes import run_async

        async def give(quota: Quota) -> None:
            async with AdminSession(bootstrap, admin) as session:
                await session.set_user_quotas({principal: quota.config()})

        run_async(give(Quota(producer_byte_rate=0, request_percentage=0)))
        try:
            yield
        finally:
            run_async(give(gateway_quota()))

    async def end_run(
        self, bootstrap: str, topic_prefix: str, operators: Sequence[str] = (HOUSE,)
    ) -> None:
        """Revoke what :meth:`secure_run` granted (a run's clean-up; its topics are deleted
        apart)."""
        admin = self.admin_login()
        if admin is None:
            return
        from services.dev.infra.kafka_acls import revoke_project_acls

        await revoke_project_acls(
            bootstrap, admin, topic_prefix, topic_prefix, operators=tuple(operators)
        )
