"""Incidents (topic `punto-banco.incidents`): a fact a service refused to believe.

A service believes what it can verify. When a message claims something the evidence
contradicts (an outcome the cards do not give, a card at a position the shoe did not
deal...), the service refuses it, records an incident in its event store and publishes it
here for the operators: nothing is paid on a claim the cards contradict.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contracts.dead_letter import ServiceName, TopicName
from contracts.envelope import Identifier, Message, TableId, Text, TypeName, Uuid

IncidentCode = Literal[
    "OUTCOME_MISMATCH",
    "CARDS_MISMATCH",
    "IMPOSSIBLE_COUP",
    "UNEXPECTED_RESOLUTION",
    "CONFLICTING_CARD",
    "UNEXPECTED_CARD",
    "COMMITMENT_MISMATCH",
    "WRONG_KEY",
    "WRONG_PARTITION",
    "WALLET_BALANCE_MISMATCH",
    "WALLET_ANSWER_MALFORMED",
    "WALLET_CORRECTION_REFUSED",
    "STUDIO_HOLD",
]
"""What was wrong:

- ``OUTCOME_MISMATCH``: a ``CoupResolved`` whose totals, outcome, natural or pairs are not
  what its own cards give (settlement recomputes them with the rules engine);
- ``CARDS_MISMATCH``: a ``CoupResolved`` whose cards are not the cards the shoe drew for the
  coup (settlement compares them with the shoe's ``CardDrawn``);
- ``IMPOSSIBLE_COUP``: cards no coup can produce (a third card the tableau does not give);
- ``UNEXPECTED_RESOLUTION``: a ``CoupResolved`` for a coup whose betting is not closed, that
  is unknown, or that was settled already with other facts;
- ``CONFLICTING_CARD``: two different cards for one position of a shoe;
- ``UNEXPECTED_CARD``: a card at a position the shoe was not at, for a request not made, or
  one copy too many of a card for the shoe's decks;
- ``COMMITMENT_MISMATCH``: a revealed shoe order that does not match its commitment or the
  cards dealt from it;
- ``WRONG_KEY`` / ``WRONG_PARTITION``: a service's fact whose key is not its table id, or read
  in another partition than its table's (``contracts.MISPLACED``): a table's history is one
  partition, so it was written there by no cell of that table (a stolen key, a bug);
- ``WALLET_BALANCE_MISMATCH``: an operator's wallet answered a call with a balance that does
  not add up (below zero after a debit or a credit): the gateway never uses it for money;
- ``WALLET_ANSWER_MALFORMED``: an operator's wallet answered 200 without a usable balance (not
  JSON, no whole number): no answer, the gateway calls again (a debit is rolled back);
- ``WALLET_CORRECTION_REFUSED``: an operator's wallet refused (4xx) the debit of a corrected
  result's difference (winnings taken back): the player owes it, and the gateway asks again
  until the wallet takes it (or the coup is voided);
- ``STUDIO_HOLD``: a studio table's shoe stopped dealing on what its device read (a gap in
  its sequence, a card the decks or the tableau do not allow, a misdeal...; the message
  starts with the reason, docs/studio.md): nothing settles until a supervisor decides.
"""


class IncidentRaised(Message):
    """A service refused a fact and recorded why; an operator should look."""

    type: Literal["IncidentRaised"] = "IncidentRaised"
    table_id: TableId | None = Field(default=None, description="The table concerned, if any.")
    service: ServiceName = Field(description="The service that refused the fact.")
    code: IncidentCode = Field(description="What was wrong, as a stable code.")
    message: Text = Field(description="What was wrong, in words an operator can act on.")
    coup_id: Identifier | None = Field(default=None, description="The coup concerned, if any.")
    evidence_type: TypeName | None = Field(
        default=None, description="Type of the message refused (e.g. `CoupResolved`)."
    )
    evidence_id: Uuid | None = Field(default=None, description="`event_id` of that message.")
    source_topic: TopicName | None = Field(
        default=None, description="Topic that message was read from."
    )
    partition: int | None = Field(default=None, ge=0, le=2**31 - 1, description="Its partition.")
    offset: int | None = Field(default=None, ge=0, le=2**63 - 1, description="Its offset.")
