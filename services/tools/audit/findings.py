"""What the audit found: one :class:`Finding` per problem, naming what it concerns."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    ERROR = "error"  # the record is wrong or was changed: the audit fails
    WARNING = "warning"  # worth a look, not a proof of anything wrong (e.g. unsealed tail)


class Code(StrEnum):
    # tamper evidence
    ROW_ALTERED = "row_altered"
    ROW_DELETED = "row_deleted"
    ROW_INSERTED = "row_inserted"
    ROWS_SWAPPED = "rows_swapped"
    ROW_MOVED = "row_moved"
    SEAL_BROKEN = "seal_broken"
    SEAL_CHAIN_BROKEN = "seal_chain_broken"
    VERSION_GAP = "version_gap"
    UNSEALED_TAIL = "unsealed_tail"
    NOT_SEALED = "not_sealed"
    UNREADABLE_EVENT = "unreadable_event"
    # shoe
    COMMITMENT_MISMATCH = "commitment_mismatch"
    NOT_A_FULL_SHOE = "not_a_full_shoe"
    REVEAL_DIFFERS = "reveal_differs"
    WRONG_BURN = "wrong_burn"
    WRONG_CARD = "wrong_card"
    DRAW_OUT_OF_ORDER = "draw_out_of_order"
    CARD_DRAWN_TWICE = "card_drawn_twice"
    SHOE_NOT_REVEALED = "shoe_not_revealed"
    # coup
    TABLEAU_VIOLATED = "tableau_violated"
    WRONG_RESULT = "wrong_result"
    CARD_NOT_FROM_SHOE = "card_not_from_shoe"
    COUP_INCOMPLETE = "coup_incomplete"
    VOID_WITHOUT_SUPERVISOR = "void_without_supervisor"
    # bets
    NEVER_SETTLED = "never_settled"
    SETTLED_TWICE = "settled_twice"
    WRONG_SETTLEMENT = "wrong_settlement"
    SETTLED_NOT_ACCEPTED = "settled_not_accepted"
    REJECTED_BET_SETTLED = "rejected_bet_settled"
    ACCEPTED_AFTER_CLOSE = "accepted_after_close"
    ACCEPTED_INVALID = "accepted_invalid"
    ACCEPTED_TWICE = "accepted_twice"
    NOT_REFUNDED = "not_refunded"
    WRONG_REFUND = "wrong_refund"
    WRONG_TOTALS = "wrong_totals"
    # the two services' views
    VIEWS_DISAGREE = "views_disagree"


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem; ``store``/``notification_id`` say where in which store, if known."""

    severity: Severity
    code: Code
    message: str
    table_id: str | None = None
    shoe_id: str | None = None
    coup_id: str | None = None
    bet_id: str | None = None
    store: str | None = None
    notification_id: int | None = None

    def where(self) -> str:
        parts = [
            f"table {self.table_id}" if self.table_id else "",
            f"shoe {self.shoe_id}" if self.shoe_id else "",
            f"coup {self.coup_id}" if self.coup_id else "",
            f"bet {self.bet_id}" if self.bet_id else "",
            f"{self.store} store" if self.store else "",
            f"notification {self.notification_id}" if self.notification_id is not None else "",
        ]
        return ", ".join(part for part in parts if part)

    def __str__(self) -> str:
        where = self.where()
        head = f"{self.severity.value.upper()} {self.code.value}"
        return f"{head}: {where}: {self.message}" if where else f"{head}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["severity"] = self.severity.value
        out["code"] = self.code.value
        return {k: v for k, v in out.items() if v is not None}
