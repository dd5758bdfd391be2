"""The system's Kafka interface as an AsyncAPI 3.0 document, built with FastStream.

The services consume and publish with plain aiokafka (see ``consumer.py`` for
why), but FastStream still describes them: a documentation-only ``KafkaBroker``
declares, per service, a subscriber for each topic it consumes and a publisher
for each topic it produces, with the contracts' message unions as payloads,
and FastStream's ``AsyncAPI`` factory renders the document integrators read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contracts import (
    BET_COMMANDS,
    BET_EVENTS,
    BOOK_EVENTS,
    DEAD_LETTERS,
    INCIDENTS,
    SHOE_COMMANDS,
    SHOE_EVENTS,
    TABLE_COMMANDS,
    TABLE_EVENTS,
    TOPIC_UNIONS,
)


@dataclass(frozen=True)
class ServiceTopics:
    consumes: Sequence[str]
    publishes: Sequence[str]


SYSTEM: Mapping[str, ServiceTopics] = {
    "shoe": ServiceTopics(
        consumes=(SHOE_COMMANDS,), publishes=(SHOE_EVENTS, DEAD_LETTERS, INCIDENTS)
    ),
    "dealing": ServiceTopics(
        consumes=(TABLE_COMMANDS, SHOE_EVENTS, BOOK_EVENTS),
        publishes=(TABLE_EVENTS, SHOE_COMMANDS, BET_COMMANDS, DEAD_LETTERS, INCIDENTS),
    ),
    "settlement": ServiceTopics(
        consumes=(BET_COMMANDS, TABLE_EVENTS, SHOE_EVENTS),
        publishes=(BET_EVENTS, BOOK_EVENTS, DEAD_LETTERS, INCIDENTS),
    ),
}
"""Who consumes and who publishes each topic."""


def asyncapi_json(
    bootstrap_servers: str = "127.0.0.1:9092",
    topic_prefix: str = "",
    system: Mapping[str, ServiceTopics] = SYSTEM,
    version: str = "0.1.0",
) -> str:
    """The AsyncAPI 3.0 document (JSON) of the services' topics and messages."""
    from faststream.kafka import KafkaBroker
    from faststream.specification import AsyncAPI

    broker = KafkaBroker(bootstrap_servers)
    for service, topics in system.items():
        for topic in topics.consumes:
            _document_subscriber(broker, service, topic_prefix + topic, TOPIC_UNIONS[topic])
        for topic in topics.publishes:
            broker.publisher(
                topic_prefix + topic,
                title=f"{service} publishes {topic}",
                description=f"The {service} service produces these messages (key: the table id).",
                schema=TOPIC_UNIONS[topic],
            )
    spec = AsyncAPI(
        broker,
        title="punto-banco",
        version=version,
        description=(
            "Punto Banco services over Kafka. Every message is JSON with a `type` discriminator; "
            "the key is the table id. Relayed messages carry headers `pb-source`, "
            "`pb-notification-id` and `pb-message-index` (duplicates after a crash have the same "
            "`event_id`); on table-events, shoe-events, book-events, shoe-commands and dealing's "
            "marks on bet-commands also `pb-sig`, the writer's signature (a detached JWS, RFC "
            "7797, EdDSA: see docs/integrating.md)."
        ),
    )
    document: str = spec.to_specification().to_json()
    return document


def _document_subscriber(broker: Any, service: str, topic: str, payload: Any) -> None:
    async def handler(message: Any) -> None:  # documentation only, never run
        return None

    handler.__annotations__["message"] = payload
    broker.subscriber(
        topic,
        title=f"{service} consumes {topic}",
        description=f"The {service} service handles these messages.",
    )(handler)
