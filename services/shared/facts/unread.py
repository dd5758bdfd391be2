"""Stored topics no reader of the stores needs, and why (for the completeness tests)."""

from __future__ import annotations

_TABLE = "internal bookkeeping of the table aggregate (the coups and shoes say it all)"
_STUDIO = "routes a studio table's reads to its shoe (the shoe's ReadTaken say what it took)"
_BOOK = "internal bookkeeping of the bet book (its published facts say what was decided)"

UNREAD: dict[str, str] = {
    "services.dealing.tables:Table.ShoeShuffled": _TABLE,
    "services.dealing.tables:Table.CutCardReached": _TABLE,
    "services.dealing.tables:Table.CoupStarted": _TABLE,
    "services.dealing.tables:Table.CoupFinished": _TABLE,
    "services.dealing.tables:Table.ClosingRequested": _TABLE,
    "services.dealing.tables:Table.StudioCoupCleared": "a void told to the studio shoe, which "
    "records what it did (StudioShoe.CoupCleared)",
    "services.dealing.tables:Table.StudioCoupCorrected": "a correction told to the studio shoe, "
    "which records what it did (StudioShoe.CardsAccepted)",
    "services.shoe.studio:StudioTable.Started": _STUDIO,
    "services.shoe.studio:StudioTable.ShoeAttached": _STUDIO,
    "services.shoe.studio:StudioTable.ReadWaiting": _STUDIO,
    "services.shoe.studio:StudioShoe.CorrectionWaiting": "a correction waiting for its coup's "
    "CONFIRM (StudioShoe.CardsAccepted records what the shoe did with it)",
    "services.dealing.rejections:CommandRejections.Started": "opens a table's log of refusals",
    "services.settlement.books:BetBook.CardsDrawn": _BOOK,
    "services.settlement.books:BetBook.CardsRefused": _BOOK,
    "services.settlement.books:BetBook.ResultClaimed": _BOOK,
    "services.settlement.books:BetBook.ClaimsDropped": _BOOK,
    "services.settlement.books:BetBook.OperatorOpened": _BOOK,
    "services.settlement.desk:BetDesk.Started": "opens a table's desk",
    "services.settlement.desk:BetDesk.BetsHeld": "bets held by earlier versions (refused later)",
    "services.settlement.desk:BetDesk.BetsReleased": "held bets taken out to be judged",
    "services.settlement.terms:TableTerms.Registered": "settlement's copy of dealing's terms",
    "services.settlement.terms:TableTerms.Changed": "settlement's copy of dealing's terms",
    "services.settlement.terms:TableTerms.Closed": "settlement's copy of dealing's close",
    "services.platform.incidents:IncidentLog.Started": "opens a service's log of incidents",
    "services.platform.incidents:IncidentLog.Raised": "published for the operators",
}
"""Stored topic -> why nobody reads it."""
