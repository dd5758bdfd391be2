"""The open-bets memory probe (docs/scaling.md's figures) runs and accounts every bet."""

from __future__ import annotations

from pathlib import Path

from services.dev.bench.open_bets import measure


def test_the_probe_measures_a_book_of_accepted_bets_open_and_settled(tmp_path: Path) -> None:
    figures = measure(600, tmp_path / "settlement.sqlite")
    assert figures["bets"] == 600
    assert figures["open"] > 0 and figures["first"] > 0 and figures["settled"] > 0
    longest = measure(600, tmp_path / "longest.sqlite", longest=True)
    # 64 + 128 characters of 4 bytes each, against about 27 of 1 byte: more than 500 B a bet
    assert longest["open"] > figures["open"] + 500
