"""The history the auditor rebuilds: the read side's views (:mod:`services.tools.history.views`)."""

from services.tools.history.views import (
    Accepted,
    BookView,
    Burn,
    CoupView,
    Dealt,
    Draw,
    History,
    Refund,
    Rejected,
    Resolution,
    Reveal,
    Settlement,
    ShoeView,
    TableSettings,
    TableView,
    Void,
)

__all__ = [
    "Accepted",
    "BookView",
    "Burn",
    "CoupView",
    "Dealt",
    "Draw",
    "History",
    "Refund",
    "Rejected",
    "Resolution",
    "Reveal",
    "Settlement",
    "ShoeView",
    "TableSettings",
    "TableView",
    "Void",
]
