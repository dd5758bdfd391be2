"""Whether OpenTable's settings can work: paytable, limits (of bet types it offers), cut card."""

from __future__ import annotations

from contracts import OpenTable
from services.shared.rules.paytable import UnknownPaytable, get_paytable

# The worst case after the cut card comes out: it is the first card of a coup of
# six cards, and one more coup of six cards follows.
MIN_CUT_CARD_FROM_END = 12
# Room in front of the cut card for the burn (up to 11 cards) and one coup.
MIN_CARDS_BEFORE_CUT = 17


def settings_problem(command: OpenTable) -> tuple[str, str] | None:
    """(reason code, message) when the table settings cannot work, else None."""
    try:
        paytable = get_paytable(command.paytable)
    except UnknownPaytable as error:
        return "UNKNOWN_PAYTABLE", str(error)
    if not command.limits:
        return "INVALID_SETTINGS", "a table needs limits for at least one bet type"
    foreign = [bet_type for bet_type in command.limits if bet_type not in paytable.pays]
    if foreign:
        offered = ", ".join(bet.value for bet in paytable.offered)
        return (
            "INVALID_SETTINGS",
            f"the {paytable.name} paytable does not offer {', '.join(foreign)} (it offers "
            f"{offered})",
        )
    for bet_type, limit in command.limits.items():
        if limit.minimum > limit.maximum:
            return (
                "INVALID_SETTINGS",
                f"the {bet_type} minimum {limit.minimum} is above its maximum {limit.maximum}",
            )
    highest = command.decks * 52 - MIN_CARDS_BEFORE_CUT
    if not MIN_CUT_CARD_FROM_END <= command.cut_card_from_end <= highest:
        return (
            "INVALID_SETTINGS",
            f"with {command.decks} decks the cut card must sit {MIN_CUT_CARD_FROM_END} to "
            f"{highest} cards from the end, not {command.cut_card_from_end}",
        )
    return None
