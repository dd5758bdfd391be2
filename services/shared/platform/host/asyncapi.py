"""The AsyncAPI 3.0 documents of the services: FastStream's rendering of each broker
(``faststream.py``), completed here: each channel carries the messages of ITS topic, one per
record; the relay's headers (and ``pb-sig`` on signed topics) and what a consumer requires;
the key (the table id); ``correlationId``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Union

from pydantic import Field

from contracts import (
    BET_COMMANDS,
    DEAD_LETTERS,
    INCIDENTS,
    MESSAGE_SOURCES,
    SEALS,
    TOPIC_MESSAGES,
    TOPIC_OWNERS,
    TOPIC_UNIONS,
)
from services.shared.platform.kafka import (
    INDEX_HEADER,
    NOTIFICATION_HEADER,
    SIGNATURE_HEADER,
    SOURCE_HEADER,
    TYPE_HEADER,
)
from services.shared.platform.relay.records import SIGNED_TOPICS

VERSION = "0.1.0"
KAFKA_BINDING_VERSION = "0.5.0"
SYSTEM_DESCRIPTION = (
    "Punto Banco services over Kafka. Every message is JSON with a `type` discriminator; the "
    "key is the table id. Messages written by a service's outbox relay carry the headers "
    "`pb-source`, `pb-notification-id`, `pb-message-index` and `pb-type` (duplicates after a "
    "crash repeat them and the `event_id`); on table-events, command-events, shoe-events, "
    "book-events, shoe-commands and dealing's marks on bet-commands also `pb-sig`, the "
    "writer's signature "
    "(a detached JWS, RFC 7797, EdDSA: see docs/integrating.md)."
)

_HEADER_TEXT = {
    SOURCE_HEADER: "The service whose outbox relay wrote the record.",
    NOTIFICATION_HEADER: "The notification id of the stored event in the writer's store "
    "(1-15 digits, from 1). With pb-message-index it is the record's position, strictly "
    "increasing within a partition; a republished record repeats it.",
    INDEX_HEADER: "Which message of that stored event (0, 1, ...: one stored settlement "
    "becomes one BetSettled per bet), 1-7 digits, below 2**20.",
    TYPE_HEADER: "The message type (the payload's `type`), to skip records unparsed.",
    SIGNATURE_HEADER: "The writer's signature (scheme record-jws/v2): a detached JWS (RFC 7515, "
    "unencoded payload RFC 7797, EdDSA) of the value, bound to the topic (with the deployment's "
    "prefix), the partition, the cluster, the key and `<pb-notification-id>:<pb-message-index>` "
    "(docs/integrating.md).",
}
_PATTERNS = {NOTIFICATION_HEADER: "^[1-9][0-9]{0,14}$", INDEX_HEADER: "^(0|[1-9][0-9]{0,6})$"}
_RELAYED = (SOURCE_HEADER, NOTIFICATION_HEADER, INDEX_HEADER, TYPE_HEADER)


def published_union(service: str, topic: str) -> Any:
    """The messages ``service`` may publish on ``topic`` (every service writes dead letters,
    incidents and its seal anchors); ValueError when it may publish none there."""
    if topic in (DEAD_LETTERS, INCIDENTS, SEALS):
        return TOPIC_UNIONS[topic]
    models = tuple(m for m in TOPIC_MESSAGES[topic] if MESSAGE_SOURCES.get(m.__name__) == service)
    if not models:
        raise ValueError(f"{service} publishes nothing on {topic}")
    if len(models) == 1:
        return models[0]
    return Annotated[Union[models], Field(discriminator="type")]  # noqa: UP007


def complete(document: dict[str, Any], topic_prefix: str) -> dict[str, Any]:
    """FastStream's document, completed (see the module docstring)."""
    _one_server(document)
    components = document.setdefault("components", {})
    messages = components.setdefault("messages", {})
    schemas = components.setdefault("schemas", {})
    batch_payloads: set[str] = set()
    receiving = {  # the channels read (their names, unquoted)
        _unquote(str(operation.get("channel", {}).get("$ref", "")).rsplit("/", 1)[-1])
        for operation in document.get("operations", {}).values()
        if operation.get("action") == "receive"
    }
    for channel_name, channel in document.get("channels", {}).items():
        logical = channel.get("address", "").removeprefix(topic_prefix)
        if logical not in TOPIC_MESSAGES:
            continue
        receives = channel_name in receiving
        for reference in channel.get("messages", {}).values():
            name = _unquote(str(reference.get("$ref", "")).rsplit("/", 1)[-1])
            message = messages.get(name)
            if message is None:
                continue
            if receives:
                batch_payloads.add(_unquote(str(message["payload"].get("$ref", ""))))
                message["payload"] = _one_of(TOPIC_MESSAGES[logical], schemas)
            message["correlationId"] = {
                "description": "The id shared by a command and everything it caused.",
                "location": "$message.payload#/correlation_id",
            }
            message["headers"] = _headers(logical, receives)
            message["bindings"] = {
                "kafka": {
                    "key": {
                        "type": "string",
                        "description": "The table id (UTF-8): a table's messages keep their "
                        "order in one partition. A dead letter without a table keeps the "
                        "original record's key.",
                    },
                    "bindingVersion": KAFKA_BINDING_VERSION,
                }
            }
    for reference in batch_payloads:  # FastStream's array-of-union payloads, now unused
        schemas.pop(reference.rsplit("/", 1)[-1], None)
    return document


