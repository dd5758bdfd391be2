"""Events of the settlement service (topic `punto-banco.bet-events`). Money in minor units."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from contracts.envelope import (
    BetId,
    BetResultName,
    BetTypeName,
    Count,
    Currency,
    Identifier,
    MinorUnits,
    RejectionCode,
    SignedMinorUnits,
    Stake,
    TableMessage,
    Text,
    UtcDatetime,
    Uuid,
)

EchoedText = Annotated[str, StringConstraints(max_length=40)]
"""A field of a refused bet echoed as received (bounded like the PlaceBet field)."""

PLACED_AT_DESCRIPTION = (
    "When the bet was placed, UTC, as settlement judged it: the time the Kafka broker appended "
    "the PlaceBet to the bet-commands topic (LogAppendTime), else the time settlement received "
    "it; never the client's `occurred_at`. Null on answers recorded before this field existed."
)


OperatorName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]
"""An operator's name (``contracts.topics.OPERATOR_NAME``)."""

OPERATOR_DESCRIPTION = (
    "The operator whose bettor placed the bet: the operator of the bet-commands topic the "
    "PlaceBet came by (set by settlement, never taken from the bet). Absent on the house's "
    "messages (the default operator) and on those published before operators existed."
)


class OperatorMessage(TableMessage):
    """A message about one operator's bets, on that operator's bet-events topic.

    ``operator`` is left out of the JSON when it is the house's (``"house"``, see
    ``contracts.encode``): a deployment with one operator publishes exactly what it did
    before operators existed, byte for byte (a reader takes a message without it as the
    house's)."""


class BetAccepted(OperatorMessage):
    """A bet was accepted; its stake is held until the coup is settled or refunded."""

    type: Literal["BetAccepted"] = "BetAccepted"
    bet_id: BetId = Field(description="The bet (`PlaceBet.bet_id`).")
    coup_id: Identifier = Field(description="The coup.")
    bettor_id: Identifier = Field(description="The bettor.")
    bet_type: BetTypeName = Field(description="The bet type.")
    amount: Stake = Field(description="The stake, minor units.")
    currency: Currency = Field(description="Currency of the stake.")
    placed_at: UtcDatetime | None = Field(default=None, description=PLACED_AT_DESCRIPTION)
    operator: OperatorName = Field(default="house", description=OPERATOR_DESCRIPTION)


class BetRejected(OperatorMessage):
    """A bet was refused; the fields echo what was received."""

    type: Literal["BetRejected"] = "BetRejected"
    bet_id: BetId = Field(description="The bet (`PlaceBet.bet_id`).")
    coup_id: Identifier = Field(description="The coup named by the bet.")
    bettor_id: Identifier = Field(description="The bettor.")
    bet_type: EchoedText = Field(description="The bet type as received.")
    amount: EchoedText = Field(description="The amount as received, as text.")
    currency: EchoedText = Field(description="The currency as received.")
    reason_code: RejectionCode = Field(description="Why, as a stable code.")
    message: Text = Field(description="Why, in words a person can act on.")
    placed_at: UtcDatetime | None = Field(default=None, description=PLACED_AT_DESCRIPTION)
    operator: OperatorName = Field(default="house", description=OPERATOR_DESCRIPTION)


class BetsClosed(TableMessage):
    """Settlement closed the coup's book: every later bet on it is refused (BETTING_CLOSED).

    Sent once per coup when settlement applies dealing's BettingClosed; dealing asks
    the shoe for the coup's cards only after it, so no bet is accepted once a card is out.
    """

    type: Literal["BetsClosed"] = "BetsClosed"
    coup_id: Identifier = Field(description="The coup.")
    bets: Count = Field(description="Number of bets accepted on the coup.")
    staked: MinorUnits = Field(description="Sum of the accepted stakes.")
    currency: Currency = Field(description="Currency of the stakes.")


class BetSettled(OperatorMessage):
    """A bet was settled against the coup's outcome."""

    type: Literal["BetSettled"] = "BetSettled"
    bet_id: BetId = Field(description="The bet.")
    coup_id: Identifier = Field(description="The coup.")
    bettor_id: Identifier = Field(description="The bettor.")
    bet_type: BetTypeName = Field(description="The bet type.")
    result: BetResultName = Field(description="`WIN`, `LOSE` or `PUSH`.")
    stake: Stake = Field(description="The stake.")
    payout: MinorUnits = Field(description="Net winnings (0 unless WIN).")
    returned: MinorUnits = Field(
        description="Paid back to the bettor: stake + payout on WIN, stake on PUSH, 0 on LOSE."
    )
    currency: Currency = Field(description="Currency of all amounts.")
    operator: OperatorName = Field(default="house", description=OPERATOR_DESCRIPTION)


