"""Settlement believes cards, not claims: a claimed coup result checked against the rules engine.

Dealing's ``CoupResolved`` claims hands, totals, an outcome, a natural and pairs. Settlement
pays nothing on the claim itself: :func:`check_claim` rebuilds the coup from the claimed
cards in dealing order (Player, Banker, Player, Banker, then the third cards the tableau
gives), resolves it with :func:`services.shared.rules.tableau.resolve_coup`, and compares every
claimed fact; and the cards themselves must be the ones the shoe drew for the coup (its
``CardDrawn`` messages, in shoe order). Any difference is a reason code and a message for an
incident, never a payout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from services.shared.rules.cards import Card, CardParseError
from services.shared.rules.tableau import CoupResult, NotEnoughCards, resolve_coup


@dataclass(frozen=True, slots=True)
class Claim:
    """What a CoupResolved claims (kept in the book while the shoe's cards are awaited)."""

    coup_number: int
    shoe_id: str
    player_cards: tuple[str, ...]
    banker_cards: tuple[str, ...]
    player_total: int
    banker_total: int
    outcome: str
    natural: bool
    player_pair: bool
    banker_pair: bool

    @classmethod
    def of(cls, message: Any) -> Claim:
        """The claim of a ``contracts.CoupResolved``."""
        return cls(
            message.coup_number,
            message.shoe_id,
            tuple(message.player_cards),
            tuple(message.banker_cards),
            message.player_total,
            message.banker_total,
            message.outcome,
            message.natural,
            message.player_pair,
            message.banker_pair,
        )

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Claim:
        values = dict(record)
        values["player_cards"] = tuple(values["player_cards"])
        values["banker_cards"] = tuple(values["banker_cards"])
        return cls(**values)

    def record(self) -> dict[str, Any]:
        """The claim as stored in an event (JSON types)."""
        return {
            "coup_number": self.coup_number,
            "shoe_id": self.shoe_id,
            "player_cards": list(self.player_cards),
            "banker_cards": list(self.banker_cards),
            "player_total": self.player_total,
            "banker_total": self.banker_total,
            "outcome": self.outcome,
            "natural": self.natural,
            "player_pair": self.player_pair,
            "banker_pair": self.banker_pair,
        }

    def coup(self) -> CoupResult:
        """The coup the claimed cards make (for a claim :func:`check_claim` holds)."""
        result = _resolve(self)
        if isinstance(result, Refusal):
            raise ValueError(f"the claim makes no coup: {result.message}")
        return result

    @property
    def dealing_order(self) -> tuple[str, ...]:
        """The claimed cards in the order they left the shoe: P, B, P, B, P3, B3."""
        player, banker = self.player_cards, self.banker_cards
        order = [player[0], banker[0], player[1], banker[1]]
        order.extend(player[2:3])
        order.extend(banker[2:3])
        return tuple(order)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a claim is not believed: an incident code and words for an operator."""

    code: str
    message: str


def check_claim(
    claim: Claim, coup_number: int | None, shoe_id: str | None, drawn: Sequence[str]
) -> Refusal | None:
    """None when ``claim`` is exactly what its cards give and its cards are ``drawn``.

    ``coup_number`` and ``shoe_id``: what the book knows of the coup (None: not known);
    ``drawn``: the cards the shoe drew for the coup, in shoe order (all of them).
    """
    if coup_number is not None and claim.coup_number != coup_number:
        return Refusal(
            "UNEXPECTED_RESOLUTION",
            f"claims coup number {claim.coup_number}; the coup opened as number {coup_number}",
        )
    if shoe_id is not None and claim.shoe_id != shoe_id:
        return Refusal(
            "UNEXPECTED_RESOLUTION",
            f"claims shoe {claim.shoe_id}; the coup is dealt from shoe {shoe_id}",
        )
    result = _resolve(claim)
    if isinstance(result, Refusal):
        return result
    facts = {
        "player_total": (claim.player_total, result.player_total),
        "banker_total": (claim.banker_total, result.banker_total),
        "outcome": (claim.outcome, result.outcome.value),
        "natural": (claim.natural, result.natural),
        "player_pair": (claim.player_pair, result.player_pair),
        "banker_pair": (claim.banker_pair, result.banker_pair),
    }
    wrong = [
        f"{name} {said!r} (the cards give {true!r})"
        for name, (said, true) in facts.items()
        if said != true
    ]
    if wrong:
        return Refusal("OUTCOME_MISMATCH", "claims " + "; ".join(wrong))
    if tuple(drawn) != claim.dealing_order:
        return Refusal(
            "CARDS_MISMATCH",
            f"claims the cards {', '.join(claim.dealing_order)}; the shoe drew "
            f"{', '.join(drawn) or 'none'} for the coup",
        )
    return None


def _resolve(claim: Claim) -> CoupResult | Refusal:
    try:
        cards = [Card.parse(code) for code in claim.dealing_order]
    except CardParseError as error:
        return Refusal("IMPOSSIBLE_COUP", str(error))
    try:
        result = resolve_coup(cards)
    except NotEnoughCards as error:
        return Refusal("IMPOSSIBLE_COUP", f"the tableau draws another card: {error}")
    if result.cards_used != len(cards):
        return Refusal(
            "IMPOSSIBLE_COUP",
            f"the tableau stops after {result.cards_used} cards; the claim has {len(cards)}",
        )
    player = tuple(card.code for card in result.player)
    banker = tuple(card.code for card in result.banker)
    if (player, banker) != (claim.player_cards, claim.banker_cards):
        return Refusal(
            "IMPOSSIBLE_COUP",
            f"the tableau gives Player {' '.join(player)} and Banker {' '.join(banker)}, "
            f"not Player {' '.join(claim.player_cards)} and Banker {' '.join(claim.banker_cards)}",
        )
    return result
