"""One valid instance of every message type, for the contract tests."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

import contracts as c

TABLE = "baccarat-1"
WHEN = datetime(2026, 11, 30, 3, 0, 0, 123456, tzinfo=UTC)
CAUSE = UUID("6f1c4f6e-3b86-4b2e-9d7a-4b3f0e2a1c11")
LIMITS = {
    "player": c.BetLimitSpec(minimum=100, maximum=500_000),
    "banker": c.BetLimitSpec(minimum=100, maximum=500_000),
    "tie": c.BetLimitSpec(minimum=100, maximum=50_000),
}
ENVELOPE = {"table_id": TABLE, "occurred_at": WHEN, "causation_id": CAUSE, "correlation_id": None}
DIGEST = "ab" * 32
BET = {"bet_id": "bet-1", "coup_id": "coup-7", "bettor_id": "alice"}


def samples() -> list[c.Message]:
    """A populated instance of each message type, in topic order."""
    return [
        c.OpenTable(
            **ENVELOPE,
            decks=8,
            paytable="tie-9-to-1",
            limits=LIMITS,
            currency="EUR",
            betting_window_ms=15_000,
            cut_card_from_end=14,
        ),
        c.CloseTable(**ENVELOPE, reason="end of session"),
        c.CloseBetting(**ENVELOPE, coup_id="coup-7"),
        c.VoidCoup(
            **ENVELOPE,
            coup_id="coup-7",
            supervisor_id="sup-3",
            reason="misdeal",
            authorization="eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJzdXAtMyJ9.c2lnbmF0dXJl",
        ),
        c.CorrectCoup(
            **ENVELOPE,
            coup_id="coup-7",
            cards=["9S", "2D", "TH", "3C"],
            reason="the lost read was the 2D",
            authorization="eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJzdXAtMyJ9.c2lnbmF0dXJl",
        ),
        c.CorrectResult(
            **ENVELOPE,
            coup_id="coup-7",
            cards=["9S", "2D", "TH", "3C"],
            reason="the video shows the TH, read as a 4H",
            authorization="eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJzdXAtMyJ9.c2lnbmF0dXJl",
        ),
        c.PlaceBet(**ENVELOPE, **BET, bet_type="banker", amount=2500, currency="EUR"),
        c.ShuffleShoe(**ENVELOPE, shoe_id="shoe-2", decks=6, cut_card_from_end=16),
        c.DrawCards(**ENVELOPE, shoe_id="shoe-2", coup_id="coup-7", request_id="r-1", count=4),
        c.CloseShoe(**ENVELOPE, shoe_id="shoe-2"),
        c.ClearCoup(**ENVELOPE, shoe_id="shoe-2", coup_id="coup-7", reason="misdeal"),
        c.AcceptCards(
            **ENVELOPE, shoe_id="shoe-2", coup_id="coup-7", cards=["9S", "2D", "TH", "3C"]
        ),
        c.ShoeShuffled(
            **ENVELOPE,
            shoe_id="shoe-2",
            decks=6,
            card_count=312,
            commitment=DIGEST,
            commitment_scheme="sha256(salt|order)",
            cut_card_index=296,
        ),
        c.CardsBurned(
            **ENVELOPE,
            shoe_id="shoe-2",
            shown_card="2H",
            burned=[
                c.PositionedCard(position=1, card="KD"),
                c.PositionedCard(position=2, card="TS"),
            ],
            next_position=3,
        ),
        c.CardDrawn(
            **ENVELOPE, shoe_id="shoe-2", coup_id="coup-7", request_id="r-1", position=3, card="9H"
        ),
        c.CutCardReached(**ENVELOPE, shoe_id="shoe-2", coup_id="coup-7", position=296),
        c.ShoeClosed(
            **ENVELOPE,
            shoe_id="shoe-2",
            order=["2H", "KD", "TS", "9H"],
            salt="00ff" * 16,
            commitment=DIGEST,
            cards_dealt=4,
        ),
        c.StudioShoeOpened(**ENVELOPE, shoe_id="studio.shoe-1", decks=8, card_count=416),
        c.StudioShoeClosed(
            **ENVELOPE, shoe_id="studio.shoe-1", cards=["2H", "KD", "TS", "9H"], cards_dealt=4
        ),
        c.TableOpened(
            **ENVELOPE,
            decks=8,
            paytable="standard",
            limits=LIMITS,
            currency="EUR",
            betting_window_ms=15_000,
            cut_card_from_end=16,
        ),
        c.TableClosed(**ENVELOPE, reason="end of session"),
        c.BettingOpened(
            **ENVELOPE,
            coup_id="coup-7",
            coup_number=7,
            shoe_id="shoe-2",
            closes_at=WHEN,
            last_of_shoe=False,
        ),
        c.BettingClosed(**ENVELOPE, coup_id="coup-7"),
        c.CardDealt(
            **ENVELOPE,
            coup_id="coup-7",
            shoe_id="shoe-2",
            side="PLAYER",
            card="9H",
            position=3,
            card_index_in_hand=1,
        ),
        c.CoupResolved(
            **ENVELOPE,
            coup_id="coup-7",
            coup_number=7,
            shoe_id="shoe-2",
            player_cards=["9H", "2C", "KD"],
            banker_cards=["5S", "3H"],
            player_total=1,
            banker_total=8,
            outcome="BANKER",
            natural=True,
            player_pair=False,
            banker_pair=False,
        ),
        c.CoupVoided(
            **ENVELOPE, coup_id="coup-7", supervisor_id="sup-3", reason="misdeal", was_resolved=True
        ),
        c.CoupCorrected(
            **ENVELOPE,
            coup_id="coup-7",
            correction_id=CAUSE,
            coup_number=7,
            shoe_id="shoe-2",
            player_cards=["9S", "TH"],
            banker_cards=["2D", "3C"],
            player_total=9,
            banker_total=5,
            outcome="PLAYER",
            natural=True,
            player_pair=False,
            banker_pair=False,
            supervisor_id="sup-3",
            reason="the video shows the TH, read as a 4H",
        ),
        c.CommandRejected(
            **ENVELOPE,
            command_id=CAUSE,
            command_type="VoidCoup",
            reason_code="SUPERVISOR_REQUIRED",
            message="a void needs a supervisor_id",
        ),
        c.BetAccepted(**ENVELOPE, **BET, bet_type="banker", amount=2500, currency="EUR"),
        c.BetRejected(
            **ENVELOPE,
            **BET,
            bet_type="dragon",
            amount="25.5",
            currency="EUR",
            reason_code="UNKNOWN_BET_TYPE",
            message="unknown bet type 'dragon'",
        ),
        c.BetSettled(
            **ENVELOPE,
            **BET,
            bet_type="banker",
            result="WIN",
            stake=2500,
            payout=2375,
            returned=4875,
            currency="EUR",
        ),
        c.BetsClosed(**ENVELOPE, coup_id="coup-7", bets=2, staked=5000, currency="EUR"),
        c.CoupSettled(
            **ENVELOPE,
            coup_id="coup-7",
            bets=2,
            staked=5000,
            paid=4875,
            house_result=125,
            currency="EUR",
        ),
        c.BetRefunded(
            **ENVELOPE, **BET, stake=2500, refunded=2500, adjustment=-2375, currency="EUR"
        ),
        c.CoupRefunded(**ENVELOPE, coup_id="coup-7", bets=2, refunded=5000, currency="EUR"),
        c.BetCorrected(
            **ENVELOPE,
            **BET,
            correction_id=CAUSE,
            bet_type="banker",
            stake=2500,
            previous_result="WIN",
            previous_payout=2375,
            result="LOSE",
            payout=0,
            difference=-4875,
            currency="EUR",
        ),
        c.CoupSettlementCorrected(
            **ENVELOPE,
            coup_id="coup-7",
            correction_id=CAUSE,
            bets=1,
            difference=-4875,
            house_result=5000,
            currency="EUR",
        ),
        c.OpenBook(
            **ENVELOPE,
            coup_id="coup-7",
            coup_number=7,
            shoe_id="shoe-2",
            closes_at=WHEN,
            paytable="standard",
            limits={"banker": c.BetLimitSpec(minimum=100, maximum=500_000)},
            currency="EUR",
        ),
        c.CloseBook(**ENVELOPE, coup_id="coup-7"),
        c.MessageQuarantined(
            occurred_at=WHEN,
            table_id=TABLE,
            service="settlement",
            original_topic=c.BET_EVENTS,
            message_type="BetRejected",
            message_id=CAUSE,
            notification_id=12,
            message_index=3,
            size=2_000_000,
            sha256="ab" * 32,
            reason="2000000 bytes: larger than the broker accepts (1048576)",
        ),
        c.IncidentRaised(
            occurred_at=WHEN,
            table_id=TABLE,
            service="settlement",
            code="OUTCOME_MISMATCH",
            message="CoupResolved claims TIE; the cards give BANKER",
            coup_id="coup-7",
            evidence_type="CoupResolved",
            evidence_id=CAUSE,
            source_topic=c.TABLE_EVENTS,
            partition=1,
            offset=99,
        ),
        c.DeadLetter(
            occurred_at=WHEN,
            original_topic=c.BET_COMMANDS,
            partition=3,
            offset=42,
            key=TABLE,
            headers={"pb-source": "front"},
            payload_b64="bm90IGpzb24=",
            error="not JSON: Expecting value: line 1 column 1 (char 0)",
            service="settlement",
        ),
        c.SealAnchored(
            occurred_at=WHEN,
            service="dealing",
            seal=3,
            from_id=120,
            to_id=181,
            count=61,
            digest="ab" * 32,
            previous_digest="cd" * 32,
            sealed_at=WHEN,
        ),
        c.StudioRead(**ENVELOPE, device="shoe-1", seq=42, what="card", card="TD", read_at=WHEN),
    ]
