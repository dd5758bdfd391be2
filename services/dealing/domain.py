"""Dealing's domain model: tables, coups and refused commands (eventsourcing aggregates).

Imports the rules engine only, never Kafka or a database.
"""

from services.dealing.coups import Coup, CoupPhase, DealingError, coup_aggregate_id
from services.dealing.rejections import CommandRejections, rejections_aggregate_id
from services.dealing.tables import (
    ShoeState,
    Table,
    TableStatus,
    coup_id_for,
    shoe_id_for,
    table_aggregate_id,
)

__all__ = [
    "CommandRejections",
    "Coup",
    "CoupPhase",
    "DealingError",
    "ShoeState",
    "Table",
    "TableStatus",
    "coup_aggregate_id",
    "coup_id_for",
    "rejections_aggregate_id",
    "shoe_id_for",
    "table_aggregate_id",
]
