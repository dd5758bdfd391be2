"""What every stored fact shares: a stable stored topic, a version, upcasters, typed lines.

A fact record is a frozen dataclass. The domain event that records it inherits it (its
fields, ``class_version`` and ``upcast_vN_vM``), and the read side builds it from the
stored JSON. The stored JSON is eventsourcing's: fields by name, in declaration order, and
line records (``NamedTuple``) as arrays.
"""

from __future__ import annotations

import dataclasses
import typing
from functools import cache
from typing import Any, ClassVar, TypeVar


class Fact:
    """Base of the fact records.

    ``STORED_TOPIC`` is the topic its rows carry: it never changes (old rows hold it), and
    the domain event sets ``TOPIC = STORED_TOPIC``. A fact itself never has a ``TOPIC``
    (eventsourcing would register the fact class under that topic).
    """

    STORED_TOPIC: ClassVar[str]
    class_version: ClassVar[int] = 1
    ENCRYPTED: ClassVar[tuple[str, ...]] = ()
    """Fields stored encrypted (in the fact's ``encrypted`` field; stored as null): the
    services' mapper encrypts and decrypts them (``services.shared.platform.store.application``)."""
    ENCRYPTION_BINDS: ClassVar[tuple[str, ...]] = ()
    """Fields whose values (with the aggregate id) the ciphertext is bound to."""


F = TypeVar("F", bound=Fact)
LineRecord = tuple[Any, ...]
_new_tuple = tuple.__new__


_FIELDS: dict[type, tuple[str, ...]] = {}


def fact_fields(fact: type) -> tuple[str, ...]:
    """The fact's fields in declaration order (never the event's originator fields), for a
    fact record or for a domain event that inherits one."""
    found = _FIELDS.get(fact)
    if found is None:
        inherited = {
            f.name for base in fact.__mro__[1:] if not _is_fact(base) for f in _fields_of(base)
        }
        found = tuple(f.name for f in _fields_of(fact) if f.name not in inherited)
        _FIELDS[fact] = found
    return found


def _is_fact(cls: type) -> bool:
    return issubclass(cls, Fact)


def _fields_of(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    return dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()


@cache
def line_fields(cls: type) -> tuple[tuple[str, type[LineRecord]], ...]:
    """The fields of ``cls`` typed ``list[SomeLine]`` (a NamedTuple): stored as arrays."""
    found = []
    for name, hint in typing.get_type_hints(cls).items():
        if typing.get_origin(hint) is list:
            (item,) = typing.get_args(hint)
            if isinstance(item, type) and issubclass(item, tuple) and hasattr(item, "_fields"):
                found.append((name, item))
    return tuple(found)


def type_lines(cls: type, state: dict[str, Any]) -> None:
    """Stored arrays -> line records, in place (the read side's; the services' mapper does
    the same).

    ``tuple.__new__`` takes the stored items as they are (no per-line Python call): an
    array longer than the record (a newer or older writer's extra item) keeps its items.
    Each array is replaced in its list, so it is freed as its record is made.
    """
    for name, record in line_fields(cls):
        lines = state.get(name)
        if lines is not None:
            for index, line in enumerate(lines):
                lines[index] = _new_tuple(record, line)


def upcast(fact: type[Fact], state: dict[str, Any]) -> None:
    """Bring a stored state to the fact's current version (the services' own upcasters)."""
    version = state.pop("class_version", 1)
    while version < fact.class_version:
        getattr(fact, f"upcast_v{version}_v{version + 1}")(state)
        version += 1


def read_fact(fact: type[F], state: dict[str, Any]) -> F:
    """The fact of a stored state, without validation (our own store, its seals checked).

    Values are as the stored JSON holds them: eventsourcing's encoded types
    (``{"_type_": "datetime_iso", "_data_": ...}``) are left for the reader to read.
    """
    upcast(fact, state)
    type_lines(fact, state)
    made = object.__new__(fact)
    object.__setattr__(made, "__dict__", {name: state[name] for name in fact_fields(fact)})
    return made


def fact_from(fact: type[F], source: object, **given: Any) -> F:
    """The fact whose fields ``source`` has by name (a contract message, on the Kafka side);
    ``given`` supplies or overrides fields."""
    values = {name: getattr(source, name) for name in fact_fields(fact) if name not in given}
    return fact(**values, **given)


def line_from(record: type[LineRecord], source: object) -> Any:
    """A line record from an object with its fields by name (BetSettled -> SettledLine)."""
    return _new_tuple(record, [getattr(source, name) for name in record._fields])  # type: ignore[attr-defined]
