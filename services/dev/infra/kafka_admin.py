"""Administering the local broker as its super user: ACLs, quotas, SCRAM users and project
topics.

:class:`AdminSession` sends the requests of ``kafka_protocol.py`` over one aiokafka
connection logged in as the admin. A user's SCRAM credential is sent already salted, as
Kafka's own ``kafka-configs --alter --add-config SCRAM-SHA-512=...`` does: a random 32-byte
salt and the salted password ``Hi(password, salt, i)`` of RFC 5802, which is PBKDF2 (RFC
8018) with HMAC-SHA-512 and a 64-byte output; the password itself never leaves this process.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.client import AIOKafkaClient
from aiokafka.errors import KafkaError, TopicAlreadyExistsError, for_code

from services.dev.infra.errors import InfraError
from services.dev.infra.kafka_login import KafkaLogin
from services.dev.infra.kafka_protocol import (
    AclFilter,
    AclOperation,
    AclPermission,
    AclRow,
    AlterClientQuotas,
    AlterUserScramCredentials,
    CreateAcls,
    DeleteAcls,
    DescribeAcls,
    PatternType,
    ResourceType,
    ScramMechanism,
)

SCRAM_ITERATIONS = 8192
"""Iterations of the salted SCRAM-SHA-512 password (Kafka accepts 4096-16384)."""


@dataclass(frozen=True, order=True)
class AclBinding:
    """One ALLOW (or DENY) rule: ``principal`` may ``operation`` on a resource pattern."""

    resource_type: ResourceType
    name: str
    pattern: PatternType
    principal: str  # "User:<name>"
    operation: AclOperation
    permission: AclPermission = AclPermission.ALLOW
    host: str = "*"

    def row(self) -> AclRow:
        return (
            int(self.resource_type),
            self.name,
            int(self.pattern),
            self.principal,
            self.host,
            int(self.operation),
            int(self.permission),
        )

    def __str__(self) -> str:
        return (
            f"{self.permission.name} {self.principal} {self.operation.name} "
            f"{self.resource_type.name} {self.pattern.name} {self.name!r}"
        )


def acl_filter(
    *,
    resource_type: ResourceType = ResourceType.ANY,
    name: str | None = None,
    pattern: PatternType = PatternType.ANY,
    principal: str | None = None,
) -> AclFilter:
    """A filter matching bindings on these fields (the others: any)."""
    return (
        int(resource_type),
        name,
        int(pattern),
        principal,
        None,
        int(AclOperation.ANY),
        int(AclPermission.ANY),
    )


def salted_password(password: str, salt: bytes, iterations: int = SCRAM_ITERATIONS) -> bytes:
    """SCRAM-SHA-512's ``SaltedPassword := Hi(password, salt, i)``: PBKDF2-HMAC-SHA-512."""
    return hashlib.pbkdf2_hmac("sha512", password.encode("utf-8"), salt, iterations)


def _failure(code: int, message: str | None) -> str:
    return f"{for_code(code).__name__} ({code}){': ' + message if message else ''}"


def _refused(what: str, results: Iterable[tuple[str, int, str | None]]) -> None:
    """InfraError naming each (user, error code, message) that failed, if any did."""
    failed = [f"{name}: {_failure(code, message)}" for name, code, message in results if code]
    if failed:
        raise InfraError(f"Kafka refused {what}:\n    " + "\n    ".join(failed))


