"""The cap on a coup's bets (PB_MAX_BETS_PER_COUP): bets up to it are accepted, one past it is
refused BOOK_FULL (recorded, binding), the count is the book's own (rebuilt on replay), and the
setting reaches settlement from the environment. Each operator's share (PB_MAX_BETS_PER_OPERATOR,
and of the coup's stake limit) is its own: another operator's flood does not take it."""

from __future__ import annotations

import pytest

from contracts import BetAccepted, BetRejected, BetSettled, CoupSettled
from services.settlement.application import SettlementApplication
from services.settlement.bet_index import BetAnswer
from services.settlement.books import MAX_BOOK_EXPOSURE
from services.shared.platform.settings import DEFAULT_MAX_BETS_PER_COUP, Settings, SettingsError
from tests.unit.settlement.harness import POPO, Dealing, Relay, bet, settlement_app
from tests.unit.settlement.test_settlement_operators import OPERATORS, Table

FULL = "coup c1 already holds 3 bets, the most one coup takes; bet on the next coup"


def capped(env: dict[str, str], cap: int = 3, *coups: str) -> Dealing:
    """A table with ``coups`` (default c1) open for bets, settlement capped at ``cap`` a coup."""
    dealing = Dealing(settlement_app(env={**env, "PB_MAX_BETS_PER_COUP": str(cap)}))
    dealing.open_table()
    for number, coup_id in enumerate(coups or ("c1",), 1):
        dealing.open_betting(coup_id, number=number)
    return dealing


def test_a_bet_past_the_cap_is_refused_book_full_and_recorded_and_settlement_goes_on() -> None:
    dealing = capped(POPO, 3, "c1", "c2")
    app, relay = dealing.app, Relay(dealing.app)
    for n in range(3):
        assert app.place_bet(bet(f"b{n}", bettor_id=f"p{n}")).accepted
    refused = app.place_bet(bet("b3", bettor_id="p3"))
    assert (refused.accepted, refused.reason_code) == (False, "BOOK_FULL")
    assert refused.message.startswith(FULL)
    relay.pump()
    [rejected] = relay.of_type(BetRejected)
    assert (rejected.bet_id, rejected.reason_code, rejected.message) == (
        "b3",
        "BOOK_FULL",
        refused.message,
    )
    # Binding: the id keeps its answer; a resend is answered from the record, not re-judged.
    assert app.bet_answer("b3") == BetAnswer("b3", False, "BOOK_FULL", refused.message)
    assert app.place_bet(bet("b3", bettor_id="p3")).repeated
    book = app.get_book("t1", "c1")
    assert book is not None and book.bet_count == 3
    # The next coup has its own count; the full one settles its bets as usual.
    assert app.place_bet(bet("n1", coup_id="c2")).accepted
    dealing.close_betting("c1")
    dealing.resolve("c1", ["9H", "KD"], ["2C", "3S"])
    relay.pump()
    assert sorted(m.bet_id for m in relay.of_type(BetSettled)) == ["b0", "b1", "b2"]
    [total] = relay.of_type(CoupSettled)
    assert (total.coup_id, total.bets, total.staked) == ("c1", 3, 3000)


def test_a_batch_crossing_the_cap_accepts_exactly_up_to_it() -> None:
    """Bets drafted earlier in the batch count; a resend or a refused bet takes no place."""
    dealing = capped(POPO, 3)
    app, relay = dealing.app, Relay(dealing.app)
    assert app.place_bet(bet("b0")).accepted
    batch = [
        bet("b0"),  # a resend of an accepted bet: not a second place
        bet("low", amount=5),  # BELOW_MINIMUM: no place
        bet("b1"),
        bet("b2"),
        bet("b3"),
        bet("b4", bettor_id="bob"),
    ]
    app.handle_batch(batch, None)
    answers = {m.bet_id: m for m in relay.pump()}
    assert {b for b, m in answers.items() if isinstance(m, BetAccepted)} == {"b0", "b1", "b2"}
    refused = {b: m.reason_code for b, m in answers.items() if isinstance(m, BetRejected)}
    assert refused == {"low": "BELOW_MINIMUM", "b3": "BOOK_FULL", "b4": "BOOK_FULL"}
    book = app.get_book("t1", "c1")
    assert book is not None and book.bet_count == 3


def two_operators(**env: str) -> Table:
    """A table whose coup c1 is open for acme's and bravo's bets, settlement set by ``env``."""
    table = Table(settlement_app(env={**POPO, "PB_OPERATORS": ",".join(OPERATORS), **env}))
    table.open_table(limits={"player": (1, 10**14), "banker": (1, 10**14)})
    for operator in OPERATORS:
        table.open_for(operator)
    return table


