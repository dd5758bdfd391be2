"""One list of check codes: the audit's JSON values never change, the demo's names resolve."""

from __future__ import annotations

from services.dev.demo.ledger import ProblemKind
from services.tools.audit.findings import Code
from services.tools.history.codes import Check, Severity

AUDIT_VALUES = {
    "ROW_ALTERED": "row_altered",
    "ROW_DELETED": "row_deleted",
    "ROW_INSERTED": "row_inserted",
    "ROWS_SWAPPED": "rows_swapped",
    "ROW_MOVED": "row_moved",
    "SEAL_BROKEN": "seal_broken",
    "SEAL_CHAIN_BROKEN": "seal_chain_broken",
    "VERSION_GAP": "version_gap",
    "UNSEALED_TAIL": "unsealed_tail",
    "NOT_SEALED": "not_sealed",
    "UNREADABLE_EVENT": "unreadable_event",
    "PARTITION_MISSING": "partition_missing",
    "ANCHOR_MISSING_IN_STORE": "anchor_missing_in_store",
    "ANCHOR_DIGEST_MISMATCH": "anchor_digest_mismatch",
    "ANCHOR_UNSIGNED": "anchor_unsigned",
    "ANCHOR_BAD_SIGNATURE": "anchor_bad_signature",
    "SEAL_NOT_ANCHORED": "seal_not_anchored",
    "COMMITMENT_MISMATCH": "commitment_mismatch",
    "NOT_A_FULL_SHOE": "not_a_full_shoe",
    "REVEAL_DIFFERS": "reveal_differs",
    "WRONG_BURN": "wrong_burn",
    "WRONG_CARD": "wrong_card",
    "DRAW_OUT_OF_ORDER": "draw_out_of_order",
    "CARD_DRAWN_TWICE": "card_drawn_twice",
    "SHOE_NOT_REVEALED": "shoe_not_revealed",
    "READ_SEQUENCE_BROKEN": "read_sequence_broken",
    "READ_NOT_ACCOUNTED": "read_not_accounted",
    "HOLD_NOT_RECORDED": "hold_not_recorded",
    "READ_POSITIONS_BROKEN": "read_positions_broken",
    "CARD_BEYOND_DECKS": "card_beyond_decks",
    "CARD_NOT_AS_READ": "card_not_as_read",
    "STUDIO_CLOSE_DIFFERS": "studio_close_differs",
    "TABLEAU_VIOLATED": "tableau_violated",
    "WRONG_RESULT": "wrong_result",
    "CARD_NOT_FROM_SHOE": "card_not_from_shoe",
    "COUP_INCOMPLETE": "coup_incomplete",
    "VOID_WITHOUT_SUPERVISOR": "void_without_supervisor",
    "VOID_NOT_AUTHORIZED": "void_not_authorized",
    "VOID_UNSIGNED": "void_unsigned",
    "DECISIONS_NOT_VERIFIED": "decisions_not_verified",
    "CORRECTION_NOT_AUTHORIZED": "correction_not_authorized",
    "NOT_CORRECTED": "not_corrected",
    "WRONG_CORRECTION": "wrong_correction",
    "NEVER_SETTLED": "never_settled",
    "SETTLED_TWICE": "settled_twice",
    "WRONG_SETTLEMENT": "wrong_settlement",
    "SETTLED_NOT_ACCEPTED": "settled_not_accepted",
    "REJECTED_BET_SETTLED": "rejected_bet_settled",
    "ACCEPTED_AFTER_CLOSE": "accepted_after_close",
    "ACCEPTED_INVALID": "accepted_invalid",
    "ACCEPTED_TWICE": "accepted_twice",
    "NOT_REFUNDED": "not_refunded",
    "WRONG_REFUND": "wrong_refund",
    "WRONG_TOTALS": "wrong_totals",
    "VIEWS_DISAGREE": "views_disagree",
}
"""The audit's codes as its JSON report has always written them (integrators parse them)."""

DEMO_KINDS = {
    "SETTLED_TWICE": "settled_twice",
    "NEVER_SETTLED": "never_settled",
    "WRONG_AMOUNT": "wrong_settlement",
    "SETTLED_NOT_ACCEPTED": "settled_not_accepted",
    "ACCEPTED_AND_REJECTED": "accepted_and_rejected",
    "ANSWER_CHANGED": "answer_changed",
    "TABLEAU_MISMATCH": "wrong_result",
    "COUP_RESOLVED_TWICE": "wrong_result",
    "COUP_SETTLED_TWICE": "settled_twice",
    "COUP_TOTALS_MISMATCH": "wrong_totals",
    "REFUNDED_TWICE": "wrong_refund",
    "NEVER_REFUNDED": "not_refunded",
    "WRONG_REFUND": "wrong_refund",
    "REVEAL_MISMATCH": "reveal_differs",
    "NEVER_ANSWERED": "never_answered",
    "UNEXPECTED_ANSWER": "unexpected_answer",
    "ACCEPTED_AFTER_OUTCOME": "accepted_after_outcome",
    "ACCEPTED_OUTSIDE_TERMS": "accepted_invalid",
}
"""Every name the demo's ledger reports under, and the one code it is now."""


def test_the_audit_codes_keep_their_json_values() -> None:
    assert {name: Code[name].value for name in AUDIT_VALUES} == AUDIT_VALUES
    assert Code is Check


def test_every_audit_code_is_a_distinct_member() -> None:
    assert len({Code[name] for name in AUDIT_VALUES}) == len(AUDIT_VALUES)


def test_every_name_of_the_demo_resolves_to_one_code() -> None:
    assert {name: ProblemKind[name].value for name in DEMO_KINDS} == DEMO_KINDS
    assert ProblemKind.WRONG_AMOUNT is Check.WRONG_SETTLEMENT
    assert ProblemKind.REVEAL_MISMATCH is Check.REVEAL_DIFFERS


def test_the_codes_of_the_demo_alone_are_new_values() -> None:
    alone = {"accepted_and_rejected", "answer_changed", "never_answered", "unexpected_answer"}
    alone |= {"accepted_after_outcome"}
    assert {c.value for c in Check} == set(AUDIT_VALUES.values()) | alone


def test_both_report_the_same_severities() -> None:
    assert [s.value for s in Severity] == ["error", "warning"]
