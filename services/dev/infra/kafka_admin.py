"""Administering the local broker as its super user: ACLs, quotas, SCRAM users and project
topics.

:class:`AdminSession` sends Kafka's Admin API requests over one aiokafka connection logged in as
the admin. The ACL requests are aiokafka's own (``aiokafka.protocol.admin``, version 1, which
Kafka 4 still accepts), batched: one request for every binding or filter. aiokafka defines no
AlterUserScramCredentials (51) nor AlterClientQuotas (49): those two are declared below with its
protocol types, field by field from Kafka's message definitions
(``clients/src/main/resources/common/message/*.json``); SCRAM's version 0 is "flexible" (KIP-482:
compact strings, tagged fields). The runtime's one such request, Metadata v10+ for topic ids,
is ``services/shared/platform/topic_ids.py``.

A user's SCRAM credential is sent already salted, as Kafka's own ``kafka-configs --alter
--add-config SCRAM-SHA-512=...`` does: a random 32-byte salt and the salted password ``Hi(password,
salt, i)`` of RFC 5802, which is PBKDF2 (RFC 8018) with HMAC-SHA-512 and a 64-byte output; the
password itself never leaves this process.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from types import TracebackType
from typing import Any, TypeAlias

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.client import AIOKafkaClient
from aiokafka.errors import KafkaError, TopicAlreadyExistsError, for_code
from aiokafka.protocol.admin import CreateAclsRequest_v1, DeleteAclsRequest_v1, DescribeAclsRequest
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Array,
    Boolean,
    CompactArray,
    CompactBytes,
    CompactString,
    Float64,
    Int8,
    Int16,
    Int32,
    Schema,
    String,
    TaggedFields,
)

from services.dev.infra.common import InfraError
from services.shared.platform.settings import KafkaAuth

SCRAM_ITERATIONS = 8192
"""Iterations of the salted SCRAM-SHA-512 password (Kafka accepts 4096-16384)."""


class ResourceType(IntEnum):
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    ANY = 1
    MATCH = 2  # filters only
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class AclPermission(IntEnum):
    ANY = 1
    DENY = 2
    ALLOW = 3


AclFilter: TypeAlias = tuple[int, str | None, int, str | None, str | None, int, int]
"""resource type, name, pattern type, principal, host, operation, permission (an ACL's fields in
the order of the wire; ANY codes and None as wildcards)."""


class CreateAcls(Request[CreateAclsRequest_v1]):  # type: ignore[misc]
    """aiokafka's CreateAcls v1 with every binding in one request (its own takes one)."""

    API_KEY = 30

    def __init__(self, rows: Sequence[AclFilter]) -> None:
        self.rows = list(rows)

    def build(self, request_struct_class: type[CreateAclsRequest_v1]) -> CreateAclsRequest_v1:
        return request_struct_class(self.rows)


class DeleteAcls(Request[DeleteAclsRequest_v1]):  # type: ignore[misc]
    """aiokafka's DeleteAcls v1 with every filter in one request (its own takes one)."""

    API_KEY = 31

    def __init__(self, filters: Sequence[AclFilter]) -> None:
        self.filters = list(filters)

    def build(self, request_struct_class: type[DeleteAclsRequest_v1]) -> DeleteAclsRequest_v1:
        return request_struct_class(self.filters)


_COMPACT = CompactString("utf-8")