class AdminSession:
    """One admin connection to the broker at ``bootstrap`` (use ``async with``)."""

    def __init__(self, bootstrap: str, login: KafkaLogin, timeout: float = 30.0) -> None:
        self.bootstrap = bootstrap
        self.login = login
        self.timeout = timeout
        self._client: Any = None

    async def __aenter__(self) -> AdminSession:
        client = AIOKafkaClient(
            bootstrap_servers=self.bootstrap,
            client_id="pb-infra-admin",
            request_timeout_ms=int(self.timeout * 1000),
            **self.login.client_options(),
        )
        try:
            await asyncio.wait_for(client.bootstrap(), self.timeout)
        except (KafkaError, OSError, TimeoutError) as error:
            await client.close()
            raise InfraError(
                f"cannot log in to Kafka at {self.bootstrap} as {self.login.username}: {error!r}",
                "is the broker up (`punto-banco infra status`) and started with "
                "PB_KAFKA_AUTH=scram?",
            ) from None
        self._client = client
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def _send(self, request: Any) -> Any:
        """Send to a broker (it forwards admin requests to the controller); retry transient
        errors (a broker that has just started) for up to ``timeout`` seconds."""
        client = self._client
        if client is None:
            raise RuntimeError("admin session not open")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while True:
            node = next(iter(sorted(b.nodeId for b in client.cluster.brokers())), None)
            try:
                if node is None:
                    await client.force_metadata_update()
                    raise TimeoutError("no broker in the cluster metadata yet")
                return await client.send(node, request)
            except (KafkaError, OSError, TimeoutError) as error:
                retriable = isinstance(error, OSError | TimeoutError) or getattr(
                    error, "retriable", False
                )
                if not retriable or loop.time() > deadline:
                    raise
                await asyncio.sleep(0.5)

    async def create_acls(self, bindings: Sequence[AclBinding], wait: float = 10.0) -> None:
        """Create ``bindings`` (one that exists already is left as it is), then wait up to
        ``wait`` seconds until the broker applies them (its authorizer learns them from the
        metadata log a moment after the controller accepted them)."""
        if not bindings:
            return
        response = await self._send(CreateAcls([binding.row() for binding in bindings]))
        failed = [
            f"{binding}: {_failure(code, message)}"
            for binding, (code, message, _tags) in zip(bindings, response.results, strict=True)
            if code
        ]
        if failed:
            raise InfraError(
                "Kafka refused ACLs:\n    " + "\n    ".join(failed),
                "check that the admin is a super user (super.users) of this broker",
            )
        if wait:
            await self._until_applied(set(bindings), wait)

    async def _until_applied(self, wanted: set[AclBinding], wait: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while not wanted <= set(await self.describe_acls(acl_filter())):
            if loop.time() > deadline:
                raise InfraError(
                    f"Kafka accepted {len(wanted)} ACLs but does not apply them after {wait} s.",
                    "look at the broker's log (logs/server.log under its folder)",
                )
            await asyncio.sleep(0.1)

    async def describe_acls(self, acl_filter: AclFilter) -> list[AclBinding]:
        """The bindings matching ``acl_filter`` (see :func:`acl_filter`)."""
        response = await self._send(DescribeAcls(acl_filter))
        if response.error_code:
            raise InfraError(
                f"Kafka cannot list ACLs: {_failure(response.error_code, response.error_message)}"
            )
        return sorted(
            AclBinding(
                ResourceType(kind),
                name,
                PatternType(pattern),
                principal,
                AclOperation(operation),
                AclPermission(permission),
                host,
            )
            for kind, name, pattern, acls, _tags in response.resources
            for principal, host, operation, permission, _acl_tags in acls
        )

    async def delete_acls(self, filters: Sequence[AclFilter]) -> int:
        """Delete the bindings matching any of ``filters``; how many were deleted."""
        if not filters:
            return 0
        response = await self._send(DeleteAcls(filters))
        deleted = 0
        for code, message, matching, _tags in response.filter_results:
            if code:
                raise InfraError(f"Kafka cannot delete ACLs: {_failure(code, message)}")
            deleted += len(matching)
        return deleted

    async def set_user_quotas(self, quotas: Mapping[str, Mapping[str, float | None]]) -> None:
        """Per user principal, set each quota key to its value (None: remove that quota)."""
        entries = [("user", user, list(ops.items())) for user, ops in quotas.items() if ops]
        if not entries:
            return
        response = await self._send(AlterClientQuotas(entries))
        _refused(
            "quotas", ((entity[0][1], code, text) for code, text, entity, _ in response.entries)
        )

    async def upsert_scram_users(
        self, passwords: Mapping[str, str], iterations: int = SCRAM_ITERATIONS
    ) -> None:
        """Create or replace each user's SCRAM-SHA-512 credential with its password."""
        upsertions = []
        for name, password in passwords.items():
            salt = os.urandom(32)
            upsertions.append(
                (
                    name,
                    int(ScramMechanism.SCRAM_SHA_512),
                    iterations,
                    salt,
                    salted_password(password, salt, iterations),
                )
            )
        response = await self._send(AlterUserScramCredentials(upsertions))
        _refused("SCRAM credentials", (row[:3] for row in response.results))


async def create_topics(
    bootstrap: str,
    login: KafkaLogin,
    topics: Iterable[str],
    configs: Mapping[str, Mapping[str, str]],
    partitions: int = 3,
    timeout: float = 30.0,
) -> list[str]:
    """Create those of ``topics`` that do not exist, ``configs[name]`` as their configs;
    returns the ones created."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap,
        client_id="pb-infra-admin",
        request_timeout_ms=int(timeout * 1000),
        **login.client_options(),
    )
    await asyncio.wait_for(admin.start(), timeout)
    try:
        existing = set(await admin.list_topics())
        missing = [name for name in dict.fromkeys(topics) if name not in existing]
        if not missing:
            return []
        response = await admin.create_topics(
            [
                NewTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=1,
                    topic_configs=dict(configs.get(name, {})),
                )
                for name in missing
            ]
        )
        for name, code, *rest in response.topic_errors:
            if code and code != TopicAlreadyExistsError.errno:
                reason = _failure(code, rest[0] if rest else None)
                raise InfraError(f"Kafka refused to create topic {name}: {reason}")
        return missing
    finally:
        await admin.close()
