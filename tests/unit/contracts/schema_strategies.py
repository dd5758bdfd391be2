"""Hypothesis strategies that draw JSON documents a JSON Schema admits.

Covers the part of JSON Schema 2020-12 that pydantic writes for the contracts: ``$ref`` into
``$defs``, ``anyOf``, ``const``, ``enum``, strings (length, pattern, the ``uuid`` and
``date-time`` formats), bounded integers, booleans, null, arrays and objects (properties,
required, ``additionalProperties``, ``propertyNames``, ``maxProperties``).
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from hypothesis import strategies as st


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Documents ``schema`` admits (it must use only the keywords listed above)."""
    return _node(schema, schema.get("$defs", {}))


def _node(node: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "$ref" in node:
        return _node(defs[node["$ref"].removeprefix("#/$defs/")], defs)
    if "anyOf" in node:
        return st.one_of([_node(option, defs) for option in node["anyOf"]])
    if "const" in node:
        return st.just(node["const"])
    if "enum" in node:
        return st.sampled_from(node["enum"])
    kind = node.get("type")
    if kind == "string" or (kind is None and {"maxLength", "pattern"} & node.keys()):
        return _string(node)
    if kind == "integer":
        return st.integers(node.get("minimum"), node.get("maximum"))
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(
            _node(node.get("items", {}), defs),
            min_size=node.get("minItems", 0),
            max_size=node.get("maxItems", 5),
        )
    if kind == "object":
        return _object(node, defs)
    raise ValueError(f"schema keyword set not covered: {sorted(node)}")


def _string(node: dict[str, Any]) -> st.SearchStrategy[str]:
    low, high = node.get("minLength", 0), node.get("maxLength")
    fmt = node.get("format")
    if fmt == "uuid":
        return st.uuids().map(str)
    if fmt == "date-time":
        return st.datetimes(timezones=st.just(UTC)).map(lambda when: when.isoformat())
    if "pattern" in node:
        drawn = st.from_regex(node["pattern"], fullmatch=True)
    else:
        drawn = st.text(min_size=low, max_size=min(high if high is not None else 30, 30))
    return drawn.filter(lambda text: low <= len(text) <= (high if high is not None else len(text)))


def _object(node: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    properties: dict[str, Any] = node.get("properties", {})
    if properties:
        required = set(node.get("required", []))
        return st.fixed_dictionaries(
            {name: _node(sub, defs) for name, sub in properties.items() if name in required},
            optional={
                name: _node(sub, defs) for name, sub in properties.items() if name not in required
            },
        )
    names = node.get("propertyNames", {"type": "string", "maxLength": 20})
    values = node.get("additionalProperties", {})
    values = {} if values is True else values
    return st.dictionaries(
        _node(names, defs), _node(values, defs), max_size=min(node.get("maxProperties", 5), 5)
    )
