"""A settled coup's result corrected (``CoupCorrected``): settlement believes the corrected
cards only if they make the result claimed, then records one ``BetCorrected`` per bet whose
result or payout changes (never a second ``BetSettled``), each with the signed difference
against what the bet returns now, and a ``CoupSettlementCorrected`` per operator; once per
correction, however often it is delivered."""

from __future__ import annotations

from uuid import UUID, uuid4

from eventsourcing.persistence import Tracking

from contracts import (
    BetCorrected,
    BetRefunded,
    BetSettled,
    CoupCorrected,
    CoupSettlementCorrected,
    IncidentRaised,
)
from tests.unit.settlement.harness import POPO, Dealing, Relay, bet, claim, settlement_app

TIE = (["9S", "TH"], ["9D", "TC"])  # 9 to 9: Player and Banker bets push, a Tie bet wins
PLAYER = (["9S", "TH"], ["8D", "TC"])  # the 9D was an 8D: Player wins 9 to 8
BANKER = (["2S", "TH"], ["8D", "TC"])  # and the 9S a 2S: Banker wins 8 to 2


def settled_tie() -> tuple[Dealing, Relay]:
    """Four bets of 1,000 on a coup settled as a Tie: player, banker, tie, player pair."""
    dealing = Dealing(settlement_app(env=POPO))
    dealing.open_table()
    dealing.open_betting("c1")
    for bet_id, bet_type in [("p", "player"), ("b", "banker"), ("t", "tie"), ("pp", "player_pair")]:
        assert dealing.app.place_bet(
            bet(bet_id, bettor_id=f"{bet_id}-1", bet_type=bet_type)
        ).accepted
    dealing.close_betting("c1")
    dealing.resolve("c1", *TIE)
    relay = Relay(dealing.app)
    assert {m.bet_id: m.returned for m in relay.pump() if isinstance(m, BetSettled)} == {
        "p": 1000,
        "b": 1000,
        "t": 9000,
        "pp": 0,
    }
    return dealing, relay


def corrected(
    hands: tuple[list[str], list[str]], correction_id: UUID | None = None, **wrong: object
) -> CoupCorrected:
    """Dealing's CoupCorrected for these hands (its facts computed from them unless ``wrong``
    says otherwise)."""
    resolved = claim("t1", "c1", 1, *hands).model_dump(exclude={"type", "event_id"})
    return CoupCorrected(
        **{**resolved, **wrong},
        correction_id=correction_id or uuid4(),
        supervisor_id="sup-1",
        reason="the video shows the card",
    )


def differences(messages: list[object]) -> dict[str, tuple[str, str, int]]:
    return {
        m.bet_id: (m.previous_result, m.result, m.difference)
        for m in messages
        if isinstance(m, BetCorrected)
    }


def test_each_changed_bet_gets_its_difference_and_nothing_is_settled_again() -> None:
    dealing, relay = settled_tie()
    correction = corrected(PLAYER)
    dealing.send(correction)
    published = relay.pump()
    assert differences(published) == {
        "p": ("PUSH", "WIN", 1000),  # a push turned into a win: the winnings are owed
        "b": ("PUSH", "LOSE", -1000),  # a push turned into a loss: the stake is taken back
        "t": ("WIN", "LOSE", -9000),  # a win turned into a loss: stake and winnings taken back
    }  # the player pair lost either way: no BetCorrected
    [line] = [m for m in published if isinstance(m, BetCorrected) and m.bet_id == "p"]
    assert (line.previous_payout, line.payout, line.stake) == (0, 1000, 1000)
    assert line.correction_id == correction.correction_id and line.bettor_id == "p-1"
    [total] = [m for m in published if isinstance(m, CoupSettlementCorrected)]
    assert (total.bets, total.difference) == (3, -9000)
    assert total.house_result == 4000 - 2000  # staked 4,000; the player bet now returns 2,000
    assert not [m for m in published if isinstance(m, BetSettled | IncidentRaised)]


def test_a_second_correction_is_against_the_latest_result() -> None:
    dealing, relay = settled_tie()
    dealing.send(corrected(PLAYER))
    relay.pump()
    dealing.send(corrected(BANKER))
    assert differences(relay.pump()) == {
        "p": ("WIN", "LOSE", -2000),
        "b": ("LOSE", "WIN", 1950),  # 1,000 back and 950 won (5% commission)
    }


def test_a_correction_delivered_again_pays_nothing_more() -> None:
    dealing, relay = settled_tie()
    correction = corrected(PLAYER)
    dealing.send(correction)
    dealing.send(correction)  # the same correction at another position (a replay)
    dealing.app.handle(correction, dealing.sent[-1][1])  # the same position: no effect
    published = relay.pump()
    assert len([m for m in published if isinstance(m, CoupSettlementCorrected)]) == 1
    assert len(differences(published)) == 3


def test_a_correction_its_cards_contradict_is_an_incident_and_pays_nothing() -> None:
    dealing, relay = settled_tie()
    dealing.send(corrected(PLAYER, outcome="BANKER"))
    dealing.send(corrected((["9S", "TH", "2C"], ["8D", "TC"])))  # Player stands on 9
    published = relay.pump()
    assert [m.code for m in published if isinstance(m, IncidentRaised)] == [
        "OUTCOME_MISMATCH",
        "IMPOSSIBLE_COUP",
    ]
    assert differences(published) == {}


def test_a_void_after_a_correction_takes_back_what_the_corrected_bets_returned() -> None:
    dealing, relay = settled_tie()
    dealing.send(corrected(PLAYER))
    dealing.void("c1", was_resolved=True)
    adjustments = {m.bet_id: m.adjustment for m in relay.pump() if isinstance(m, BetRefunded)}
    assert adjustments == {"p": 1000 - 2000, "b": 1000, "t": 1000, "pp": 1000}


def test_a_voided_or_unsettled_coup_is_not_corrected() -> None:
    dealing, relay = settled_tie()
    dealing.void("c1", was_resolved=True)
    dealing.send(corrected(PLAYER))  # voided: nothing is paid, whatever the result
    dealing.open_betting("c2", number=2)
    dealing.app.handle(
        corrected(PLAYER).model_copy(update={"coup_id": "c2", "coup_number": 2}),
        Tracking("dealing:punto-banco.table-events:0", 99),
    )
    published = relay.pump()
    assert differences(published) == {}
    assert [m.coup_id for m in published if isinstance(m, IncidentRaised)] == ["c2"]