def test_one_operators_flood_never_takes_another_operators_share_of_the_cap() -> None:
    """The coup's cap (all operators: the memory bound) is shared equally by default: acme's
    bets beyond its half are refused, bravo's half stays bravo's."""
    app = two_operators(PB_MAX_BETS_PER_COUP="4").app
    flood = [app.place_bet(bet(f"a{n}", bettor_id=f"p{n}"), operator="acme") for n in range(5)]
    assert [answer.reason_code for answer in flood] == [None, None, *["BOOK_FULL"] * 3]
    assert flood[2].message.startswith(
        "coup c1 already holds 2 bets of operator acme, the most one coup takes from one operator"
    )
    for n in range(2):
        assert app.place_bet(bet(f"b{n}", bettor_id=f"p{n}"), operator="bravo").accepted
    full = app.place_bet(bet("b2", bettor_id="p2"), operator="bravo")
    assert full.reason_code == "BOOK_FULL" and full.message.startswith(
        "coup c1 already holds 4 bets, the most one coup takes"
    )


def test_an_operators_cap_may_be_set_and_the_coups_cap_still_bounds_them_all() -> None:
    """PB_MAX_BETS_PER_OPERATOR above the equal share over-commits the coup's cap: the first
    to come may then take places the other would have had (docs/scaling.md)."""
    app = two_operators(PB_MAX_BETS_PER_COUP="4", PB_MAX_BETS_PER_OPERATOR="3").app
    answers = [app.place_bet(bet(f"a{n}", bettor_id=f"p{n}"), operator="acme") for n in range(4)]
    assert [answer.reason_code for answer in answers] == [None, None, None, "BOOK_FULL"]
    assert app.place_bet(bet("b0"), operator="bravo").accepted
    assert app.place_bet(bet("b1", bettor_id="q"), operator="bravo").reason_code == "BOOK_FULL"


def test_one_operators_stakes_never_take_another_operators_share_of_the_coups_stake_limit() -> None:
    share = MAX_BOOK_EXPOSURE // 2
    big = 10**14  # the table's limit; a Player bet returns at most twice its stake
    count = share // (2 * big)  # acme's share holds this many, not one more
    app = two_operators().app
    for n in range(count):
        assert app.place_bet(bet(f"a{n}", bettor_id=f"p{n}", amount=big), operator="acme").accepted
    over = app.place_bet(bet("over", bettor_id="x", amount=big), operator="acme")
    assert over.reason_code == "ABOVE_MAXIMUM"
    assert f"limit of {share} minor units for one operator on one coup" in over.message
    assert "could pay back" in over.message
    for n in range(count):
        placed = bet(f"b{n}", bettor_id=f"p{n}", amount=big)
        assert app.place_bet(placed, operator="bravo").accepted


def test_the_cap_comes_from_pb_max_bets_per_coup_through_settlements_settings() -> None:
    default = Settings.from_env("settlement", {})
    assert default.max_bets_per_coup == DEFAULT_MAX_BETS_PER_COUP == 50_000
    settings = Settings.from_env("settlement", {"PB_MAX_BETS_PER_COUP": "7"})
    env = settings.eventsourcing_env()
    assert env["PB_MAX_BETS_PER_COUP"] == "7"
    app = SettlementApplication(env={**env, **POPO})
    assert app.max_bets_per_coup == 7
    assert SettlementApplication(env=POPO).max_bets_per_coup == DEFAULT_MAX_BETS_PER_COUP
    # One operator's cap: an equal share of the coup's by default, or PB_MAX_BETS_PER_OPERATOR.
    assert app.max_bets_per_operator == 7
    two = {**env, **POPO, "PB_OPERATORS": "acme,bravo"}
    assert SettlementApplication(env=two).max_bets_per_operator == 3
    settings = Settings.from_env("settlement", {"PB_MAX_BETS_PER_OPERATOR": "5"})
    assert settings.eventsourcing_env()["PB_MAX_BETS_PER_OPERATOR"] == "5"
    assert (
        SettlementApplication(env={**two, "PB_MAX_BETS_PER_OPERATOR": "5"}).max_bets_per_operator
        == 5
    )


@pytest.mark.parametrize("name", ["PB_MAX_BETS_PER_COUP", "PB_MAX_BETS_PER_OPERATOR"])
@pytest.mark.parametrize("given", ["0", "-5", "many", "2.5", "1e6", "9" * 19])
def test_a_bad_cap_names_the_variable(name: str, given: str) -> None:
    with pytest.raises(SettingsError, match=f"{name} must be a whole number"):
        Settings.from_env("settlement", {name: given})
