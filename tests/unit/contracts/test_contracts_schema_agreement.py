"""The published JSON Schemas and the services' decoder agree exactly.

What the committed schema of a message admits, ``decode`` accepts (the services answer it);
what the schema refuses, ``decode`` refuses (a dead letter). Generated from the committed
files, so an integrator validating against them never meets a surprise.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

import contracts as c
from tests.unit.contracts.samples import samples
from tests.unit.contracts.schema_strategies import from_schema

COMMITTED = Path(c.__file__).parent / "schemas"
EXAMPLES = int(os.environ.get("PB_SCHEMA_EXAMPLES", "80"))
"""Examples per message type and property (more to search deeper: PB_SCHEMA_EXAMPLES=5000)."""
SCHEMAS = {
    name: json.loads((COMMITTED / f"{name}.json").read_text(encoding="utf-8"))
    for name in c.MESSAGE_TYPES
}
SAMPLE_DOCUMENTS = {type(m).__name__: json.loads(c.encode(m)) for m in samples()}


def _validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(SCHEMAS[name], format_checker=Draft202012Validator.FORMAT_CHECKER)


def _decodes(name: str, document: Any) -> bool:
    try:
        decoded = c.decode(c.MESSAGE_TOPICS[name], json.dumps(document).encode())
    except c.ContractError:
        return False
    return type(decoded).__name__ == name


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=50)
    | st.sampled_from(["", "x" * 2000, "EUR", "9H", "banker", "AHS", "-", "a" * 65])
    | st.sampled_from(
        [
            "2026-12-01T10:00:00+00:00",
            "2026-12-01T10:00:00.123456789Z",
            "2026-12-01 10:00:00Z",
            "2026-12-01T10:00:00",
            "2026-12-01t10:00:00z",
            "2026-12-01T24:00:00Z",
            "2026-02-30T10:00:00Z",
            "0000-01-01T00:00:00Z",
            "6f1c4f6e-3b86-4b2e-9d7a-4b3f0e2a1c11",
            "6F1C4F6E3B864B2E9D7A4B3F0E2A1C11",
            "{6f1c4f6e-3b86-4b2e-9d7a-4b3f0e2a1c11}",
        ]
    ),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=10,
)


@pytest.mark.parametrize("name", sorted(c.MESSAGE_TYPES))
@settings(max_examples=EXAMPLES // 2, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_what_the_schema_admits_is_decoded(name: str, data: st.DataObject) -> None:
    document = data.draw(from_schema(SCHEMAS[name]))
    assert _decodes(name, document), f"{name}: the schema admits {document!r}"


@pytest.mark.parametrize("name", sorted(c.MESSAGE_TYPES))
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_a_field_changed_to_anything_is_refused_exactly_when_the_schema_refuses_it(
    name: str, data: st.DataObject
) -> None:
    document = dict(SAMPLE_DOCUMENTS[name])
    fields = sorted(set(SCHEMAS[name]["properties"]) - {"type"})
    field = data.draw(st.sampled_from(fields))
    if data.draw(st.booleans()):
        document[field] = data.draw(json_values)
    else:
        document.pop(field, None)  # a field left out of the JSON (the house's operator)
    assert _validator(name).is_valid(document) == _decodes(name, document), (
        f"{name}.{field} = {document.get(field, '<missing>')!r}"
    )


def test_every_sample_is_valid_against_its_committed_schema() -> None:
    for name, document in SAMPLE_DOCUMENTS.items():
        errors = [e.message for e in _validator(name).iter_errors(document)]
        assert errors == [], name


def _bounded(node: Any, where: str, problems: list[str]) -> None:
    """Collect the strings, numbers, arrays and objects of a schema that have no bound."""
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind == "string" and not ({"maxLength", "enum", "const", "format"} & node.keys()):
        pattern = node.get("pattern", "")
        if not (pattern.startswith("^") and pattern.endswith("$") and "+" not in pattern):
            problems.append(f"{where}: string without maxLength")
    if kind == "integer" and ("maximum" not in node or "minimum" not in node):
        problems.append(f"{where}: integer without minimum and maximum")
    if kind == "array" and "maxItems" not in node:
        problems.append(f"{where}: array without maxItems")
    if (
        kind == "object"
        and "additionalProperties" in node
        and not ({"properties", "maxProperties", "propertyNames"} & node.keys())
    ):
        problems.append(f"{where}: map without maxProperties")
    for key, child in node.items():
        if isinstance(child, dict):
            _bounded(child, f"{where}.{key}", problems)
        elif isinstance(child, list):
            for index, item in enumerate(child):
                _bounded(item, f"{where}.{key}[{index}]", problems)


def test_every_field_of_every_published_schema_is_bounded() -> None:
    problems: list[str] = []
    for name, schema in SCHEMAS.items():
        _bounded(schema, name, problems)
    assert problems == []
