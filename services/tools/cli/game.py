"""Game commands of the CLI: ``coup`` resolves a coup from cards, ``odds`` prints exact odds.

Both print rich tables for people, or exactly one JSON object with ``--json``.
Bad input prints one clear message on stderr and exits with status 2.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from services.shared.rules import (
    DEFAULT_PAYTABLE,
    MAX_DECKS,
    MIN_DECKS,
    PAYTABLES,
    PROBABILITY_KEYS,
    CardParseError,
    CoupResult,
    ExactOdds,
    InvalidCounts,
    NotEnoughCards,
    Paytable,
    UnknownPaytable,
    exact_odds,
    full_shoe_counts,
    get_paytable,
    parse_cards,
    payoff,
    resolve_coup,
    settle_stake,
)
from services.shared.rules.paytable import CASE_NAMES, WIN, ratio

EXAMPLE_STAKE = 100
"""The stake whose net result ``coup`` reports for every bet type."""

USAGE_ERROR = 2

_PAYTABLE_HELP = f"Paytable: {', '.join(PAYTABLES)}."


def _fail(message: str) -> NoReturn:
    """Print ``message`` on stderr and exit with a usage error."""
    Console(stderr=True, soft_wrap=True).print(
        f"[bold red]Error:[/] {escape(message)}", highlight=False
    )
    raise typer.Exit(USAGE_ERROR)


def _paytable(name: str) -> Paytable:
    try:
        return get_paytable(name)
    except UnknownPaytable as error:
        _fail(str(error))


def coup_payouts(result: CoupResult, paytable: Paytable, stake: int) -> dict[str, int]:
    """Net result of ``stake`` on every bet type of the paytable for this coup."""
    return {
        bet.value: settle_stake(stake, payoff(bet, result, paytable), paytable).net
        for bet in paytable.offered
    }


def coup_document(
    result: CoupResult, unused: list[str], paytable: Paytable, stake: int = EXAMPLE_STAKE
) -> dict[str, Any]:
    """The JSON object printed by ``coup --json``."""
    return {
        "player": {"cards": [card.code for card in result.player], "total": result.player_total},
        "banker": {"cards": [card.code for card in result.banker], "total": result.banker_total},
        "outcome": result.outcome.value,
        "natural": result.natural,
        "player_pair": result.player_pair,
        "banker_pair": result.banker_pair,
        "cards_used": result.cards_used,
        "unused": unused,
        "payouts": coup_payouts(result, paytable, stake),
    }


def _print_coup(result: CoupResult, unused: list[str], paytable: Paytable) -> None:
    console = Console()
    hands = Table(title="Coup", title_justify="left")
    hands.add_column("Side")
    hands.add_column("Cards")
    hands.add_column("Total", justify="right")
    hands.add_column("Pair")
    for side, cards, total, pair in (
        ("Player", result.player, result.player_total, result.player_pair),
        ("Banker", result.banker, result.banker_total, result.banker_pair),
    ):
        codes = " ".join(card.code for card in cards)
        hands.add_row(side, codes, str(total), "yes" if pair else "")
    console.print(hands)
    winner = "Tie" if result.outcome.value == "TIE" else f"{result.outcome.value.title()} wins"
    natural = " (natural)" if result.natural else ""
    console.print(f"[bold]{winner}[/]{natural}, {result.player_total} to {result.banker_total}.")
    dealt = ", ".join(f"{side.value.title()} {card.code}" for side, card in result.sequence)
    console.print(f"Dealt in order: {dealt}.")
    used = f"Cards used: {result.cards_used}"
    if unused:
        used += f"; unused: {' '.join(unused)}"
    console.print(used)
    payouts = Table(
        title=f"Stake {EXAMPLE_STAKE}, paytable {paytable.name}",
        title_justify="left",
    )
    payouts.add_column("Bet")
    payouts.add_column("Result")
    payouts.add_column("On", justify="right")
    payouts.add_column("Net", justify="right")
    for bet in paytable.offered:
        got = payoff(bet, result, paytable)
        settled = settle_stake(EXAMPLE_STAKE, got, paytable)
        colour = {"WIN": "green", "LOSE": "red"}.get(settled.result.value, "yellow")
        on = "" if got.case is None else ratio(got.odds)
        if got.case not in (None, WIN):
            on = f"{CASE_NAMES[got.case]}: {on}"
        payouts.add_row(
            bet.value,
            f"[{colour}]{settled.result.value}[/]",
            on,
            f"{settled.net:+d}" if settled.net else "0",
        )
    console.print(payouts)


def coup(
    cards: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="CARD...",
            help="Cards in the order they left the shoe, e.g. 9H 2C KD 5S 3H "
            "(ranks A 2-9 T/10 J Q K, suits C D H S).",
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON object.")
    ] = False,
    paytable_name: Annotated[
        str, typer.Option("--paytable", metavar="NAME", help=_PAYTABLE_HELP)
    ] = DEFAULT_PAYTABLE,
) -> None:
    """Resolve a coup from cards as they left the shoe (for disputes and tests)."""
    paytable = _paytable(paytable_name)
    try:
        # "9H 2C" and "9H,2C" both work: commas separate cards too.
        parsed = parse_cards(
            token for arg in cards or [] for token in arg.replace(",", " ").split()
        )
    except CardParseError as error:
        _fail(str(error))
    try:
        result = resolve_coup(parsed)
    except NotEnoughCards as error:
        _fail(f"too few cards: {error}")
    unused = [card.code for card in parsed[result.cards_used :]]
    if json_output:
        typer.echo(json.dumps(coup_document(result, unused, paytable)))
    else:
        _print_coup(result, unused, paytable)


def parse_counts(text: str) -> list[int]:
    """Comma-separated whole numbers; raises InvalidCounts naming the bad item."""
    counts = []
    for position, item in enumerate(text.split(","), start=1):
        item = item.strip()
        try:
            count = int(item)
        except ValueError:
            raise InvalidCounts(
                f"count #{position} {item!r} is not a whole number of cards"
            ) from None
        if count < 0:
            raise InvalidCounts(f"count #{position} is negative: {count}")
        counts.append(count)
    return counts


def odds_document(odds: ExactOdds) -> dict[str, Any]:
    """The JSON object printed by ``odds --json``: the outcomes' probabilities and each
    offered bet's chance to win, and each offered bet's house edge, as numbers (null: the
    counts cannot tell)."""
    offered = odds.paytable.offered
    keys = (*PROBABILITY_KEYS, *(bet.value for bet in offered if bet.value not in PROBABILITY_KEYS))
    found = odds.probabilities
    return {
        "probabilities": {key: float(found[key]) if key in found else None for key in keys},
        "house_edge": {
            bet.value: (float(odds.house_edge[bet]) if bet in odds.house_edge else None)
            for bet in offered
        },
    }


def _print_odds(odds: ExactOdds, shoe: str) -> None:
    console = Console()
    paytable = odds.paytable
    table = Table(
        title=f"Exact odds: {shoe}, {odds.card_count} cards, paytable {paytable.name}",
        title_justify="left",
    )
    table.add_column("Bet", no_wrap=True, min_width=max(len(b.value) for b in paytable.offered))
    table.add_column("Wins", justify="right")
    table.add_column("Pays")
    table.add_column("House edge", justify="right")
    table.add_column("Return to player", justify="right")
    for bet in paytable.offered:
        if bet not in odds.house_edge:
            table.add_row(bet.value, "n/a", paytable.describe(bet), "n/a", "n/a")
            continue
        table.add_row(
            bet.value,
            f"{float(odds.win_probability(bet) or 0):.6f}",
            paytable.describe(bet),
            f"{float(odds.house_edge[bet]) * 100:.4f} %",
            f"{float(odds.return_to_player[bet]) * 100:.4f} %",
        )
    console.print(table)
    console.print(
        "Wins: the chance the bet wins (a push is neither). Player and Banker bets push on a "
        "tie; figures are before rounding of single payouts."
    )
    if not odds.pairs_known:
        console.print("Pair figures need counts by rank (13 numbers); values alone cannot tell.")
    elif not odds.suits_known:
        console.print("The Perfect Pair needs counts by card (52 numbers): ranks cannot tell.")


def odds(
    decks: Annotated[
        int | None,
        typer.Option(
            "--decks", metavar="N", help=f"A full shoe of N decks ({MIN_DECKS} to {MAX_DECKS})."
        ),
    ] = None,
    remaining: Annotated[
        str | None,
        typer.Option(
            "--remaining",
            metavar="COUNTS",
            help="Cards left, comma-separated: 52 counts by card (clubs A,2,...,K, then "
            "diamonds, hearts, spades), 13 by rank A,2,...,10,J,Q,K, or 10 by value 0..9.",
        ),
    ] = None,
    paytable_name: Annotated[
        str, typer.Option("--paytable", metavar="NAME", help=_PAYTABLE_HELP)
    ] = DEFAULT_PAYTABLE,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON object.")
    ] = False,
) -> None:
    """Exact odds and house edge of each bet the paytable offers, for a full shoe or the cards
    left in a shoe (full enumeration)."""
    paytable = _paytable(paytable_name)
    if (decks is None) == (remaining is None):
        _fail("give exactly one of --decks N or --remaining COUNTS")
    try:
        if decks is not None:
            if not MIN_DECKS <= decks <= MAX_DECKS:
                _fail(f"--decks must be from {MIN_DECKS} to {MAX_DECKS}, not {decks}")
            counts = full_shoe_counts(decks)
            shoe = f"{decks} deck{'s' if decks > 1 else ''}"
        else:
            counts = parse_counts(remaining or "")
            shoe = "remaining shoe"
        result = exact_odds(counts, paytable)
    except InvalidCounts as error:
        _fail(f"bad --remaining: {error}")
    if json_output:
        typer.echo(json.dumps(odds_document(result)))
    else:
        _print_odds(result, shoe)


def register(app: typer.Typer) -> None:
    """Add the ``coup`` and ``odds`` commands to the CLI."""
    app.command("coup")(coup)
    app.command("odds")(odds)
