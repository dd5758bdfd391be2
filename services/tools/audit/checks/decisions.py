"""Each stored void, and each stored correction of a result, against the supervisor's signed
decision it keeps (non-repudiation).

Dealing records a void only with the decision it verified (``Coup.Voided`` version 2 keeps
the token). The audit verifies it again, against the supervisors keyring it is given
(``punto-banco audit --supervisors``), as ``platform.security.decisions`` defines the
scheme: a well-formed token, a key of the keyring holding the signature, its holder the
supervisor the void names, the key not retired and the token valid when the void was recorded,
and the claims the stored void's table, coup and reason. Anything else is an error
(``void_not_authorized``). A void recorded before voids were signed (version 1) proves no
decision: a warning (``void_unsigned``). A correction of a coup's result (``Coup.Corrected``)
is checked the same way, its decision's ``action`` ``correct-result`` and claim ``cards`` the
corrected cards in dealing order: anything else is ``correction_not_authorized``.
"""

from __future__ import annotations

from datetime import datetime

from services.shared.platform.security import (
    DecisionRefused,
    SupervisorKeyring,
    authenticate,
    check_time,
    mismatch,
)
from services.tools.audit.checks.context import CheckContext
from services.tools.audit.findings import Code
from services.tools.history.views import Correction, CoupView, Void


def check_decisions(ctx: CheckContext, coup: CoupView, keyring: SupervisorKeyring) -> None:
    """Every void of ``coup`` against its signed decision."""
    where = {"table_id": coup.table_id, "shoe_id": coup.shoe_id, "coup_id": coup.coup_id}
    for void in coup.voids:
        ctx.checked["decisions"] += 1
        at = {"store": "dealing", "notification_id": void.notification_id, **where}
        problem = _problem(coup, void, keyring)
        if problem is None:
            continue
        if void.authorization is None and void.fact_version < 2:
            ctx.warn(Code.VOID_UNSIGNED, problem, **at)
        else:
            ctx.error(Code.VOID_NOT_AUTHORIZED, problem, **at)
    for correction in coup.corrections:
        ctx.checked["decisions"] += 1
        wrong = _correction_problem(coup, correction, keyring)
        if wrong is not None:
            at = {"store": "dealing", "notification_id": correction.notification_id, **where}
            ctx.error(Code.CORRECTION_NOT_AUTHORIZED, wrong, **at)


def _correction_problem(
    coup: CoupView, correction: Correction, keyring: SupervisorKeyring
) -> str | None:
    token = correction.authorization
    if token is None:
        return "recorded without the supervisor's signed decision it must keep"
    return _verify(
        "correction",
        token,
        datetime.fromisoformat(correction.at),
        keyring,
        action="correct-result",
        table_id=coup.table_id,
        coup_id=coup.coup_id,
        reason=correction.reason,
        supervisor_id=correction.supervisor_id,
        cards=correction.cards,
    )


def _problem(coup: CoupView, void: Void, keyring: SupervisorKeyring) -> str | None:
    token = void.authorization
    if token is None:
        if void.fact_version < 2:
            return (
                f"voided by {void.supervisor_id!r} before voids were signed: no signed decision "
                "proves who decided"
            )
        return "recorded without the supervisor's signed decision it must keep"
    return _verify(
        "void",
        token,
        datetime.fromisoformat(void.at),
        keyring,
        action="void",
        table_id=coup.table_id,
        coup_id=coup.coup_id,
        reason=void.reason,
        supervisor_id=void.supervisor_id,
    )


def _verify(
    what: str,
    token: str,
    recorded: datetime,
    keyring: SupervisorKeyring,
    *,
    action: str,
    table_id: str,
    coup_id: str,
    reason: str,
    supervisor_id: str,
    cards: tuple[str, ...] = (),
) -> str | None:
    """Why ``token`` is not a decision, valid when ``recorded``, for what the store says."""
    try:
        decision, key = authenticate(keyring, token)
        check_time(decision, key, recorded)
    except DecisionRefused as refused:
        return f"its signed decision does not hold ({refused.code}): {refused.message}"
    wrong = mismatch(
        decision,
        command_id=decision.decision_id,  # the command is not stored: its id is the token's
        action=action,
        table_id=table_id,
        coup_id=coup_id,
        reason=reason,
        supervisor_id=supervisor_id,
        cards=cards,
    )
    if wrong is not None:
        return f"the stored {what} is not the decision signed: {wrong}"
    return None
