"""The dashboard's read model: contracts messages in, the page's numbers out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fractions import Fraction

from contracts import (
    BetAccepted,
    BetLimitSpec,
    BetRefunded,
    BetRejected,
    BetSettled,
    BettingClosed,
    BettingOpened,
    CardDealt,
    CardDrawn,
    CardsBurned,
    CoupRefunded,
    CoupResolved,
    CoupSettled,
    CoupVoided,
    DeadLetter,
    PositionedCard,
    ShoeShuffled,
    TableClosed,
    TableOpened,
)
from services.shared.rules.cards import ALL_CARDS, RANKS, SUITS
from services.shared.rules.odds import card_counts_of, exact_odds, full_shoe_odds
from services.shared.rules.paytable import BetType, get_paytable
from services.tools.dashboard.model import DashboardModel

T = "table-1"
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
COMMITMENT = "0" * 64


class Clock:
    def __init__(self) -> None:
        self.now = T0.timestamp()

    def __call__(self) -> float:
        return self.now


def opened(decks: int = 6, paytable: str = "standard") -> list[object]:
    return [
        TableOpened(
            table_id=T,
            decks=decks,
            paytable=paytable,
            limits={"player": BetLimitSpec(minimum=100, maximum=10_000)},
            currency="EUR",
            betting_window_ms=1000,
            cut_card_from_end=16,
        ),
        ShoeShuffled(
            table_id=T,
            shoe_id="s1",
            decks=decks,
            card_count=52 * decks,
            commitment=COMMITMENT,
            commitment_scheme="sha256",
            cut_card_index=52 * decks - 16,
        ),
    ]


def a_coup(model: DashboardModel, clock: Clock) -> None:
    model.apply(
        CardsBurned(
            table_id=T,
            shoe_id="s1",
            shown_card="2H",
            burned=[PositionedCard(position=1, card="9C"), PositionedCard(position=2, card="KD")],
            next_position=3,
        )
    )
    model.apply(
        BettingOpened(
            table_id=T,
            coup_id="c1",
            coup_number=1,
            shoe_id="s1",
            closes_at=T0 + timedelta(seconds=1),
            last_of_shoe=False,
        )
    )
    for bet_id, bet_type, amount in (("b1", "player", 1000), ("b2", "banker", 2000)):
        model.apply(
            BetAccepted(
                table_id=T,
                bet_id=bet_id,
                coup_id="c1",
                bettor_id="x",
                bet_type=bet_type,
                amount=amount,
                currency="EUR",
            )
        )
    model.apply(
        BetRejected(
            table_id=T,
            bet_id="b3",
            coup_id="c1",
            bettor_id="x",
            bet_type="tie",
            amount="1",
            currency="EUR",
            reason_code="BELOW_MINIMUM",
            message="too small",
        )
    )
    model.apply(BettingClosed(table_id=T, coup_id="c1"))
    cards = [("PLAYER", "8S", 3), ("BANKER", "3H", 4), ("PLAYER", "8D", 5), ("BANKER", "4C", 6)]
    for side, card, position in cards:
        model.apply(
            CardDrawn(
                table_id=T, shoe_id="s1", coup_id="c1", request_id="r", position=position, card=card
            )
        )
        model.apply(
            CardDealt(
                table_id=T,
                coup_id="c1",
                shoe_id="s1",
                side=side,
                card=card,
                position=position,
                card_index_in_hand=1 if position < 5 else 2,
            )
        )
    assert model.tables[T].coup is not None and model.tables[T].coup.phase == "dealing"
    resolved = CoupResolved(
        table_id=T,
        occurred_at=T0,
        coup_id="c1",
        coup_number=1,
        shoe_id="s1",
        player_cards=["8S", "8D"],
        banker_cards=["3H", "4C"],
        player_total=6,
        banker_total=7,
        outcome="BANKER",
        natural=False,
        player_pair=True,
        banker_pair=False,
    )
    model.apply(resolved)
    model.apply(resolved)  # a duplicate after a relay restart changes nothing
    for bet_id, bet_type, stake, result, payout, returned in (
        ("b1", "player", 1000, "LOSE", 0, 0),
        ("b2", "banker", 2000, "WIN", 1900, 3900),
    ):
        model.apply(
            BetSettled(
                table_id=T,
                bet_id=bet_id,
                coup_id="c1",
                bettor_id="x",
                bet_type=bet_type,
                result=result,
                stake=stake,
                payout=payout,
                returned=returned,
                currency="EUR",
            )
        )
    settled = CoupSettled(
        table_id=T, coup_id="c1", bets=2, staked=3000, paid=3900, house_result=-900, currency="EUR"
    )
    model.apply(settled, timestamp=T0.timestamp() + 0.25)
    model.apply(settled, timestamp=T0.timestamp() + 9)  # duplicate


def test_a_coup_end_to_end() -> None:
    clock = Clock()
    model = DashboardModel(clock=clock)
    for message in opened():
        model.apply(message)  # type: ignore[arg-type]
    a_coup(model, clock)
    snapshot = model.snapshot()
    [table] = snapshot["tables"]
    assert table["status"] == "open"
    assert table["shoe"]["cards_left"] == 312 - 7
    assert table["shoe"]["cards_to_cut"] == 296 - 7
    assert table["coup"]["phase"] == "settled"
    assert table["coup"]["player"] == ["8S", "8D"] and table["coup"]["house_result"] == -900
    assert table["coups_resolved"] == 1
    assert table["outcomes"] == {"BANKER": 1, "PLAYER": 0, "TIE": 0}
    assert [(c["outcome"], c["player_pair"]) for c in table["roads"]["big_road"]] == [("B", True)]
    assert table["roads"]["bead_plate"][0]["total"] == 7
    assert (table["staked"], table["paid"], table["house_result"]) == (3000, 3900, -900)
    assert table["hold"] == -0.3
    by_bet = {b["bet_type"]: b for b in table["bets"]}
    assert by_bet["player"]["house_result"] == 1000 and by_bet["player"]["hold"] == 1.0
    assert by_bet["banker"]["house_result"] == -1900
    assert table["bets_accepted"] == 2 and table["bets_settled"] == 2
    assert table["rejections"] == {"BELOW_MINIMUM": 1}
    assert table["latency"]["last"] == 0.25 and table["latency"]["count"] == 1
    assert snapshot["bets_accepted"] == 2
    assert snapshot["rejections"] == {"BELOW_MINIMUM": 1}


def test_edges_full_shoe_and_for_the_cards_left() -> None:
    model = DashboardModel(clock=Clock())
    for message in opened():
        model.apply(message)  # type: ignore[arg-type]
    [table] = model.snapshot()["tables"]
    full = full_shoe_odds(6, get_paytable("standard")).house_edge
    by_bet = {b["bet_type"]: b for b in table["bets"]}
    assert by_bet["banker"]["theoretical_edge"] == float(full[BetType.BANKER])
    assert by_bet["banker"]["edge_now"] == float(full[BetType.BANKER])  # nothing dealt yet
    assert abs(by_bet["tie"]["theoretical_edge"] - float(Fraction(1436, 10000))) < 0.001
    assert not any(b["favourable"] for b in table["bets"])


def test_a_side_bet_in_the_players_favour_is_flagged() -> None:
    """One deck; every card but the aces, twos and threes dealt: pairs are far too likely."""
    model = DashboardModel(clock=Clock())
    for message in opened(decks=1):
        model.apply(message)  # type: ignore[arg-type]
    others = [rank + suit for rank in RANKS if rank not in "A23" for suit in SUITS]
    for position, card in enumerate(others):
        model.apply(
            CardDrawn(
                table_id=T, shoe_id="s1", coup_id="c", request_id="r", position=position, card=card
            )
        )
    [table] = model.snapshot()["tables"]
    assert table["shoe"]["cards_left"] == 12
    by_bet = {b["bet_type"]: b for b in table["bets"]}
    # P(pair) = 3 * 4 * 3 / (12 * 11) = 3/11; a pair pays 11: edge = 1 - 12 * 3/11 < 0
    assert abs(by_bet["player_pair"]["edge_now"] - float(1 - Fraction(36, 11))) < 1e-12
    assert by_bet["player_pair"]["favourable"] and by_bet["banker_pair"]["favourable"]


def test_each_bet_type_of_the_paytable_with_its_exact_edge_for_the_cards_left() -> None:
    """An EZ table: its bet types (Dragon 7 and Panda 8, no Super 6); the edge for the cards
    left counts each card (the Perfect Pair's too), beside each bet type's realised hold."""
    model = DashboardModel(clock=Clock())
    for message in opened(decks=2, paytable="ez-baccarat"):
        model.apply(message)  # type: ignore[arg-type]
    gone = ["7C", "7D", "7H", "KS", "QS", "AS", "2S"]
    for position, card in enumerate(gone):
        model.apply(
            CardDrawn(
                table_id=T, shoe_id="s1", coup_id="c", request_id="r", position=position, card=card
            )
        )
    model.apply(
        BetSettled(
            table_id=T, bet_id="d7", coup_id="c", bettor_id="x", bet_type="dragon_7",
            result="WIN", stake=100, payout=4000, returned=4100, currency="EUR",
        )
    )  # fmt: skip
    [table] = model.snapshot()["tables"]
    ez = get_paytable("ez-baccarat")
    assert [b["bet_type"] for b in table["bets"]] == [bet.value for bet in ez.offered]
    left = [*(c for c in ALL_CARDS if c.code not in gone), *ALL_CARDS]
    now = exact_odds(card_counts_of(left), ez).house_edge
    full = full_shoe_odds(2, ez).house_edge
    by_bet = {b["bet_type"]: b for b in table["bets"]}
    for bet in ez.offered:
        assert by_bet[bet.value]["edge_now"] == float(now[bet])
        assert by_bet[bet.value]["theoretical_edge"] == float(full[bet])
    assert by_bet["perfect_pair"]["edge_now"] != by_bet["perfect_pair"]["theoretical_edge"]
    assert by_bet["dragon_7"]["staked"] == 100 and by_bet["dragon_7"]["hold"] == -40.0


def test_bets_per_second_dead_letters_and_closing() -> None:
    clock = Clock()
    model = DashboardModel(clock=clock)
    for message in opened():
        model.apply(message)  # type: ignore[arg-type]
    clock.now += 20
    for i in range(30):
        model.apply(
            BetAccepted(
                table_id=T,
                bet_id=f"b{i}",
                coup_id="c1",
                bettor_id="x",
                bet_type="tie",
                amount=100,
                currency="EUR",
            )
        )
    assert model.snapshot()["bets_per_second"] == 3.0  # 30 bets over the 10 s window
    clock.now += 11
    assert model.snapshot()["bets_per_second"] == 0.0
    model.apply(
        DeadLetter(
            original_topic="punto-banco.bet-commands",
            partition=0,
            offset=7,
            key=None,
            payload_b64="",
            error="not JSON",
            service="settlement",
        )
    )
    model.apply(TableClosed(table_id=T, reason="done"))
    snapshot = model.snapshot()
    assert snapshot["dead_letters"] == 1
    assert snapshot["recent_dead_letters"][0]["error"] == "not JSON"
    assert snapshot["tables"][0]["status"] == "closed"


def test_a_voided_coup_takes_its_money_back_out() -> None:
    clock = Clock()
    model = DashboardModel(clock=clock)
    for message in opened():
        model.apply(message)  # type: ignore[arg-type]
    a_coup(model, clock)
    model.apply(
        CoupVoided(
            table_id=T, coup_id="c1", supervisor_id="sup", reason="misdeal", was_resolved=True
        )
    )
    for bet_id, stake, adjustment in (("b1", 1000, 1000), ("b2", 2000, -1900)):
        model.apply(
            BetRefunded(
                table_id=T,
                bet_id=bet_id,
                coup_id="c1",
                bettor_id="x",
                stake=stake,
                refunded=stake,
                adjustment=adjustment,
                currency="EUR",
            )
        )
    model.apply(CoupRefunded(table_id=T, coup_id="c1", bets=2, refunded=3000, currency="EUR"))
    [table] = model.snapshot()["tables"]
    assert (table["staked"], table["house_result"], table["hold"]) == (0, 0, None)
    assert all(b["staked"] == 0 for b in table["bets"])
    assert table["coups_voided"] == 1 and table["coup"]["phase"] == "voided"
    assert table["bets_refunded"] == 2


def test_two_operators_settling_the_same_bet_id_are_two_bets() -> None:
    """Operators (B2B): bet ids are per operator; the dashboard follows every operator's
    bet-events topic and counts each operator's bet and coup totals."""
    from services.tools.dashboard.server import event_topics

    assert event_topics(("acme", "bravo")) == (
        "punto-banco.shoe-events",
        "punto-banco.table-events",
        "punto-banco.bet-events.acme",
        "punto-banco.bet-events.bravo",
        "punto-banco.studio-reads",
        "punto-banco.incidents",
        "punto-banco.dead-letters",
    )
    clock = Clock()
    model = DashboardModel(clock=clock)
    for message in opened():
        model.apply(message)  # type: ignore[arg-type]
    for operator, returned in (("acme", 2000), ("bravo", 0)):
        model.apply(
            BetSettled(
                table_id=T, bet_id="b1", coup_id="c1", bettor_id="x", bet_type="player",
                result="WIN" if returned else "LOSE", stake=1000, payout=returned // 2,
                returned=returned, currency="EUR", operator=operator,
            )
        )  # fmt: skip
        model.apply(
            CoupSettled(
                table_id=T, coup_id="c1", bets=1, staked=1000, paid=returned,
                house_result=1000 - returned, currency="EUR", operator=operator,
            )
        )  # fmt: skip
    [table] = model.snapshot()["tables"]
    assert table["bets_settled"] == 2
    assert (table["staked"], table["paid"]) == (2000, 2000)
