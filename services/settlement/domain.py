"""Settlement's domain model: table terms, one bet book per coup, refused bets.

Imports the rules engine only, never Kafka or a database.
"""

from services.settlement.books import (
    Bet,
    BetBook,
    BookStatus,
    CoupFacts,
    FinishedBook,
    book_aggregate_id,
)
from services.settlement.desk import BetDesk, desk_aggregate_id
from services.settlement.terms import TableTerms, terms_aggregate_id

__all__ = [
    "Bet",
    "BetBook",
    "BetDesk",
    "BookStatus",
    "CoupFacts",
    "FinishedBook",
    "TableTerms",
    "book_aggregate_id",
    "desk_aggregate_id",
    "terms_aggregate_id",
]
