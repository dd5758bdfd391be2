"""Bytes on Kafka <-> contract messages.

``encode`` writes a message as UTF-8 JSON. ``decode`` reads the bytes of one
topic and returns the message, or raises ``ContractError`` whose ``reason`` says
what was wrong in words (fit for a dead letter and for a person).

A valid message is parsed once (pydantic's validator for the topic's union, keyed
by ``type``); only bytes that fail it are read again, step by step, to say why (or to
accept what JSON Schema counts as an integer although it is written ``1.0`` or ``1e3``:
decode admits exactly what the published schemas admit).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from functools import cache
from typing import Annotated, Any, Union

from pydantic import Field, TypeAdapter, ValidationError

from contracts.bet_events import OperatorMessage
from contracts.envelope import WIRE_REQUIRED, Message
from contracts.topics import (
    FORMER_TOPIC_MESSAGES,
    MESSAGE_TOPICS,
    MESSAGE_TYPES,
    TOPIC_MESSAGES,
    TOPIC_UNIONS,
)

_MAX_REPORTED_ERRORS = 8
_MAX_NAME_CHARS = 64


class ContractError(ValueError):
    """Bytes that are not a valid message for the topic they were read from.

    For a JSON object of a known type that its model refuses: ``document`` (the object as
    read) and ``fields`` (the top-level fields found wrong, missing or unknown, in the model's
    order), so that a reader can still answer what it can identify (settlement: a PlaceBet
    whose bet id is readable)."""

    def __init__(
        self,
        reason: str,
        *,
        topic: str | None = None,
        message_type: str | None = None,
        document: dict[str, Any] | None = None,
        fields: tuple[str, ...] = (),
    ):
        super().__init__(reason)
        self.reason = reason
        self.topic = topic
        self.message_type = message_type
        self.document = document
        self.fields = fields


_HOUSE_TAIL = b',"operator":"house"}'
"""How a house's OperatorMessage ends as JSON: ``operator`` is its last field."""


def encode(message: Message) -> bytes:
    """The message as UTF-8 JSON (the value written to Kafka).

    A message about the house's bets (an ``OperatorMessage`` of the default operator) leaves
    ``operator`` out: one-operator deployments publish what they did before operators, byte
    for byte. Cut from the end of the JSON (the field is the model's last, checked where
    the models are declared): an ``exclude`` would double the cost of 10,000 BetSettled."""
    if not isinstance(message, Message):
        raise TypeError(f"expected a contract message, got {type(message).__name__}")
    data = message.model_dump_json().encode("utf-8")
    if isinstance(message, OperatorMessage) and data.endswith(_HOUSE_TAIL):
        return data[: -len(_HOUSE_TAIL)] + b"}"
    return data


def summarize(error: ValidationError) -> str:
    """A validation error as ``field: problem; field: problem`` (at most a few)."""
    parts: list[str] = []
    for item in error.errors(include_url=False, include_input=False):
        where = _short(".".join(str(part) for part in item["loc"])) or "(message)"
        parts.append(f"{where}: {item['msg']}")
    extra = len(parts) - _MAX_REPORTED_ERRORS
    shown = "; ".join(parts[:_MAX_REPORTED_ERRORS])
    return f"{shown}; and {extra} more" if extra > 0 else shown


def _short(text: str) -> str:
    """``text`` cut to a readable length (names in errors come from untrusted input)."""
    return text if len(text) <= _MAX_NAME_CHARS else text[: _MAX_NAME_CHARS - 3] + "..."


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


@cache
def _readable(topic: str) -> tuple[type[Message], ...] | None:
    """The message classes read from ``topic``: its own, then those it carried before
    (``FORMER_TOPIC_MESSAGES``); None for an unknown topic."""
    models = TOPIC_MESSAGES.get(topic)
    return None if models is None else (*models, *FORMER_TOPIC_MESSAGES.get(topic, ()))


