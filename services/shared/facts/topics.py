"""Stored topics that outlive class names, and recording a fact on an aggregate.

eventsourcing writes and resolves an explicit ``TOPIC`` class attribute; each domain event
that inherits a fact sets ``TOPIC = <Fact>.STORED_TOPIC``. The only module of this package
that imports eventsourcing (its ``utils``).
"""

from __future__ import annotations

from typing import Any

from eventsourcing.utils import get_topic

from services.shared.facts.base import Fact


def register_stored_topics(*aggregates: type) -> None:
    """Register each event class of ``aggregates`` that has an explicit ``TOPIC`` now, so a
    class renamed or moved still resolves the topic of its old rows in a fresh process.

    eventsourcing re-creates nested event classes (the one in ``vars(aggregate)`` inherits
    ``TOPIC``), hence ``getattr`` rather than the class's own ``__dict__``.
    """
    for aggregate in aggregates:
        for value in vars(aggregate).values():
            if isinstance(value, type) and getattr(value, "TOPIC", None):
                get_topic(value)


def record(aggregate: Any, event_class: type[Any], fact: Fact) -> None:
    """Trigger ``event_class`` on ``aggregate`` with the fields of ``fact`` (a fact record
    built at the command site, so its constructor call is type-checked)."""
    aggregate.trigger_event(event_class, **vars(fact))
