"""How the tests log in to this session's broker: services as their own principals, the tests'
own set-up and probes as the admin.

``tests/conftest.py`` records the session's broker here (:func:`use`) once it has found it: an
authenticating local broker gives each principal's password from its folder
(``KafkaLogins``), a PLAINTEXT one (the shared broker of ``source /tmp/infra.env``, a Docker
container) nobody's. Never an authenticating broker without credentials: a broker whose
settings say SASL but whose folder the session cannot find fails the session.

A test's run prefix (``settings_for``'s topic prefix) is *secured* before a service connects as
its principal: the admin creates the project topics under it and grants the ACL matrix for
them (and for the consumer groups under the same prefix); the session revokes every grant at
its end (:func:`revoke_all`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

from contracts import HOUSE
from services.dev.infra.kafka_acls import ROLES
from services.dev.infra.kafka_clients import ADMIN, KAFKA_HOME, KafkaLogins
from services.dev.infra.processes import run_async
from services.shared.platform.settings import KafkaAuth

_session: dict[str, Any] = {"bootstrap": None, "logins": KafkaLogins()}
_secured: set[tuple[str, ...]] = set()  # (prefix, *operators)


def use(bootstrap: str, logins: KafkaLogins) -> None:
    """This session's broker and its logins; child processes (``up``, ``serve``) find the
    broker's principals through ``PB_KAFKA_HOME``."""
    _session.update(bootstrap=bootstrap, logins=logins)
    if logins.home is not None:
        os.environ[KAFKA_HOME] = str(logins.home)


def logins() -> KafkaLogins:
    current: KafkaLogins = _session["logins"]
    return current


def authenticated() -> bool:
    return logins().authenticated


def principal_of(service: str) -> str:
    """The principal a process named ``service`` logs in as: its own when the matrix has one
    (shoe, dealing, settlement...), else the admin (a test's own ``counter`` service)."""
    return service if service in ROLES else ADMIN


def auth(principal: str = ADMIN) -> KafkaAuth:
    return logins().auth(principal)


def options(principal: str = ADMIN) -> dict[str, Any]:
    """aiokafka keyword arguments of ``principal`` (default: the admin, for test set-up)."""
    return logins().options(principal)


def env(principal: str) -> dict[str, str]:
    """``principal``'s ``KAFKA_SECURITY_PROTOCOL`` / ``KAFKA_SASL_*`` for a child process."""
    return logins().env(principal)


def secure(prefix: str, partitions: int = 3, operators: Sequence[str] = (HOUSE,)) -> None:
    """Make the project topics under ``prefix`` (every operator's) and grant the matrix for
    them, the operators' gateways included (once per prefix and operators)."""
    bootstrap = _session["bootstrap"]
    if (prefix, *operators) in _secured or bootstrap is None or logins().admin_login() is None:
        return
    run_async(logins().secure_run(bootstrap, prefix, partitions, operators=operators))
    _secured.add((prefix, *operators))


def revoke_all() -> None:
    """Revoke every grant of this session (best effort: never fails a run)."""
    bootstrap = _session["bootstrap"]
    for prefix, *operators in sorted(_secured):
        with contextlib.suppress(Exception):
            run_async(logins().end_run(bootstrap, prefix, operators=operators))
    _secured.clear()
