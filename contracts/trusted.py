"""Messages built from values that were validated already (the relay's bulk path).

A coup's settlement is validated once, when it is recorded; publishing it makes
one ``BetSettled`` per bet. Validating each again (or pydantic's
``model_construct``, which still walks every field's defaults) costs more than
encoding it. :func:`trusted` builds the message from a complete dict of fields
in the Python types validation gives (``UUID``, aware UTC ``datetime``, ``int``,
``str``), checking only that the field names are exactly the model's.
``tests/unit/contracts/test_trusted.py`` proves the result equals, and encodes
byte for byte like, the validated message.
"""

from __future__ import annotations

from functools import cache
from typing import Any, TypeVar

from contracts.envelope import Message

M = TypeVar("M", bound=Message)


@cache
def _field_order(model: type[Message]) -> tuple[str, ...]:
    return tuple(model.model_fields)


@cache
def _all_set(model: type[Message]) -> frozenset[str]:
    return frozenset(model.model_fields)


def trusted(model: type[M], values: dict[str, Any]) -> M:
    """``model`` holding ``values`` (every field, nothing else) without validation.

    Fastest when ``values`` lists the fields in the model's order (as JSON writes them).

    Only for values read from the service's own store or built by its own code from
    validated ones: nothing here checks a value. Raises ``ValueError`` if a field is
    missing or unknown.
    """
    order = _field_order(model)
    if tuple(values) != order:  # the JSON follows the dict's order: make it the model's
        if values.keys() != set(order):
            missing = sorted(set(order) - values.keys())
            unknown = sorted(values.keys() - set(order))
            raise ValueError(f"{model.__name__}: missing fields {missing}, unknown {unknown}")
        values = {name: values[name] for name in order}
    message = model.__new__(model)
    object.__setattr__(message, "__dict__", values)
    # A set of its own (model_copy(update=...) adds to it), copied from a cached one.
    object.__setattr__(message, "__pydantic_fields_set__", set(_all_set(model)))
    object.__setattr__(message, "__pydantic_extra__", None)
    object.__setattr__(message, "__pydantic_private__", None)
    return message
