"""What the services store and publish, declared once: a fact record per stored fact.

A fact record is a frozen dataclass (:class:`~services.shared.facts.base.Fact`): the fields
of a stored event, its stored topic (``STORED_TOPIC``, the string its rows carry forever),
its class version and upcasters, and typed line records (``NamedTuple``) for batch fields.
The domain event inherits its fact; the relay builds each contract from it by field name;
the read side builds the same records from the stored JSON. This package imports the
standard library only (and ``eventsourcing.utils`` in :mod:`.topics`): the audit may use it
without importing the services' code.
"""

from services.shared.facts.base import (
    Fact,
    fact_fields,
    fact_from,
    line_fields,
    line_from,
    read_fact,
    type_lines,
    upcast,
)

__all__ = [
    "Fact",
    "fact_fields",
    "fact_from",
    "line_fields",
    "line_from",
    "read_fact",
    "type_lines",
    "upcast",
]
