"""The TableTerms aggregate: what settlement knows of a table (from dealing's events)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

Limits = dict[str, dict[str, int]]
"""Per bet type name: {"minimum": int, "maximum": int} in minor units."""


@lru_cache(maxsize=4096)
def terms_aggregate_id(table_id: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"/punto-banco/settlement/tables/{table_id}")


class TableTerms(Aggregate):
    """A table's currency, limits and paytable, and whether it is closed."""

    class Registered(Aggregate.Created):
        table_id: str
        paytable: str
        limits: Limits
        currency: str

    class Changed(Aggregate.Event):
        paytable: str
        limits: Limits
        currency: str

    class Closed(Aggregate.Event):
        pass

    @staticmethod
    def create_id(table_id: str, **_: Any) -> UUID:
        return terms_aggregate_id(table_id)

    @event(Registered)
    def __init__(self, table_id: str, paytable: str, limits: Limits, currency: str) -> None:
        self.table_id = table_id
        self.paytable = paytable
        self.limits = limits
        self.currency = currency
        self.closed = False

    @event(Changed)
    def change(self, paytable: str, limits: Limits, currency: str) -> None:
        """The table (re)opened with these terms."""
        self.paytable = paytable
        self.limits = limits
        self.currency = currency
        self.closed = False

    @event(Closed)
    def close(self) -> None:
        self.closed = True

    def same_terms(self, paytable: str, limits: Limits, currency: str) -> bool:
        return (self.paytable, self.limits, self.currency) == (paytable, limits, currency)
