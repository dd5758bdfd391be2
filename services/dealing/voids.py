"""Who may void a coup (or correct a studio coup's cards, or its result found wrong after
settlement): a supervisor's signed decision, checked before anything changes.

A ``VoidCoup`` carries the decision as a token (``platform.security.decisions``: a JWT
signed with EdDSA by a key of the supervisors keyring). :class:`VoidAuthority` answers, at
the time dealing handles the command, whether the token is a decision of a supervisor of the
keyring (key known and not retired, signature, validity) for exactly this command (its id,
table, coup, reason and named supervisor), and then whether this coup may be voided on it: a
decision is used once (its id is the command's, so a resent command is a replay), a coup is
voided once, and only within the void window after it opened. Each refusal carries the
``CommandRejected.reason_code`` it is answered with.

Configuration (the Application's environment, ``Settings.eventsourcing_env``):
``PB_SUPERVISOR_KEYRING`` (the keyring file; without it no void is accepted) and
``PB_VOID_WINDOW`` (seconds, default 24 hours).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path

from contracts import CorrectCoup, CorrectResult, VoidCoup
from services.dealing.coups import Coup, CoupPhase
from services.shared.platform.consumer import Refusal
from services.shared.platform.security import (
    Decision,
    DecisionRefused,
    SupervisorKeyring,
    authenticate,
    check_time,
    decision_id_of,
    mismatch,
)
from services.shared.platform.settings import parse_duration
from services.shared.rules.cards import Card
from services.shared.rules.tableau import NotEnoughCards, resolve_coup

DEFAULT_WINDOW = timedelta(hours=24)


class VoidAuthority:
    """Dealing's supervisors keyring and void window, and the checks they make."""

    def __init__(self, keyring: SupervisorKeyring, window: timedelta = DEFAULT_WINDOW) -> None:
        if window <= timedelta(0):
            raise ValueError(f"the void window must be positive, not {window}")
        self.keyring = keyring
        self.window = window

    @classmethod
    def from_env(
        cls, get: Callable[[str], str | None], keyring: SupervisorKeyring | None = None
    ) -> VoidAuthority:
        """From ``PB_SUPERVISOR_KEYRING`` / ``PB_VOID_WINDOW`` (``get``: the Application's
        ``env.get``); ``keyring`` given (tests, the simulation) wins over the file."""
        if keyring is None:
            path = get("PB_SUPERVISOR_KEYRING")
            keyring = SupervisorKeyring.watching(Path(path)) if path else SupervisorKeyring({})
        window = get("PB_VOID_WINDOW")  # seconds, or 90m / 24h / 7d as the setting allows
        seconds = parse_duration(window) if window else None
        return cls(keyring, DEFAULT_WINDOW if seconds is None else timedelta(seconds=seconds))

    def decision_for(
        self, command: VoidCoup | CorrectCoup | CorrectResult, now: datetime
    ) -> Decision | Refusal:
        """The supervisor's decision the command carries, verified for this command."""
        token = command.authorization
        action, what = _ACTIONS[command.type]
        if token is None:
            return Refusal(
                "SUPERVISOR_REQUIRED",
                f"{what} is a supervisor's signed decision: send {command.type} with "
                "authorization (`punto-banco supervisor` makes and sends it)",
            )
        try:
            decision, key = authenticate(self.keyring, token)
            check_time(decision, key, now)
        except DecisionRefused as refused:
            return Refusal(refused.code, refused.message)
        wrong = mismatch(
            decision,
            command_id=command.event_id,
            action=action,
            table_id=command.table_id,
            coup_id=command.coup_id,
            reason=command.reason,
            supervisor_id=command.supervisor_id,
            cards=() if isinstance(command, VoidCoup) else tuple(command.cards),
        )
        if wrong is not None:
            return Refusal(
                "AUTHORIZATION_MISMATCH", f"the authorization is not this command's: {wrong}"
            )
        return decision

    def coup_refusal(self, coup: Coup, decision: Decision, now: datetime) -> Refusal | None:
        """Why ``coup`` may not be voided on ``decision`` now (None: it may)."""
        if coup.phase is CoupPhase.VOIDED:
            stored = coup.void_authorization
            if stored is not None and decision_id_of(stored) == decision.decision_id:
                return Refusal(
                    "AUTHORIZATION_REPLAYED",
                    f"decision {decision.decision_id} voided coup {coup.coup_id} already: a "
                    "decision is used once (the coup stays voided)",
                )
            return Refusal("COUP_NOT_VOIDABLE", f"coup {coup.coup_id} is voided already")
        opened = coup.created_on
        if now - opened > self.window:
            return Refusal(
                "VOID_WINDOW_PASSED",
                f"coup {coup.coup_id} opened at {opened.isoformat(timespec='seconds')}, more "
                f"than {_hours(self.window)} ago (PB_VOID_WINDOW): it can no longer be voided",
            )
        return None

    def result_refusal(
        self, card_source: str, coup: Coup, cards: Sequence[str], decision: Decision, now: datetime
    ) -> Refusal | None:
        """Why ``coup``'s result may not be corrected to ``cards`` on ``decision`` now (None:
        it may): a decision is used once; only a studio table's coup, resolved (not voided),
        within the void window, to a whole coup by the tableau other than its cards now."""
        if decision.decision_id in coup.corrections_made:
            return Refusal(
                "AUTHORIZATION_REPLAYED",
                f"decision {decision.decision_id} corrected coup {coup.coup_id} already: a "
                "decision is used once",
            )
        why = _result_refusal(card_source, coup, cards)
        if why is None and now - coup.created_on > self.window:
            why = (
                f"coup {coup.coup_id} opened at {coup.created_on.isoformat(timespec='seconds')}, "
                f"more than {_hours(self.window)} ago (PB_VOID_WINDOW): its result can no longer "
                "be corrected"
            )
        return None if why is None else Refusal("RESULT_NOT_CORRECTABLE", why)