class CoupSettled(OperatorMessage):
    """Every accepted bet on the coup is settled; the coup's totals."""

    type: Literal["CoupSettled"] = "CoupSettled"
    coup_id: Identifier = Field(description="The coup.")
    bets: Count = Field(description="Number of bets settled.")
    staked: MinorUnits = Field(description="Sum of the stakes.")
    paid: MinorUnits = Field(description="Sum of `returned` over the bets.")
    house_result: SignedMinorUnits = Field(
        description="`staked - paid`: the house's win (negative: a loss)."
    )
    currency: Currency = Field(description="Currency of all amounts.")
    operator: OperatorName = Field(default="house", description=OPERATOR_DESCRIPTION)


class BetRefunded(OperatorMessage):
    """A bet on a voided coup was refunded."""

    type: Literal["BetRefunded"] = "BetRefunded"
    bet_id: BetId = Field(description="The bet.")
    coup_id: Identifier = Field(description="The voided coup.")
    bettor_id: Identifier = Field(description="The bettor.")
    stake: Stake = Field(description="The stake.")
    refunded: MinorUnits = Field(description="The amount the bettor ends up with: the stake.")
    adjustment: SignedMinorUnits = Field(
        description=(
            "Credit (+) or debit (-) to the bettor relative to what was already paid: "
            "the stake if the bet was unsettled, stake - returned if it had been settled."
        )
    )
    currency: Currency = Field(description="Currency of all amounts.")
    operator: OperatorName = Field(default="house", description=OPERATOR_DESCRIPTION)


class CoupRefunded(OperatorMessage):
    """Every bet on a voided coup was refunded."""

    type: Literal["CoupRefunded"] = "CoupRefunded"
    coup_id: Identifier = Field(description="The voided coup.")
    bets: Count = Field(description="Number of bets refunded.")
    refunded: MinorUnits = Field(description="Sum of the stakes refunded.")
    currency: Currency = Field(description="Currency of all amounts.")
    operator: OperatorName = Field(default="house", description=OPERATOR_DESCRIPTION)


class BetCorrected(OperatorMessage):
    """A settled bet's result changed: its coup's result was found wrong after settlement and a
    supervisor corrected it (`CoupCorrected`). A compensating event: the `BetSettled` stays
    as it was; `difference` is what moves now."""

    type: Literal["BetCorrected"] = "BetCorrected"
    bet_id: BetId = Field(description="The bet.")
    coup_id: Identifier = Field(description="The corrected coup.")
    correction_id: Uuid = Field(
        description="The correction (`CoupCorrected.correction_id`): one BetCorrected per bet "
        "and correction."
    )
    bettor_id: Identifier = Field(description="The bettor.")
    bet_type: BetTypeName = Field(description="The bet type.")
    stake: Stake = Field(description="The stake.")
    previous_result: BetResultName = Field(description="The result the bet had until now.")
    previous_payout: MinorUnits = Field(description="The net winnings it had until now.")
    result: BetResultName = Field(description="The corrected result: `WIN`, `LOSE` or `PUSH`.")
    payout: MinorUnits = Field(description="The corrected net winnings (0 unless WIN).")
    difference: SignedMinorUnits = Field(
        description="What the bettor is owed now: the corrected amount returned minus the one "
        "returned until now (negative: winnings taken back)."
    )
    currency: Currency = Field(description="Currency of all amounts.")
    operator: OperatorName = Field(default="house", description=OPERATOR_DESCRIPTION)


class CoupSettlementCorrected(OperatorMessage):
    """Every bet of a corrected coup whose result changed has its `BetCorrected`; the totals."""

    type: Literal["CoupSettlementCorrected"] = "CoupSettlementCorrected"
    coup_id: Identifier = Field(description="The corrected coup.")
    correction_id: Uuid = Field(description="The correction (`CoupCorrected.correction_id`).")
    bets: Count = Field(description="Number of bets corrected (BetCorrected).")
    difference: SignedMinorUnits = Field(
        description="Sum of `difference` over the bets: what the bettors are owed now."
    )
    house_result: SignedMinorUnits = Field(
        description="The house's corrected result on the coup: `staked - paid` after the "
        "correction."
    )
    currency: Currency = Field(description="Currency of all amounts.")
    operator: OperatorName = Field(default="house", description=OPERATOR_DESCRIPTION)


_BET_EVENTS = (
    BetAccepted,
    BetRejected,
    BetSettled,
    CoupSettled,
    BetRefunded,
    CoupRefunded,
    BetCorrected,
    CoupSettlementCorrected,
)
for _model in _BET_EVENTS:
    assert list(_model.model_fields)[-1] == "operator", _model  # contracts.encode cuts it there

BetEvent = Annotated[
    BetAccepted
    | BetRejected
    | BetSettled
    | CoupSettled
    | BetRefunded
    | CoupRefunded
    | BetCorrected
    | CoupSettlementCorrected,
    Field(discriminator="type"),
]
"""A message on `punto-banco.bet-events`."""

BookEvent = BetsClosed
"""A message on `punto-banco.book-events` (one per coup: what dealing waits for)."""
