"""Each stored void against the supervisor's signed decision it keeps (non-repudiation).

Dealing records a void only with the decision it verified (``Coup.Voided`` version 2 keeps
the token). The audit verifies it again, against the supervisors keyring it is given
(``punto-banco audit --supervisors``), as ``platform.security.decisions`` defines the
scheme: a well-formed token, a key of the keyring holding the signature, its holder the
supervisor the void names, the key not retired and the token valid when the void was recorded,
and the claims the stored void's table, coup and reason. Anything else is an error
(``void_not_authorized``). A void recorded before voids were signed (version 1) proves no
decision: a warning (``void_unsigned``).
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
from services.tools.history.views import CoupView, Void


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


def _problem(coup: CoupView, void: Void, keyring: SupervisorKeyring) -> str | None:
    token = void.authorization
    if token is None:
        if void.fact_version < 2:
            return (
                f"voided by {void.supervisor_id!r} before voids were signed: no signed decision "
                "proves who decided"
            )
        return "recorded without the supervisor's signed decision it must keep"
    recorded = datetime.fromisoformat(void.at)
    try:
        decision, key = authenticate(keyring, token)
        check_time(decision, key, recorded)
    except DecisionRefused as refused:
        return f"its signed decision does not hold ({refused.code}): {refused.message}"
    wrong = mismatch(
        decision,
        command_id=decision.decision_id,  # the command is not stored: its id is the token's
        action="void",
        table_id=coup.table_id,
        coup_id=coup.coup_id,
        reason=void.reason,
        supervisor_id=void.supervisor_id,
    )
    if wrong is not None:
        return f"the stored void is not the decision signed: {wrong}"
    return None