_ACTIONS = {
    "VoidCoup": ("void", "voiding a coup"),
    "CorrectCoup": ("correct", "correcting a coup's cards"),
    "CorrectResult": ("correct-result", "correcting a coup's result"),
}
"""A command type -> the action its decision signs, and what it does (in words)."""


def _result_refusal(card_source: str, coup: Coup, cards: Sequence[str]) -> str | None:
    if card_source != "studio":
        return f"table {coup.table_id} is not a studio table: its cards are its shoe's draws"
    if coup.phase is not CoupPhase.RESOLVED:
        return f"coup {coup.coup_id} is not resolved ({coup.phase.lower()})"
    if list(cards) == coup.result_cards:
        return f"coup {coup.coup_id}'s cards are {' '.join(cards)} already: nothing to correct"
    return None if _whole(cards) else f"{' '.join(cards)} is not a whole coup by the tableau"


def _whole(cards: Sequence[str]) -> bool:
    """Whether ``cards`` (in dealing order) are exactly a coup by the tableau."""
    try:
        return resolve_coup([Card.parse(card) for card in cards]).cards_used == len(cards)
    except NotEnoughCards:
        return False


def _hours(window: timedelta) -> str:
    hours = window.total_seconds() / 3600
    return f"{hours:g} hours" if hours >= 1 else f"{window.total_seconds():g} seconds"


def correction_refusal(
    card_source: str, current_coup_id: str | None, coup: Coup, cards: Sequence[str]
) -> str | None:
    """Why ``coup`` may not be corrected to ``cards`` (None: it may): only a studio table's
    coup being dealt, to a whole coup by the tableau that begins with the cards dealt to it."""
    if card_source != "studio":
        return f"table {coup.table_id} is not a studio table: its cards are its shoe's draws"
    if coup.coup_id != current_coup_id or coup.phase is not CoupPhase.DEALING:
        return f"coup {coup.coup_id} is not being dealt ({coup.phase.lower()})"
    if list(cards[: len(coup.dealt)]) != coup.dealt:
        return f"coup {coup.coup_id} was dealt {' '.join(coup.dealt)}: the cards must begin so"
    return None if _whole(cards) else f"{' '.join(cards)} is not a whole coup by the tableau"
