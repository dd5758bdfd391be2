"""The baccarat scoreboards ("roads") of one shoe, computed from its coups. Standard library only.

- **Bead plate**: every coup (ties included) in order, six to a column, top to
  bottom then left to right.
- **Big road**: a column per streak of Banker or Player wins; ties do not take
  a cell but mark the last cell (its ``ties`` count; ties before the first win
  are counted on the first cell when it comes). A streak longer than the rows,
  or one that runs into an occupied cell, turns right along its row (the
  "dragon tail"); the next streak still starts in the column after the
  previous streak's first column.
- **Derived roads** (big eye boy k=1, small road k=2, cockroach road k=3), one
  red or blue entry per big-road win from the first one that has something to
  compare with. With the big road's logical columns (streaks, not their drawn
  positions) and an entry in column ``c`` at row ``r``:

  * ``r == 0`` (a new streak): red if columns ``c-1`` and ``c-1-k`` have the
    same length, else blue;
  * ``r >= 1``: look at column ``c-k``: red if it has a cell at row ``r``
    (it "matches"), blue if it ends exactly at row ``r-1`` (the first empty
    cell), red if it is shorter still (two empty cells in a row).

  The first entry is at column k, row 1 or, if that never comes, column k+1,
  row 0. Red means the big road is repeating itself, blue that it is choppy;
  neither says anything about the next coup (each coup is independent).
  Derived roads are drawn like the big road: a column per streak of one colour.

Every function is pure; cells are plain data (``col``, ``row``, ...) for JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

Outcome = Literal["P", "B", "T"]
Colour = Literal["red", "blue"]

ROWS = 6
DERIVED = {"big_eye_boy": 1, "small_road": 2, "cockroach_road": 3}


@dataclass(frozen=True, slots=True)
class RoadCoup:
    """What the roads need of one coup."""

    outcome: Outcome
    player_pair: bool = False
    banker_pair: bool = False
    natural: bool = False
    total: int | None = None  # the winner's total (the Player's on a tie), for the bead plate


@dataclass(frozen=True, slots=True)
class BeadCell:
    col: int
    row: int
    outcome: Outcome
    player_pair: bool
    banker_pair: bool
    natural: bool
    total: int | None


@dataclass(slots=True)
class BigRoadCell:
    col: int
    row: int
    outcome: Outcome  # "P" or "B"
    ties: int = 0
    player_pair: bool = False
    banker_pair: bool = False
    natural: bool = False


@dataclass(frozen=True, slots=True)
class DerivedCell:
    col: int
    row: int
    colour: Colour


@dataclass
class BigRoad:
    cells: list[BigRoadCell] = field(default_factory=list)
    columns: list[list[BigRoadCell]] = field(default_factory=list)
    """The logical columns (streaks), each cell in order; the derived roads read these."""
    leading_ties: int = 0
    """Ties before the first win (shown on the first cell once there is one)."""


def parse(sequence: str) -> list[RoadCoup]:
    """``"BBPT..."`` -> coups (a test and demo helper; lower case b/p mark a pair on that side)."""
    coups = []
    for char in sequence:
        if char.upper() not in "PBT":
            raise ValueError(f"not an outcome: {char!r} (use P, B or T)")
        outcome: Outcome = "P" if char.upper() == "P" else "B" if char.upper() == "B" else "T"
        coups.append(RoadCoup(outcome, player_pair=char == "p", banker_pair=char == "b"))
    return coups


def bead_plate(coups: Sequence[RoadCoup], rows: int = ROWS) -> list[BeadCell]:
    return [
        BeadCell(
            i // rows,
            i % rows,
            coup.outcome,
            coup.player_pair,
            coup.banker_pair,
            coup.natural,
            coup.total,
        )
        for i, coup in enumerate(coups)
    ]


def place(labels: Iterable[str], rows: int = ROWS) -> list[tuple[int, int, str]]:
    """Grid positions of a sequence of labels drawn as streaks (big road layout)."""
    occupied: set[tuple[int, int]] = set()
    placed: list[tuple[int, int, str]] = []
    previous: str | None = None
    start_col = -1
    col = row = 0
    turned = False
    for label in labels:
        if label != previous:
            start_col += 1
            col, row, turned = start_col, 0, False
            while (col, row) in occupied:  # only with very long tails on very few rows
                col += 1
        elif not turned and row + 1 < rows and (col, row + 1) not in occupied:
            row += 1
        else:
            col += 1
            turned = True
        occupied.add((col, row))
        placed.append((col, row, label))
        previous = label
    return placed


def big_road(coups: Sequence[RoadCoup], rows: int = ROWS) -> BigRoad:
    road = BigRoad()
    wins = [coup for coup in coups if coup.outcome != "T"]
    positions = place((coup.outcome for coup in wins), rows)
    wins_iter = iter(zip(wins, positions, strict=True))
    previous: str | None = None
    pending_ties = 0
    win_index = 0
    for coup in coups:
        if coup.outcome == "T":
            if road.cells:
                road.cells[-1].ties += 1
            else:
                pending_ties += 1
            continue
        win, (col, row, _label) = next(wins_iter)
        cell = BigRoadCell(
            col,
            row,
            win.outcome,
            ties=pending_ties,
            player_pair=win.player_pair,
            banker_pair=win.banker_pair,
            natural=win.natural,
        )
        if pending_ties:
            road.leading_ties = pending_ties
            pending_ties = 0
        road.cells.append(cell)
        if win.outcome != previous:
            road.columns.append([])
        road.columns[-1].append(cell)
        previous = win.outcome
        win_index += 1
    if pending_ties and not road.cells:
        road.leading_ties = pending_ties
    return road


def derived_colours(columns: Sequence[Sequence[object]], k: int) -> list[Colour]:
    """The red/blue entries of the derived road with offset ``k`` (1, 2 or 3)."""
    lengths = [len(column) for column in columns]
    colours: list[Colour] = []
    for c, length in enumerate(lengths):
        for r in range(length):
            if r == 0:
                if c - 1 - k < 0:
                    continue
                colours.append("red" if lengths[c - 1] == lengths[c - 1 - k] else "blue")
            else:
                if c - k < 0:
                    continue
                reference = lengths[c - k]
                if reference > r:
                    colours.append("red")
                elif reference == r:
                    colours.append("blue")
                else:
                    colours.append("red")
    return colours


def derived_road(
    columns: Sequence[Sequence[object]], k: int, rows: int = ROWS
) -> list[DerivedCell]:
    return [
        DerivedCell(col, row, "red" if label == "red" else "blue")
        for col, row, label in place(derived_colours(columns, k), rows)
    ]


def scoreboard(coups: Sequence[RoadCoup], rows: int = ROWS) -> dict[str, object]:
    """Every road of a shoe as JSON-ready data (the dashboard's ``roads``)."""
    big = big_road(coups, rows)
    board: dict[str, object] = {
        "bead_plate": [asdict(cell) for cell in bead_plate(coups, rows)],
        "big_road": [asdict(cell) for cell in big.cells],
        "leading_ties": big.leading_ties,
    }
    for name, k in DERIVED.items():
        board[name] = [asdict(cell) for cell in derived_road(big.columns, k, rows)]
    return board
