"""One list of check codes: every problem the audit or the demo's ledger can report.

The values are those of the audit's JSON report (``findings.Code`` is :class:`Check`);
the demo's ledger (``ProblemKind`` is :class:`Check` too) reports the same problem under
the same code. The demo's older names for the audit's checks are aliases: the very same
members, so ``Check.WRONG_AMOUNT is Check.WRONG_SETTLEMENT``.
"""

from __future__ import annotations

from enum import StrEnum


class Severity(StrEnum):
    ERROR = "error"  # the record is wrong or was changed: the audit fails
    WARNING = "warning"  # worth a look, not a proof of anything wrong (e.g. unsealed tail)


class Check(StrEnum):
    """Every problem the audit or the demo's ledger can report (values are the audit JSON's)."""

    # tamper evidence (the audit: the stores' rows and seals)
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
    PARTITION_MISSING = "partition_missing"  # a partitioned deployment lacks a partition's store
    # seal anchors (the audit with --anchors: the stores against the signed seals on Kafka)
    ANCHOR_MISSING_IN_STORE = "anchor_missing_in_store"  # truncated, or seals deleted
    ANCHOR_DIGEST_MISMATCH = "anchor_digest_mismatch"  # the chain was recomputed
    ANCHOR_UNSIGNED = "anchor_unsigned"  # a record on the seals topic without a signature
    ANCHOR_BAD_SIGNATURE = "anchor_bad_signature"  # a forged or misplaced anchor
    SEAL_NOT_ANCHORED = "seal_not_anchored"  # a warning: a gap in the anchors, later ones there
    # shoe
    COMMITMENT_MISMATCH = "commitment_mismatch"
    NOT_A_FULL_SHOE = "not_a_full_shoe"
    REVEAL_DIFFERS = "reveal_differs"
    WRONG_BURN = "wrong_burn"
    WRONG_CARD = "wrong_card"
    DRAW_OUT_OF_ORDER = "draw_out_of_order"
    CARD_DRAWN_TWICE = "card_drawn_twice"
    SHOE_NOT_REVEALED = "shoe_not_revealed"
    # studio shoe (no commitment: its cards are its device's reads, docs/security.md)
    READ_SEQUENCE_BROKEN = "read_sequence_broken"  # a read taken out of the device's order
    READ_NOT_ACCOUNTED = "read_not_accounted"  # a read neither used, a signal, nor kept held
    HOLD_NOT_RECORDED = "hold_not_recorded"  # a gap or a held read without its Held
    READ_POSITIONS_BROKEN = "read_positions_broken"  # cards read not at 0, 1, 2... in turn
    CARD_BEYOND_DECKS = "card_beyond_decks"  # a card read more often than the decks hold
    CARD_NOT_AS_READ = "card_not_as_read"  # a burned or drawn card is not the one read there
    STUDIO_CLOSE_DIFFERS = "studio_close_differs"  # StudioShoeClosed is not what was read
    # coup
    TABLEAU_VIOLATED = "tableau_violated"
    WRONG_RESULT = "wrong_result"
    CARD_NOT_FROM_SHOE = "card_not_from_shoe"
    COUP_INCOMPLETE = "coup_incomplete"
    VOID_WITHOUT_SUPERVISOR = "void_without_supervisor"
    # supervisors' decisions (the audit, given the supervisors keyring)
    VOID_NOT_AUTHORIZED = "void_not_authorized"  # its signed decision does not hold
    VOID_UNSIGNED = "void_unsigned"  # a warning: recorded before voids were signed
    DECISIONS_NOT_VERIFIED = "decisions_not_verified"  # a warning: no keyring to verify with
    CORRECTION_NOT_AUTHORIZED = "correction_not_authorized"  # a result corrected unsigned
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
    NOT_CORRECTED = "not_corrected"  # a corrected result whose differences were never paid
    WRONG_CORRECTION = "wrong_correction"  # a BetCorrected not what the corrected cards give
    # the two services' views
    VIEWS_DISAGREE = "views_disagree"
    # answers to bets (the demo's ledger: only the sender knows what it sent)
    ANSWER_CHANGED = "answer_changed"
    NEVER_ANSWERED = "never_answered"
    UNEXPECTED_ANSWER = "unexpected_answer"
    ACCEPTED_AFTER_OUTCOME = "accepted_after_outcome"  # a warning: a heuristic on occurred_at
    ACCEPTED_AND_REJECTED = "accepted_and_rejected"
    # the demo's names for the audit's checks (aliases: the same members)
    WRONG_AMOUNT = "wrong_settlement"
    TABLEAU_MISMATCH = "wrong_result"
    COUP_RESOLVED_TWICE = "wrong_result"
    COUP_SETTLED_TWICE = "settled_twice"
    COUP_TOTALS_MISMATCH = "wrong_totals"
    REFUNDED_TWICE = "wrong_refund"
    NEVER_REFUNDED = "not_refunded"
    REVEAL_MISMATCH = "reveal_differs"
    ACCEPTED_OUTSIDE_TERMS = "accepted_invalid"
