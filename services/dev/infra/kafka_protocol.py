"""Kafka Admin API requests aiokafka 0.14 does not define in a version Kafka 4 accepts.

CreateAcls (30), DescribeAcls (29) and DeleteAcls (31) in versions 2 and 3,
AlterUserScramCredentials (51) version 0 and AlterClientQuotas (49) version 1. aiokafka has the
ACL requests only in versions 0-1 (one ACL per request, non-nullable filters) and nothing for
SCRAM credentials or quotas. Every version
here is "flexible" (KIP-482): compact strings, bytes and arrays (length + 1 as an unsigned
varint; 0 is null) and a tagged-field section after each structure and after the request
and response headers (``FLEXIBLE_VERSION``). The structures follow Kafka's message
definitions (``clients/src/main/resources/common/message/*.json``) field by field; ACL
versions 2 and 3 have the same fields (3 only admits the USER resource type). aiokafka's
connection negotiates the highest version both sides know, as for
``services/shared/platform/consumer/topic_ids.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Any, TypeAlias

from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactBytes,
    CompactString,
    Float64,
    Int8,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
ALTER_USER_SCRAM_CREDENTIALS = 51
ALTER_CLIENT_QUOTAS = 49


class ResourceType(IntEnum):
    """Kafka's ``ResourceType`` codes."""

    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    """Kafka's ``PatternType`` codes (MATCH only in filters)."""

    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    """Kafka's ``AclOperation`` codes."""

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
    """Kafka's ``AclPermissionType`` codes."""

    ANY = 1
    DENY = 2
    ALLOW = 3


class ScramMechanism(IntEnum):
    """Kafka's ``ScramMechanism`` codes."""

    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2


_STRING = CompactString("utf-8")

# ---- CreateAcls v2-v3 ----------------------------------------------------------------


class CreateAclsResponse_v2(Response):  # type: ignore[misc]  # Kafka's names
    API_KEY = CREATE_ACLS
    API_VERSION = 2
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "results",
            CompactArray(("error_code", Int16), ("error_message", _STRING), ("tags", TaggedFields)),
        ),
        ("tags", TaggedFields),
    )


class CreateAclsResponse_v3(Response):  # type: ignore[misc]
    API_KEY = CREATE_ACLS
    API_VERSION = 3
    SCHEMA = CreateAclsResponse_v2.SCHEMA


_ACL_CREATIONS = CompactArray(
    ("resource_type", Int8),
    ("resource_name", _STRING),
    ("resource_pattern_type", Int8),
    ("principal", _STRING),
    ("host", _STRING),
    ("operation", Int8),
    ("permission_type", Int8),
    ("tags", TaggedFields),
)