class AlterUserScramCredentialsResponse_v0(Response):  # type: ignore[misc]  # Kafka's names
    API_KEY = 51
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "results",
            CompactArray(
                ("user", _COMPACT),
                ("error_code", Int16),
                ("error_message", _COMPACT),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class AlterUserScramCredentialsRequest_v0(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 51
    API_VERSION = 0
    RESPONSE_TYPE = AlterUserScramCredentialsResponse_v0
    SCHEMA = Schema(
        (
            "deletions",
            CompactArray(("name", _COMPACT), ("mechanism", Int8), ("tags", TaggedFields)),
        ),
        (
            "upsertions",
            CompactArray(
                ("name", _COMPACT),
                ("mechanism", Int8),
                ("iterations", Int32),
                ("salt", CompactBytes),
                ("salted_password", CompactBytes),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class UpsertScramSha512(Request[AlterUserScramCredentialsRequest_v0]):  # type: ignore[misc]
    """Insert or replace users' SCRAM-SHA-512 credentials: (name, salt, salted password)."""

    API_KEY = 51

    def __init__(self, users: Sequence[tuple[str, bytes, bytes]]) -> None:
        self.rows: list[tuple[Any, ...]] = [
            (name, 2, SCRAM_ITERATIONS, salt, salted, {}) for name, salt, salted in users
        ]  # 2: SCRAM-SHA-512

    def build(
        self, request_struct_class: type[AlterUserScramCredentialsRequest_v0]
    ) -> AlterUserScramCredentialsRequest_v0:
        return request_struct_class([], self.rows, {})


_QUOTA_ENTITY = Array(("entity_type", String("utf-8")), ("entity_name", String("utf-8")))


class AlterClientQuotasResponse_v0(Response):  # type: ignore[misc]
    API_KEY = 49
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "entries",
            Array(
                ("error_code", Int16), ("error_message", String("utf-8")), ("entity", _QUOTA_ENTITY)
            ),
        ),
    )


class AlterClientQuotasRequest_v0(RequestStruct):  # type: ignore[misc]
    API_KEY = 49
    API_VERSION = 0
    RESPONSE_TYPE = AlterClientQuotasResponse_v0
    SCHEMA = Schema(
        (
            "entries",
            Array(
                ("entity", _QUOTA_ENTITY),
                ("ops", Array(("key", String("utf-8")), ("value", Float64), ("remove", Boolean))),
            ),
        ),
        ("validate_only", Boolean),
    )


class AlterUserQuotas(Request[AlterClientQuotasRequest_v0]):  # type: ignore[misc]
    """Per user, set each quota key to its value (None: remove that quota)."""

    API_KEY = 49

    def __init__(self, quotas: Mapping[str, Mapping[str, float | None]]) -> None:
        self.entries = [
            ([("user", user)], [(key, value or 0.0, value is None) for key, value in ops.items()])
            for user, ops in quotas.items()
        ]

    def build(
        self, request_struct_class: type[AlterClientQuotasRequest_v0]
    ) -> AlterClientQuotasRequest_v0:
        return request_struct_class(self.entries, False)


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

    def row(self) -> AclFilter:
        return (
            self.resource_type,
            self.name,
            self.pattern,
            self.principal,
            self.host,
            self.operation,
            self.permission,
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
    return (resource_type, name, pattern, principal, None, AclOperation.ANY, AclPermission.ANY)


def salted_password(password: str, salt: bytes, iterations: int = SCRAM_ITERATIONS) -> bytes:
    """SCRAM-SHA-512's ``SaltedPassword := Hi(password, salt, i)``: PBKDF2-HMAC-SHA-512."""
    return hashlib.pbkdf2_hmac("sha512", password.encode("utf-8"), salt, iterations)


def _failure(code: int, message: str | None) -> str:
    return f"{for_code(code).__name__} ({code}){': ' + message if message else ''}"


def _refused(what: str, results: Iterable[tuple[object, int, str | None]], fix: str = "") -> None:
    """InfraError naming each (what, error code, message) that failed, if any did."""
    failed = [
        f"{name}: {_failure(code, message)}" if name else _failure(code, message)
        for name, code, message in results
        if code
    ]
    if failed:
        raise InfraError(f"Kafka refused {what}:\n    " + "\n    ".join(failed), fix)


class AdminSession:
    """One admin connection to the broker at ``bootstrap`` (use ``async with``)."""

    def __init__(self, bootstrap: str, login: KafkaAuth, timeout: float = 30.0) -> None:
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
        _refused(
            "ACLs",
            (
                (b, code, text)
                for b, (code, text) in zip(bindings, response.creation_responses, strict=True)
            ),
            "check that the admin is a super user (super.users) of this broker",
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while wait and not set(bindings) <= set(await self.describe_acls(acl_filter())):
            if loop.time() > deadline:
                raise InfraError(
                    f"Kafka accepted {len(bindings)} ACLs but does not apply them after {wait} s.",
                    "look at the broker's log (logs/server.log under its folder)",
                )
            await asyncio.sleep(0.1)

    async def describe_acls(self, acl_filter: AclFilter) -> list[AclBinding]:
        """The bindings matching ``acl_filter`` (see :func:`acl_filter`)."""
        response = await self._send(DescribeAclsRequest(*acl_filter))
        _refused("to list ACLs", [("", response.error_code, response.error_message)])
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
            for kind, name, pattern, acls in response.resources
            for principal, host, operation, permission in acls
        )

    async def delete_acls(self, filters: Sequence[AclFilter]) -> int:
        """Delete the bindings matching any of ``filters``; how many were deleted."""
        if not filters:
            return 0
        response = await self._send(DeleteAcls(filters))
        results = response.filter_responses
        _refused("to delete ACLs", (("", code, text) for code, text, _ in results))
        return sum(len(matching) for _code, _text, matching in results)

    async def set_user_quotas(self, quotas: Mapping[str, Mapping[str, float | None]]) -> None:
        """Per user principal, set each quota key to its value (None: remove that quota)."""
        chosen = {user: ops for user, ops in quotas.items() if ops}
        if chosen:
            response = await self._send(AlterUserQuotas(chosen))
            _refused("quotas", ((ent[0][1], code, text) for code, text, ent in response.entries))

    async def upsert_scram_users(self, passwords: Mapping[str, str]) -> None:
        """Create or replace each user's SCRAM-SHA-512 credential with its password."""
        salts = {name: os.urandom(32) for name in passwords}
        users = [
            (name, salt, salted_password(passwords[name], salt)) for name, salt in salts.items()
        ]
        response = await self._send(UpsertScramSha512(users))
        _refused("SCRAM credentials", (row[:3] for row in response.results))


async def broker_lists_itself(bootstrap: str, login: KafkaAuth | None) -> bool:
    """True when the broker accepts ``login`` (None: PLAINTEXT) and answers a metadata request
    naming itself."""
    options = login.client_options() if login else {}
    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=5000, **options)
    try:
        await client.bootstrap()
        return bool(client.cluster.brokers())
    except Exception:
        return False
    finally:
        await client.close()


async def create_topics(
    bootstrap: str,
    login: KafkaAuth,
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
                NewTopic(name, partitions, 1, topic_configs=dict(configs.get(name, {})))
                for name in missing
            ]
        )
        _refused(
            "to create topics",
            (
                (
                    name,
                    0 if code == TopicAlreadyExistsError.errno else code,
                    rest[0] if rest else None,
                )
                for name, code, *rest in response.topic_errors
            ),
        )
        return missing
    finally:
        await admin.close()
