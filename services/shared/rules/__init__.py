"""The pure Punto Banco game: cards, shoe, tableau, paytables, settlement, validation, exact odds.

Standard library only; imports nothing else of the project. Modules:

- ``cards``: ranks, suits, :class:`Card`, values and hand totals.
- ``shoe``: composition, Fisher-Yates shuffle over ``secrets``, commitment, burn, cut card.
- ``tableau``: the drawing rules and :func:`resolve_coup`.
- ``paytable``: bet types, odds as data, the named paytables and rounding.
- ``settlement``: WIN / LOSE / PUSH of one bet in integer minor units.
- ``validation``: pure checks of a bet, with reason codes.
- ``odds``: exact probabilities and house edges by full enumeration.
"""

from services.shared.rules.cards import (
    ALL_CARDS,
    RANK_VALUES,
    RANKS,
    SUITS,
    Card,
    CardParseError,
    hand_total,
    parse_cards,
)
from services.shared.rules.odds import (
    PROBABILITY_KEYS,
    ExactOdds,
    InvalidCounts,
    exact_odds,
    full_shoe_counts,
    full_shoe_odds,
    house_edges,
    pair_probability,
    rank_counts_of,
)
from services.shared.rules.paytable import (
    DEFAULT_PAYTABLE,
    PAYTABLES,
    BetType,
    Paytable,
    Rounding,
    UnknownPaytable,
    get_paytable,
    round_amount,
)
from services.shared.rules.settlement import (
    BetResult,
    BetSettlement,
    CoupOutcomeLike,
    bet_result,
    settle_bet,
)
from services.shared.rules.shoe import (
    COMMITMENT_SCHEME,
    DEFAULT_DECKS,
    MAX_DECKS,
    MIN_DECKS,
    Burn,
    burn,
    burn_count,
    check_decks,
    commitment,
    composition,
    cut_card_index,
    encode_order,
    new_salt,
    shuffle,
    verify_commitment,
)
from services.shared.rules.tableau import (
    CoupResult,
    NotEnoughCards,
    Outcome,
    Side,
    banker_draws,
    next_side,
    player_draws,
    resolve_coup,
)
from services.shared.rules.validation import (
    BetLimit,
    Rejection,
    RejectionReason,
    parse_amount,
    validate_bet,
)

__all__ = [
    "ALL_CARDS",
    "COMMITMENT_SCHEME",
    "DEFAULT_DECKS",
    "DEFAULT_PAYTABLE",
    "MAX_DECKS",
    "MIN_DECKS",
    "PAYTABLES",
    "PROBABILITY_KEYS",
    "RANKS",
    "RANK_VALUES",
    "SUITS",
    "BetLimit",
    "BetResult",
    "BetSettlement",
    "BetType",
    "Burn",
    "Card",
    "CardParseError",
    "CoupOutcomeLike",
    "CoupResult",
    "ExactOdds",
    "InvalidCounts",
    "NotEnoughCards",
    "Outcome",
    "Paytable",
    "Rejection",
    "RejectionReason",
    "Rounding",
    "Side",
    "UnknownPaytable",
    "banker_draws",
    "bet_result",
    "burn",
    "burn_count",
    "check_decks",
    "commitment",
    "composition",
    "cut_card_index",
    "encode_order",
    "exact_odds",
    "full_shoe_counts",
    "full_shoe_odds",
    "get_paytable",
    "hand_total",
    "house_edges",
    "new_salt",
    "next_side",
    "pair_probability",
    "parse_amount",
    "parse_cards",
    "player_draws",
    "rank_counts_of",
    "resolve_coup",
    "round_amount",
    "settle_bet",
    "shuffle",
    "validate_bet",
    "verify_commitment",
]