@cache
def _validator(topic: str) -> Callable[[bytes | str], Message]:
    """One-pass strict validation of a message of ``topic`` (raises ValidationError)."""
    models = _readable(topic) or ()
    if len(models) == 1:
        model = models[0]
        return lambda raw: model.model_validate_json(raw, strict=True)
    readable: Any = TOPIC_UNIONS[topic]
    if models != TOPIC_MESSAGES[topic]:  # with the types it carried before
        readable = Annotated[Union[models], Field(discriminator="type")]  # noqa: UP007
    adapter: TypeAdapter[Message] = TypeAdapter(readable)
    return lambda raw: adapter.validate_json(raw, strict=True)


def decode(topic: str, data: bytes | bytearray | memoryview | str) -> Message:
    """The message in ``data`` read from ``topic``; ``ContractError`` if it is not one."""
    allowed = _readable(topic)
    if allowed is None:
        raise ContractError(f"unknown topic {topic!r}; known topics: {', '.join(TOPIC_MESSAGES)}")
    raw_bytes = bytes(data) if isinstance(data, bytearray | memoryview) else data
    try:
        fast = _validator(topic)(raw_bytes)
    except ValidationError:
        pass  # read it again below, step by step, to say what is wrong
    else:
        if fast.model_fields_set.issuperset(WIRE_REQUIRED):
            return fast
    return _explain(topic, allowed, raw_bytes)


_MAX_INTEGRAL_EXPONENT = 30
"""A number written with a fraction or an exponent is read as an integer when it is one and
has at most this many digits (no bounded field is larger; ``1e999999999`` stays a float)."""


def _json_number(token: str) -> int | float:
    """A JSON number token with a fraction or an exponent: an int when it is a whole number
    (JSON Schema's ``integer`` admits ``2500.0``), else a float (refused by every field)."""
    try:
        value = Decimal(token)
    except ArithmeticError:  # an exponent beyond Decimal's own (1e1000000000000000000)
        return float(token)
    if value.adjusted() <= _MAX_INTEGRAL_EXPONENT and value == value.to_integral_value():
        return int(value)
    return float(token)


def _explain(topic: str, allowed: tuple[type[Message], ...], raw_bytes: bytes | str) -> Message:
    """Read bytes that failed validation again to say why (or return the message)."""
    try:
        document = json.loads(raw_bytes, parse_float=_json_number)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, int limit
        raise ContractError(f"not JSON: {exc}", topic=topic) from None
    if not isinstance(document, dict):
        raise ContractError(f"expected a JSON object, got {_describe(document)}", topic=topic)
    names = ", ".join(model.__name__ for model in allowed)
    if "type" not in document:
        raise ContractError(f"missing field 'type' (expected one of: {names})", topic=topic)
    name = document["type"]
    if not isinstance(name, str):
        raise ContractError(f"field 'type' must be a string, got {_describe(name)}", topic=topic)
    model = MESSAGE_TYPES.get(name)
    if model is None:
        raise ContractError(
            f"unknown message type {_short(name)!r} (expected one of: {names})", topic=topic
        )
    if model not in allowed:
        raise ContractError(
            f"message type {name!r} is not allowed on topic {topic!r} (allowed: {names}); "
            f"it belongs on {MESSAGE_TOPICS[name]!r}",
            topic=topic,
            message_type=name,
        )
    missing = [field for field in WIRE_REQUIRED if field not in document]
    problems = [f"{field}: Field required" for field in missing]
    wrong = set(missing)
    try:
        message = model.model_validate(document, strict=True)
    except ValidationError as exc:
        problems.append(summarize(exc))
        wrong.update(str(item["loc"][0]) for item in exc.errors() if item["loc"])
    if problems:
        order = list(model.model_fields)
        raise ContractError(
            f"invalid {name}: {'; '.join(problems)}",
            topic=topic,
            message_type=name,
            document=document,
            fields=tuple(sorted(wrong, key=lambda f: order.index(f) if f in order else len(order))),
        )
    return message
