"""Kafka clients configured the same way by every part of the platform, and topic creation."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from contracts import TOPIC_MESSAGES
from services.platform.settings import Settings

log = logging.getLogger(__name__)

SOURCE_HEADER = "pb-source"
NOTIFICATION_HEADER = "pb-notification-id"
INDEX_HEADER = "pb-message-index"

PROJECT_TOPICS: tuple[str, ...] = tuple(TOPIC_MESSAGES)
"""Every logical topic of the project (commands, events, dead letters)."""


def idempotent_producer(settings: Settings, role: str) -> AIOKafkaProducer:
    """An idempotent producer (acks=all): retries never duplicate or reorder within a partition."""
    return AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap_servers,
        client_id=f"pb-{settings.service}-{role}",
        enable_idempotence=True,
        acks="all",
        linger_ms=2,
        max_batch_size=256 * 1024,
        request_timeout_ms=30_000,
    )


async def ensure_topics(settings: Settings, topics: Iterable[str] = PROJECT_TOPICS) -> list[str]:
    """Create the (prefixed) project topics that do not exist yet; returns the ones created."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=settings.kafka_bootstrap_servers,
        client_id=f"pb-{settings.service}-admin",
    )
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted = [settings.topic(t) for t in topics]
        missing = [t for t in dict.fromkeys(wanted) if t not in existing]
        if not missing:
            return []
        response = await admin.create_topics(
            [
                NewTopic(
                    name=t,
                    num_partitions=settings.topic_partitions,
                    replication_factor=settings.topic_replication_factor,
                )
                for t in missing
            ]
        )
        for name, code, *rest in response.topic_errors:
            # 36 = TOPIC_ALREADY_EXISTS: created concurrently by another service.
            if code not in (0, TopicAlreadyExistsError.errno):
                message = rest[0] if rest else ""
                raise RuntimeError(f"cannot create Kafka topic {name}: error {code} {message}")
        log.info("created topics %s", ", ".join(missing))
        return missing
    finally:
        await admin.close()
