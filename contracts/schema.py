"""JSON Schemas of every message, for integrators, and a compatibility check.

``schema_files()`` gives the exported files: one ``<MessageName>.json`` per
message (the JSON a producer must send, i.e. what ``decode`` accepts) and an
``index.json`` naming the topics and the message types on each. Rendering is
deterministic (sorted keys, two-space indent, trailing newline), so committed
schemas can be compared byte for byte.

``breaking_changes(old, new)`` compares two such sets and lists the changes that
would break a producer or consumer written against ``old``: a message or topic
removed, a type moved off a topic, a field removed, a field newly required, a
field whose type or constraints changed. Adding an optional field is not listed,
but note that consumers refuse unknown fields (``additionalProperties: false``),
so deploy consumers before producers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from contracts.envelope import WIRE_REQUIRED, Message
from contracts.topics import TOPIC_MESSAGES, topic_for

INDEX_FILE = "index.json"
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_COSMETIC_KEYS = frozenset({"description", "title", "default", "examples"})


def message_schema(model: type[Message]) -> dict[str, Any]:
    """The JSON Schema of one message type (validation mode: what producers must send)."""
    schema = model.model_json_schema(mode="validation")
    required = [field for field in WIRE_REQUIRED if field in schema["properties"]]
    schema["required"] = required + [f for f in schema.get("required", []) if f not in required]
    schema["properties"]["type"]["description"] = f"The message type: always `{model.__name__}`."
    schema["$schema"] = SCHEMA_DIALECT
    schema["$id"] = f"punto-banco/contracts/{model.__name__}.json"
    schema["x-topic"] = topic_for(model)
    return schema


def index() -> dict[str, Any]:
    """Topics -> message types, and the partition-key rule."""
    return {
        "partition_key": "table_id, UTF-8 (dead letters: the original key when no table is known)",
        "topics": {topic: [m.__name__ for m in models] for topic, models in TOPIC_MESSAGES.items()},
    }


def render(document: Mapping[str, Any]) -> str:
    """Deterministic JSON text: sorted keys, indent 2, trailing newline."""
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def schema_documents() -> dict[str, dict[str, Any]]:
    """File name -> document, for every message type plus ``index.json``."""
    documents: dict[str, dict[str, Any]] = {INDEX_FILE: index()}
    for models in TOPIC_MESSAGES.values():
        for model in models:
            documents[f"{model.__name__}.json"] = message_schema(model)
    return dict(sorted(documents.items()))


def schema_files() -> dict[str, str]:
    """File name -> rendered text, exactly as ``punto-banco contracts export`` writes them."""
    return {name: render(document) for name, document in schema_documents().items()}


def _resolve(node: Any, defs: Mapping[str, Any]) -> Any:
    """``node`` with local ``$ref``s inlined and cosmetic keys dropped."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _resolve(defs.get(ref.removeprefix("#/$defs/"), {}), defs)
        return {k: _resolve(v, defs) for k, v in node.items() if k not in _COSMETIC_KEYS}
    if isinstance(node, list):
        return [_resolve(item, defs) for item in node]
    return node


def _message_changes(name: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    changes: list[str] = []
    old_props: Mapping[str, Any] = old.get("properties", {})
    new_props: Mapping[str, Any] = new.get("properties", {})
    old_required = set(old.get("required", []))
    new_required = set(new.get("required", []))
    old_defs: Mapping[str, Any] = old.get("$defs", {})
    new_defs: Mapping[str, Any] = new.get("$defs", {})
    for field in sorted(old_props):
        if field not in new_props:
            changes.append(f"{name}.{field}: field removed")
            continue
        before = _resolve(old_props[field], old_defs)
        after = _resolve(new_props[field], new_defs)
        if before != after:
            changes.append(
                f"{name}.{field}: type or constraints changed "
                f"({json.dumps(before, sort_keys=True)} -> {json.dumps(after, sort_keys=True)})"
            )
    for field in sorted(new_required - old_required):
        changes.append(f"{name}.{field}: field is newly required")
    if old.get("additionalProperties") is False and new.get("additionalProperties") is not False:
        changes.append(f"{name}: unknown fields are no longer refused")
    return changes


def breaking_changes(
    old: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """Changes from ``old`` to ``new`` (file name -> document) that break compatibility."""
    changes: list[str] = []
    old_topics: Mapping[str, list[str]] = old.get(INDEX_FILE, {}).get("topics", {})
    new_topics: Mapping[str, list[str]] = new.get(INDEX_FILE, {}).get("topics", {})
    for topic in sorted(old_topics):
        if topic not in new_topics:
            changes.append(f"topic {topic} removed")
            continue
        for name in old_topics[topic]:
            if name not in new_topics[topic]:
                changes.append(f"{name} no longer travels on {topic}")
    for file_name in sorted(old):
        if file_name == INDEX_FILE:
            continue
        message = file_name.removesuffix(".json")
        if file_name not in new:
            changes.append(f"{message}: message type removed")
            continue
        changes.extend(_message_changes(message, old[file_name], new[file_name]))
    return changes
