"""The ``coup`` and ``odds`` commands, through typer's CliRunner."""

from __future__ import annotations

import json
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from services.shared.rules import BetType, get_paytable
from services.tools.cli import game
from tests.unit.rules.test_rules_odds import PUBLISHED_EDGES

app = typer.Typer()
game.register(app)
runner = CliRunner()


def run(*args: str) -> Result:
    return runner.invoke(app, list(args))


def run_json(*args: str) -> dict[str, Any]:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)  # exactly one JSON object and nothing else
    assert isinstance(document, dict)
    return document


def assert_clear_failure(result: Result, *fragments: str) -> None:
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    for fragment in fragments:
        assert fragment in result.stderr


def test_coup_json_has_the_documented_shape() -> None:
    document = run_json("coup", "9H", "2C", "KD", "5S", "3H")
    assert document == {
        "player": {"cards": ["9H", "KD"], "total": 9},
        "banker": {"cards": ["2C", "5S"], "total": 7},
        "outcome": "PLAYER",
        "natural": True,
        "player_pair": False,
        "banker_pair": False,
        "cards_used": 4,
        "unused": ["3H"],
        "payouts": {
            "player": 100,
            "banker": -100,
            "tie": -100,
            "player_pair": -100,
            "banker_pair": -100,
            "either_pair": -100,
            "perfect_pair": -100,
            "dragon_bonus_player": 100,  # a natural win
            "dragon_bonus_banker": -100,
            "big": -100,
            "small": 150,
        },
    }


def test_coup_banker_win_pays_95_and_a_player_pair_1100() -> None:
    document = run_json("coup", "KC", "9D", "KH", "TS")
    assert document["outcome"] == "BANKER"
    assert document["player_pair"] is True
    assert document["payouts"] == {
        "player": -100,
        "banker": 95,
        "tie": -100,
        "player_pair": 1100,
        "banker_pair": -100,
        "either_pair": 500,
        "perfect_pair": -100,
        "dragon_bonus_player": -100,
        "dragon_bonus_banker": 100,
        "big": -100,
        "small": 150,
    }


def test_coup_pays_each_paytable_s_own_bets() -> None:
    # Player 2+4=6 stands; Banker A+4=5 draws 2 -> a three-card 7.
    cards = ("2C", "AD", "4H", "4S", "2D")
    ez = run_json("coup", *cards, "--paytable", "ez-baccarat")["payouts"]
    assert (ez["banker"], ez["dragon_7"], ez["panda_8"]) == (0, 4000, -100)
    assert "super_6" not in ez and "big" not in ez
    no_commission = run_json("coup", *cards, "--paytable", "no-commission")["payouts"]
    assert (no_commission["banker"], no_commission["super_6"]) == (100, -100)
    assert "dragon_7" not in no_commission


@pytest.mark.parametrize(("paytable", "tie"), [("standard", 800), ("tie-9-to-1", 900)])
def test_coup_tie_pushes_player_and_banker_and_pays_the_paytable(paytable: str, tie: int) -> None:
    document = run_json("coup", "9C", "9D", "KH", "KS", "--paytable", paytable)
    assert document["outcome"] == "TIE"
    assert document["payouts"]["player"] == 0
    assert document["payouts"]["banker"] == 0
    assert document["payouts"]["tie"] == tie


def test_coup_with_third_cards_and_10_as_a_rank() -> None:
    # Player 2+3 = 5 draws 4 -> 9; Banker 10+A = 1 draws 7 -> 8.
    document = run_json("coup", "2c", "10h", "3d", "AS", "4S", "7D", "9C")
    assert document["player"] == {"cards": ["2C", "3D", "4S"], "total": 9}
    assert document["banker"] == {"cards": ["TH", "AS", "7D"], "total": 8}
    assert document["cards_used"] == 6
    assert document["unused"] == ["9C"]


def test_coup_accepts_comma_separated_cards() -> None:
    assert run_json("coup", "9H,2C,KD", "5S") == run_json("coup", "9H", "2C", "KD", "5S")


def test_coup_prints_a_readable_result() -> None:
    result = run("coup", "KC", "9D", "KH", "TS")
    assert result.exit_code == 0
    assert "Banker wins" in result.stdout
    assert "natural" in result.stdout
    assert "+95" in result.stdout


def test_coup_names_an_unreadable_card() -> None:
    assert_clear_failure(run("coup", "9H", "2C", "KX", "5S"), "'KX'", "not a card")
    assert_clear_failure(run("coup", "9H", "1C", "KD", "5S", "--json"), "'1C'")


