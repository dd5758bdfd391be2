"""What only the demo knows about each bet: what it sent, and every answer it got.

The views of :mod:`services.tools.history` keep what the services decided (a book's accepted
and refused bets, its settlements and refunds); a bettor also knows what it sent and in
which order the answers came: the first answer that binds (a refusal such as NO_SUCH_COUP
does not use up the bet id), every refusal by its event id (each reuse of an id with other
content is one DUPLICATE_BET_ID), and the coups whose messages named the bet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from contracts import NON_BINDING, BetAccepted, BetRejected
from services.dev.demo.bettors import PlannedBet
from services.dev.demo.checks import ACCEPTED, DUPLICATE_BET_ID, Problem, ProblemKind

Coup = tuple[str, str]
"""(table id, coup id)."""


@dataclass
class BetAnswers:
    bet_id: str
    planned: list[PlannedBet] = field(default_factory=list)
    first_answer: str | None = None  # ACCEPTED or a rejection code
    accepted_in: Coup | None = None  # where it was first accepted
    rejections: dict[UUID, BetRejected] = field(default_factory=dict)
    coups: list[Coup] = field(default_factory=list)  # every coup a message about it named

    def named(self, coup: Coup) -> None:
        if coup not in self.coups:
            self.coups.append(coup)


class Answers:
    """Every bet sent or answered, by id; ``problems``: answers that changed their mind."""

    def __init__(self) -> None:
        self.bets: dict[str, BetAnswers] = {}
        self.problems: list[Problem] = []

    def bet(self, bet_id: str) -> BetAnswers:
        answers = self.bets.get(bet_id)
        if answers is None:
            answers = self.bets[bet_id] = BetAnswers(bet_id)
        return answers

    def expect(self, bet: PlannedBet) -> None:
        self.bet(bet.bet_id).planned.append(bet)

    def accepted(self, event: BetAccepted, first: tuple[str, int, str] | None) -> None:
        """A BetAccepted seen; ``first``: (bet type, amount, coup) of its first acceptance
        (None when this is the first)."""
        bet = self.bet(event.bet_id)
        bet.named((event.table_id, event.coup_id))
        if bet.accepted_in is not None:
            if first is not None and first != (event.bet_type, event.amount, event.coup_id):
                self.problems.append(
                    Problem(
                        ProblemKind.ANSWER_CHANGED,
                        f"accepted again with other terms: {event.bet_type} {event.amount} "
                        f"(first {first[0]} {first[1]})",
                        event.bet_id,
                        event.coup_id,
                    )
                )
            return
        bet.accepted_in = (event.table_id, event.coup_id)
        if bet.first_answer is None or bet.first_answer in NON_BINDING:
            bet.first_answer = ACCEPTED

    def rejected(self, event: BetRejected) -> None:
        bet = self.bet(event.bet_id)
        code = event.reason_code
        binding = code not in NON_BINDING and code != DUPLICATE_BET_ID
        if binding and bet.first_answer not in (None, code, *NON_BINDING):
            self.problems.append(
                Problem(
                    ProblemKind.ANSWER_CHANGED,
                    f"answered {code} after {bet.first_answer}",
                    event.bet_id,
                    event.coup_id,
                )
            )
        bet.rejections[event.event_id] = event
        if bet.first_answer is None or (bet.first_answer in NON_BINDING and binding):
            bet.first_answer = code

    def unanswered(self) -> list[str]:
        """Bet ids sent that got no answer yet."""
        return [b.bet_id for b in self.bets.values() if b.planned and b.first_answer is None]
