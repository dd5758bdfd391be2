"""Kafka topic ids: the Metadata request v12 that aiokafka 0.14 does not define.

A topic deleted and created again under the same name gets a new topic id (a random
UUID the broker assigns at creation), and its offsets start again at 0. The consumer puts
the id into its offset-based tracking names (``consumer/intake.py``), so the new topic's first
offsets are not taken for ones already handled.

aiokafka 0.14 speaks Metadata up to v5, which has no topic ids; this module speaks v12
(Kafka 3.1 or newer; the project runs 4.3). v9 and later are "flexible" versions
(KIP-482): compact strings and arrays (lengths as unsigned varints, plus one) and a
tagged-field section after every structure and after the request/response header. The
structures below follow Kafka's ``MetadataRequest.json`` / ``MetadataResponse.json`` field
by field, with aiokafka's own protocol types (as ``aiokafka.protocol.admin`` defines its
flexible requests); aiokafka's connection checks that the broker speaks v12 and picks the
flexible request and response headers from ``FLEXIBLE_VERSION``.

A topic id is Kafka's ``Uuid``: two 64-bit integers (most significant first, 16 bytes on the
wire). It is shown as Kafka shows it (``kafka-topics --describe``): the 16 bytes in URL-safe
base64 without padding, e.g. ``vrNq0rKgRwyQ1l6GPgcVBQ``.
"""

from __future__ import annotations

import asyncio
import base64
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from aiokafka.client import AIOKafkaClient
from aiokafka.errors import IncompatibleBrokerVersion, KafkaError
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Int64,
    Schema,
    TaggedFields,
)

from services.shared.platform.kafka import client_options
from services.shared.platform.settings import Settings

METADATA = 3
"""Kafka's API key of Metadata."""

NO_TOPIC_ID = (0, 0)
"""The id a broker answers for a topic it has no id for (the "zero" UUID)."""

Uuid = Schema(("most_significant_bits", Int64), ("least_significant_bits", Int64))
"""Kafka's ``uuid`` field type (its ``Uuid`` class): two 64-bit integers, 16 bytes."""

_STRING = CompactString("utf-8")
_BROKERS = CompactArray(
    ("node_id", Int32),
    ("host", _STRING),
    ("port", Int32),
    ("rack", _STRING),
    ("tags", TaggedFields),
)
_PARTITIONS = CompactArray(
    ("error_code", Int16),
    ("partition_index", Int32),
    ("leader_id", Int32),
    ("leader_epoch", Int32),
    ("replica_nodes", CompactArray(Int32)),
    ("isr_nodes", CompactArray(Int32)),
    ("offline_replicas", CompactArray(Int32)),
    ("tags", TaggedFields),
)
_TOPICS = CompactArray(
    ("error_code", Int16),
    ("name", _STRING),
    ("topic_id", Uuid),
    ("is_internal", Boolean),
    ("partitions", _PARTITIONS),
    ("topic_authorized_operations", Int32),
    ("tags", TaggedFields),
)
_REQUESTED = CompactArray(("topic_id", Uuid), ("name", _STRING), ("tags", TaggedFields))


class MetadataResponse_v12(Response):  # type: ignore[misc]  # Kafka's names
    API_KEY = METADATA
    API_VERSION = 12
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("brokers", _BROKERS),
        ("cluster_id", _STRING),
        ("controller_id", Int32),
        ("topics", _TOPICS),
        ("tags", TaggedFields),
    )


class MetadataRequest_v12(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = METADATA
    API_VERSION = 12
    RESPONSE_TYPE = MetadataResponse_v12
    SCHEMA = Schema(
        ("topics", _REQUESTED),
        ("allow_auto_topic_creation", Boolean),
        ("include_topic_authorized_operations", Boolean),
        ("tags", TaggedFields),
    )


class TopicIdsRequest(Request[MetadataRequest_v12]):  # type: ignore[misc]
    """Metadata of some topics by name, with their topic ids (v12).

    Never creates a topic (``allow_auto_topic_creation`` false).
    """

    API_KEY = METADATA

    def __init__(self, topics: Iterable[str]) -> None:
        self._topics: list[tuple[tuple[int, int], str, dict[int, bytes]]] = [
            (NO_TOPIC_ID, name, {}) for name in topics
        ]

    def build(self, request_struct_class: type[MetadataRequest_v12]) -> MetadataRequest_v12:
        return request_struct_class(self._topics, False, False, {})


def topic_id_text(uuid: tuple[int, int]) -> str:
    """A topic id as Kafka prints it: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(struct.pack(">qq", *uuid)).decode("ascii").rstrip("=")


@dataclass(frozen=True, slots=True)
class ClusterTopics:
    """What a Metadata answer says about the cluster and the topics asked for."""

    cluster_id: str | None
    topic_ids: dict[str, str]  # topic name -> topic id (topics that exist and have one)


def read_answer(response: Any) -> ClusterTopics:
    """The cluster id and topic ids in a Metadata v12 response."""
    ids: dict[str, str] = {}
    for topic in response.topics:
        _error, name, uuid, *_rest = topic
        if name and uuid != NO_TOPIC_ID:  # an unknown topic comes back with no id
            ids[name] = topic_id_text(uuid)
    return ClusterTopics(response.cluster_id or None, ids)


class TopicIdsUnavailable(RuntimeError):
    """The broker cannot say a topic's id (too old, or the topic does not exist)."""


class TopicIdReader:
    """Asks the cluster for topic ids (and its cluster id) over its own connection."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._client: Any = None

    async def start(self) -> None:
        client = AIOKafkaClient(
            **client_options(self.settings),
            client_id=f"pb-{self.settings.service}-topic-ids",
        )
        await client.bootstrap()
        self._client = client

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def describe(self, topics: Iterable[str]) -> ClusterTopics:
        """The cluster id and the ids of ``topics`` (those that exist)."""
        client = self._client
        if client is None:
            raise RuntimeError("topic id reader not started")
        names = sorted(set(topics))
        if not client.cluster.brokers():
            await client.force_metadata_update()
        last_error: Exception | None = None
        for node in [broker.nodeId for broker in client.cluster.brokers()]:
            try:
                return read_answer(await client.send(node, TopicIdsRequest(names)))
            except (IncompatibleBrokerVersion, NotImplementedError) as error:
                raise TopicIdsUnavailable(
                    f"Kafka at {self.settings.kafka_bootstrap_servers} does not give topic ids "
                    f"(Metadata v12, Kafka 3.1 or newer, is needed): {error}"
                ) from error
            except (KafkaError, OSError, TimeoutError) as error:
                last_error = error
        raise TopicIdsUnavailable(
            f"no broker of {self.settings.kafka_bootstrap_servers} answered a metadata "
            f"request: {last_error!r}"
        )

    async def topic_ids(self, topics: Iterable[str], wait: float = 5.0) -> dict[str, str]:
        """The ids of ``topics``; :class:`TopicIdsUnavailable` if one has none.

        A topic created a moment ago may be unknown to the broker answering for a short
        while: waits up to ``wait`` seconds for it.
        """
        names = sorted(set(topics))
        deadline = asyncio.get_running_loop().time() + wait
        while True:
            found = (await self.describe(names)).topic_ids
            missing = [name for name in names if name not in found]
            if not missing:
                return {name: found[name] for name in names}
            if asyncio.get_running_loop().time() > deadline:
                raise TopicIdsUnavailable(
                    f"Kafka topics {', '.join(missing)} have no topic id (do they exist?)"
                )
            await asyncio.sleep(0.1)