@pytest.mark.parametrize(
    ("cards", "message"),
    [
        ((), "at least 4 more cards"),
        (("9H", "2C", "KD"), "at least 1 more card"),
        (("2C", "KD", "3H", "TS"), "needs 2 more cards"),  # Player draws; Banker 0 draws too
        (("6C", "KD", "TH", "4S"), "needs 1 more card"),  # Player stands on 6; Banker draws on 4
    ],
)
def test_coup_with_too_few_cards_says_how_many_more(cards: tuple[str, ...], message: str) -> None:
    assert_clear_failure(run("coup", *cards), "too few cards", message)


def test_coup_rejects_an_unknown_paytable() -> None:
    assert_clear_failure(
        run("coup", "9H", "2C", "KD", "5S", "--paytable", "vegas"), "'vegas'", "tie-9-to-1"
    )


def test_odds_json_for_eight_decks() -> None:
    document = run_json("odds", "--decks", "8")
    assert set(document) == {"probabilities", "house_edge"}
    p, edge = document["probabilities"], document["house_edge"]
    assert set(p) == set(edge) == {bet.value for bet in get_paytable("standard").offered}
    assert round(p["banker"], 6) == 0.458597
    assert round(p["player"], 6) == 0.446247
    assert round(p["tie"], 6) == 0.095156
    assert round(edge["banker"], 4) == 0.0106  # a fraction, not a percentage
    assert round(edge["tie"], 4) == 0.1436
    assert round(edge["player_pair"], 4) == 0.1036


def test_odds_json_follows_the_paytable() -> None:
    document = run_json("odds", "--decks", "8", "--paytable", "tie-9-to-1")
    assert round(document["house_edge"]["tie"], 4) == 0.0484


@pytest.mark.parametrize(("paytable", "bet", "percent", "source"), PUBLISHED_EDGES)
def test_odds_gives_the_published_edges_of_each_paytable(
    paytable: str, bet: BetType, percent: str, source: str
) -> None:
    """The same published figures as the engine's (tests/unit/rules/test_rules_odds.py)."""
    document = run_json("odds", "--decks", "8", "--paytable", paytable)
    assert set(document["house_edge"]) == {b.value for b in get_paytable(paytable).offered}
    assert f"{document['house_edge'][bet.value] * 100:.4f}" == percent, source
    table = run("odds", "--decks", "8", "--paytable", paytable)
    assert f"{percent} %" in table.stdout


def test_odds_of_the_cards_left_by_card_tells_the_perfect_pair() -> None:
    by_card = run_json("odds", "--remaining", ",".join(["8"] * 51 + ["2"]))
    by_rank = run_json("odds", "--remaining", ",".join(["32"] * 12 + ["26"]))
    assert by_card["house_edge"]["perfect_pair"] is not None
    assert by_rank["house_edge"]["perfect_pair"] is None  # ranks cannot tell a suit
    assert by_card["house_edge"]["banker"] == by_rank["house_edge"]["banker"]


def test_odds_of_a_remaining_shoe_by_rank_and_by_value() -> None:
    by_rank = run_json("odds", "--remaining", "24,24,24,24,24,24,24,10,10,24,24,24,24")
    by_value = run_json("odds", "--remaining", "96, 24,24,24,24,24,24,24,10,10")
    assert by_rank["probabilities"]["player"] == by_value["probabilities"]["player"]
    assert by_rank["probabilities"]["player_pair"] > 0
    assert by_value["probabilities"]["player_pair"] is None  # values cannot tell a pair
    assert by_value["house_edge"]["banker_pair"] is None


def test_odds_prints_a_readable_table() -> None:
    result = run("odds", "--decks", "6")
    assert result.exit_code == 0
    assert "0.458653" in result.stdout
    assert "House edge" in result.stdout
    assert "19 to 20" in result.stdout
    assert "dragon_bonus_banker" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--remaining", "4,4,x"), "'x'"),
        (("--remaining", "4,4,4"), "got 3"),
        (("--remaining", "4,4,4,4,4,4,4,4,4,4,4,4,-1"), "negative"),
        (("--remaining", "0,0,0,0,0,0,0,0,0,5"), "at least 6"),
        (("--decks", "9"), "1 to 8"),
        (("--decks", "0"), "1 to 8"),
        ((), "exactly one of"),
        (("--decks", "8", "--remaining", "4,4,4,4,4,4,4,4,4,4"), "exactly one of"),
        (("--decks", "8", "--paytable", "nope"), "'nope'"),
    ],
)
def test_odds_rejects_bad_input_clearly(args: tuple[str, ...], message: str) -> None:
    assert_clear_failure(run("odds", *args), message)
    assert_clear_failure(run("odds", *args, "--json"), message)