def _one_server(document: dict[str, Any]) -> None:
    """The services' brokers connect to the same Kafka: one server, named ``kafka``."""
    servers = document.get("servers", {})
    if len({json.dumps(server, sort_keys=True) for server in servers.values()}) != 1:
        return
    document["servers"] = {"kafka": next(iter(servers.values()))}
    for channel in document.get("channels", {}).values():
        if "servers" in channel:
            channel["servers"] = [{"$ref": "#/servers/kafka"}]


def _unquote(reference: str) -> str:
    return reference.replace("%20", " ")


def _one_of(models: Sequence[type[Any]], schemas: Mapping[str, Any]) -> dict[str, Any]:
    """One record's payload: one of ``models`` (their component schemas), by ``type``."""
    references = [{"$ref": f"#/components/schemas/{model.__name__}"} for model in models]
    missing = [model.__name__ for model in models if model.__name__ not in schemas]
    if missing:
        raise ValueError(f"no component schema for {missing}")
    if len(references) == 1:
        return references[0]
    return {"oneOf": references, "discriminator": "type"}


def _headers(topic: str, receives: bool) -> dict[str, Any]:
    """The headers of a record on ``topic``, as the writer sends them or the reader needs them."""
    owner = TOPIC_OWNERS.get(topic)
    signed = topic in SIGNED_TOPICS
    names = [*_RELAYED, *((SIGNATURE_HEADER,) if signed else ())]
    required: list[str] = []
    if not receives and topic != DEAD_LETTERS:
        required = names  # what every relay record carries
    elif receives and owner is not None:
        required = [n for n in names if n != TYPE_HEADER]
    properties = {
        name: {"type": "string", "description": _HEADER_TEXT[name]}
        | ({"pattern": _PATTERNS[name]} if name in _PATTERNS else {})
        | ({"const": owner} if name == SOURCE_HEADER and owner is not None else {})
        for name in names
    }
    notes = {
        DEAD_LETTERS: "A DeadLetter has no headers; a MessageQuarantined carries the relay "
        "headers of the message it replaces.",
        BET_COMMANDS: "Bets and commands from outside need no headers (they are ignored and "
        "records are tracked by offset); dealing's OpenBook / CloseBook marks carry dealing's "
        "relay headers and pb-sig, and are refused without them.",
    }
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if topic in notes:
        schema["description"] = notes[topic]
    elif receives and owner is None:
        schema["description"] = "None needed: records here are tracked by their offset."
    elif receives:
        schema["description"] = (
            f"Only {owner}'s outbox relay writes here, signed: a record without these "
            "headers, or with another source or a bad signature, is a dead letter."
        )
    return schema
