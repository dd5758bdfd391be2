"""The scoreboards: known sequences give the known bead plate, big road and derived roads."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.tools.dashboard.roads import (
    RoadCoup,
    bead_plate,
    big_road,
    derived_colours,
    derived_road,
    parse,
    place,
    scoreboard,
)


def positions(sequence: str) -> list[tuple[int, int, str]]:
    return [(c.col, c.row, c.outcome) for c in big_road(parse(sequence)).cells]


def test_bead_plate_fills_six_rows_then_the_next_column_ties_included() -> None:
    cells = bead_plate(parse("BPTBBPPB"))
    assert [(c.col, c.row, c.outcome) for c in cells] == [
        (0, 0, "B"),
        (0, 1, "P"),
        (0, 2, "T"),
        (0, 3, "B"),
        (0, 4, "B"),
        (0, 5, "P"),
        (1, 0, "P"),
        (1, 1, "B"),
    ]


def test_big_road_starts_a_column_per_streak() -> None:
    assert positions("BBPPPB") == [
        (0, 0, "B"),
        (0, 1, "B"),
        (1, 0, "P"),
        (1, 1, "P"),
        (1, 2, "P"),
        (2, 0, "B"),
    ]


def test_a_long_streak_turns_right_along_the_bottom_and_blocks_the_next_one() -> None:
    assert positions("BBBBBBBBPPPPPPP") == [
        *((0, row, "B") for row in range(6)),
        (1, 5, "B"),
        (2, 5, "B"),
        (1, 0, "P"),
        (1, 1, "P"),
        (1, 2, "P"),
        (1, 3, "P"),
        (1, 4, "P"),
        (2, 4, "P"),  # (1, 5) is the Banker's tail: the Player's streak turns right above it
        (3, 4, "P"),
    ]


def test_ties_mark_the_last_cell_and_leading_ties_the_first() -> None:
    road = big_road(parse("TBTTPT"))
    assert [(c.col, c.row, c.outcome, c.ties) for c in road.cells] == [
        (0, 0, "B", 3),
        (1, 0, "P", 1),
    ]
    assert road.leading_ties == 1
    only_ties = big_road(parse("TT"))
    assert only_ties.cells == [] and only_ties.leading_ties == 2


def test_pairs_are_kept_on_bead_plate_and_big_road() -> None:
    coups = parse("bpB")
    road = big_road(coups)
    assert [(c.banker_pair, c.player_pair) for c in road.cells] == [
        (True, False),
        (False, True),
        (False, False),
    ]
    assert [(c.banker_pair, c.player_pair) for c in bead_plate(coups)] == [
        (True, False),
        (False, True),
        (False, False),
    ]


def test_big_eye_boy_of_a_known_road() -> None:
    # Columns B2 P3 B1: P row 1 matches column 0 (red), P row 2 finds its first empty cell
    # (blue), the new B column compares lengths 3 and 2 (blue).
    columns = big_road(parse("BBPPPB")).columns
    assert derived_colours(columns, 1) == ["red", "blue", "blue"]
    assert derived_colours(columns, 2) == []
    assert derived_colours(columns, 3) == []


def test_derived_roads_start_later_the_larger_their_offset() -> None:
    columns = big_road(parse("BBPPPBPB")).columns  # lengths 2 3 1 1 1
    assert derived_colours(columns, 1) == ["red", "blue", "blue", "blue", "red"]
    assert derived_colours(columns, 2) == ["blue", "blue"]
    assert derived_colours(columns, 3) == ["blue"]


def test_two_empty_cells_in_a_row_are_red() -> None:
    columns = big_road(parse("BPPP")).columns  # lengths 1 3
    # P row 1: column 0 ends at row 0 -> blue; P row 2: rows 1 and 2 of column 0 empty -> red.
    assert derived_colours(columns, 1) == ["blue", "red"]


def test_derived_roads_are_drawn_in_streaks() -> None:
    columns = big_road(parse("BBPPPBPB")).columns
    cells = derived_road(columns, 1)
    assert [(c.col, c.row, c.colour) for c in cells] == [
        (0, 0, "red"),
        (1, 0, "blue"),
        (1, 1, "blue"),
        (1, 2, "blue"),
        (2, 0, "red"),
    ]


def test_scoreboard_is_plain_data() -> None:
    board = scoreboard(parse("BPT"))
    assert set(board) == {
        "bead_plate",
        "big_road",
        "leading_ties",
        "big_eye_boy",
        "small_road",
        "cockroach_road",
    }
    assert board["big_road"] == [
        {
            "col": 0,
            "row": 0,
            "outcome": "B",
            "ties": 0,
            "player_pair": False,
            "banker_pair": False,
            "natural": False,
        },
        {
            "col": 1,
            "row": 0,
            "outcome": "P",
            "ties": 1,
            "player_pair": False,
            "banker_pair": False,
            "natural": False,
        },
    ]


def test_parse_refuses_other_letters() -> None:
    with pytest.raises(ValueError, match="not an outcome"):
        parse("BX")


@given(st.lists(st.sampled_from("PBT"), max_size=120))
def test_roads_never_overlap_and_count_every_win(outcomes: list[str]) -> None:
    coups = [RoadCoup("P" if o == "P" else "B" if o == "B" else "T") for o in outcomes]
    road = big_road(coups)
    cells = {(c.col, c.row) for c in road.cells}
    assert len(cells) == len(road.cells) == sum(o != "T" for o in outcomes)
    assert all(0 <= c.row < 6 for c in road.cells)
    assert sum(c.ties for c in road.cells) + (0 if road.cells else road.leading_ties) == sum(
        o == "T" for o in outcomes
    )
    wins = len(road.cells)
    for k in (1, 2, 3):
        colours = derived_colours(road.columns, k)
        assert len(colours) <= wins
        drawn = place(colours)
        assert len({(c, r) for c, r, _ in drawn}) == len(drawn)