class CreateAclsRequest_v2(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = CREATE_ACLS
    API_VERSION = 2
    RESPONSE_TYPE = CreateAclsResponse_v2
    SCHEMA = Schema(("creations", _ACL_CREATIONS), ("tags", TaggedFields))


class CreateAclsRequest_v3(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = CREATE_ACLS
    API_VERSION = 3
    RESPONSE_TYPE = CreateAclsResponse_v3
    SCHEMA = CreateAclsRequest_v2.SCHEMA


AclRow: TypeAlias = tuple[int, str, int, str, str, int, int]
"""resource type, resource name, pattern type, principal, host, operation, permission."""

CreateAclsStruct: TypeAlias = CreateAclsRequest_v2 | CreateAclsRequest_v3


class CreateAcls(Request[CreateAclsStruct]):  # type: ignore[misc]
    """Create ACL bindings (one result per binding, in order)."""

    API_KEY = CREATE_ACLS

    def __init__(self, bindings: Sequence[AclRow]) -> None:
        self._rows: list[tuple[Any, ...]] = [(*row, {}) for row in bindings]

    def build(self, request_struct_class: type[CreateAclsStruct]) -> CreateAclsStruct:
        return request_struct_class(self._rows, {})


# ---- DescribeAcls v2-v3 --------------------------------------------------------------

_DESCRIBED_ACLS = CompactArray(
    ("principal", _STRING),
    ("host", _STRING),
    ("operation", Int8),
    ("permission_type", Int8),
    ("tags", TaggedFields),
)


class DescribeAclsResponse_v2(Response):  # type: ignore[misc]
    API_KEY = DESCRIBE_ACLS
    API_VERSION = 2
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("error_message", _STRING),
        (
            "resources",
            CompactArray(
                ("resource_type", Int8),
                ("resource_name", _STRING),
                ("pattern_type", Int8),
                ("acls", _DESCRIBED_ACLS),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class DescribeAclsResponse_v3(Response):  # type: ignore[misc]
    API_KEY = DESCRIBE_ACLS
    API_VERSION = 3
    SCHEMA = DescribeAclsResponse_v2.SCHEMA


_FILTER_FIELDS: tuple[tuple[str, Any], ...] = (
    ("resource_type_filter", Int8),
    ("resource_name_filter", _STRING),  # null: any name
    ("pattern_type_filter", Int8),
    ("principal_filter", _STRING),  # null: any principal
    ("host_filter", _STRING),  # null: any host
    ("operation", Int8),
    ("permission_type", Int8),
)


class DescribeAclsRequest_v2(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = DESCRIBE_ACLS
    API_VERSION = 2
    RESPONSE_TYPE = DescribeAclsResponse_v2
    SCHEMA = Schema(*_FILTER_FIELDS, ("tags", TaggedFields))


class DescribeAclsRequest_v3(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = DESCRIBE_ACLS
    API_VERSION = 3
    RESPONSE_TYPE = DescribeAclsResponse_v3
    SCHEMA = DescribeAclsRequest_v2.SCHEMA


AclFilter: TypeAlias = tuple[int, str | None, int, str | None, str | None, int, int]
"""resource type, name (None: any), pattern type, principal (None: any), host (None: any),
operation, permission: as :data:`AclRow`, with ANY codes and None as wildcards."""

DescribeAclsStruct: TypeAlias = DescribeAclsRequest_v2 | DescribeAclsRequest_v3


class DescribeAcls(Request[DescribeAclsStruct]):  # type: ignore[misc]
    """The ACL bindings matching one filter."""

    API_KEY = DESCRIBE_ACLS

    def __init__(self, acl_filter: AclFilter) -> None:
        self._filter = acl_filter

    def build(self, request_struct_class: type[DescribeAclsStruct]) -> DescribeAclsStruct:
        return request_struct_class(*self._filter, {})


# ---- DeleteAcls v2-v3 ----------------------------------------------------------------


class DeleteAclsResponse_v2(Response):  # type: ignore[misc]
    API_KEY = DELETE_ACLS
    API_VERSION = 2
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "filter_results",
            CompactArray(
                ("error_code", Int16),
                ("error_message", _STRING),
                (
                    "matching_acls",
                    CompactArray(
                        ("error_code", Int16),
                        ("error_message", _STRING),
                        ("resource_type", Int8),
                        ("resource_name", _STRING),
                        ("pattern_type", Int8),
                        ("principal", _STRING),
                        ("host", _STRING),
                        ("operation", Int8),
                        ("permission_type", Int8),
                        ("tags", TaggedFields),
                    ),
                ),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class DeleteAclsResponse_v3(Response):  # type: ignore[misc]
    API_KEY = DELETE_ACLS
    API_VERSION = 3
    SCHEMA = DeleteAclsResponse_v2.SCHEMA


class DeleteAclsRequest_v2(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = DELETE_ACLS
    API_VERSION = 2
    RESPONSE_TYPE = DeleteAclsResponse_v2
    SCHEMA = Schema(
        ("filters", CompactArray(*_FILTER_FIELDS, ("tags", TaggedFields))),
        ("tags", TaggedFields),
    )


class DeleteAclsRequest_v3(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = DELETE_ACLS
    API_VERSION = 3
    RESPONSE_TYPE = DeleteAclsResponse_v3
    SCHEMA = DeleteAclsRequest_v2.SCHEMA


DeleteAclsStruct: TypeAlias = DeleteAclsRequest_v2 | DeleteAclsRequest_v3


class DeleteAcls(Request[DeleteAclsStruct]):  # type: ignore[misc]
    """Delete the ACL bindings matching any of the filters."""

    API_KEY = DELETE_ACLS

    def __init__(self, filters: Sequence[AclFilter]) -> None:
        self._filters: list[tuple[Any, ...]] = [(*acl_filter, {}) for acl_filter in filters]

    def build(self, request_struct_class: type[DeleteAclsStruct]) -> DeleteAclsStruct:
        return request_struct_class(self._filters, {})


# ---- AlterUserScramCredentials v0 ----------------------------------------------------


class AlterUserScramCredentialsResponse_v0(Response):  # type: ignore[misc]
    API_KEY = ALTER_USER_SCRAM_CREDENTIALS
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "results",
            CompactArray(
                ("user", _STRING),
                ("error_code", Int16),
                ("error_message", _STRING),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class AlterUserScramCredentialsRequest_v0(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = ALTER_USER_SCRAM_CREDENTIALS
    API_VERSION = 0
    RESPONSE_TYPE = AlterUserScramCredentialsResponse_v0
    SCHEMA = Schema(
        (
            "deletions",
            CompactArray(("name", _STRING), ("mechanism", Int8), ("tags", TaggedFields)),
        ),
        (
            "upsertions",
            CompactArray(
                ("name", _STRING),
                ("mechanism", Int8),
                ("iterations", Int32),
                ("salt", CompactBytes),
                ("salted_password", CompactBytes),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


ScramUpsertion: TypeAlias = tuple[str, int, int, bytes, bytes]
"""user name, mechanism, iterations, salt, salted password."""


class AlterUserScramCredentials(Request[AlterUserScramCredentialsRequest_v0]):  # type: ignore[misc]
    """Insert or replace (and delete) users' SCRAM credentials."""

    API_KEY = ALTER_USER_SCRAM_CREDENTIALS

    def __init__(
        self, upsertions: Sequence[ScramUpsertion], deletions: Sequence[tuple[str, int]] = ()
    ) -> None:
        self._upsertions: list[tuple[Any, ...]] = [(*row, {}) for row in upsertions]
        self._deletions: list[tuple[Any, ...]] = [(*row, {}) for row in deletions]

    def build(
        self, request_struct_class: type[AlterUserScramCredentialsRequest_v0]
    ) -> AlterUserScramCredentialsRequest_v0:
        return request_struct_class(self._deletions, self._upsertions, {})


# ---- AlterClientQuotas v1 ------------------------------------------------------------

_QUOTA_ENTITY = CompactArray(
    ("entity_type", _STRING), ("entity_name", _STRING), ("tags", TaggedFields)
)


class AlterClientQuotasResponse_v1(Response):  # type: ignore[misc]
    API_KEY = ALTER_CLIENT_QUOTAS
    API_VERSION = 1
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "entries",
            CompactArray(
                ("error_code", Int16),
                ("error_message", _STRING),
                ("entity", _QUOTA_ENTITY),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class AlterClientQuotasRequest_v1(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = ALTER_CLIENT_QUOTAS
    API_VERSION = 1
    RESPONSE_TYPE = AlterClientQuotasResponse_v1
    SCHEMA = Schema(
        (
            "entries",
            CompactArray(
                ("entity", _QUOTA_ENTITY),
                (
                    "ops",
                    CompactArray(
                        ("key", _STRING),
                        ("value", Float64),
                        ("remove", Boolean),
                        ("tags", TaggedFields),
                    ),
                ),
                ("tags", TaggedFields),
            ),
        ),
        ("validate_only", Boolean),
        ("tags", TaggedFields),
    )


QuotaEntry: TypeAlias = tuple[str, str, Sequence[tuple[str, float | None]]]
"""entity type (``user``), entity name, and per quota key its value (None: remove it)."""


class AlterClientQuotas(Request[AlterClientQuotasRequest_v1]):  # type: ignore[misc]
    """Set or remove client quotas (one result per entry, in order)."""

    API_KEY = ALTER_CLIENT_QUOTAS

    def __init__(self, entries: Sequence[QuotaEntry]) -> None:
        self._entries: list[tuple[Any, ...]] = [
            (
                [(kind, name, {})],
                [(key, value or 0.0, value is None, {}) for key, value in ops],
                {},
            )
            for kind, name, ops in entries
        ]

    def build(
        self, request_struct_class: type[AlterClientQuotasRequest_v1]
    ) -> AlterClientQuotasRequest_v1:
        return request_struct_class(self._entries, False, {})
