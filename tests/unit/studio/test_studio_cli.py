"""`punto-banco studio simulate` refuses a bad fault schedule, rates or coup pause before it
listens, and takes no seed: its shoe is shuffled by the OS generator."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from services.tools.cli.main import app


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--fault", "3=bogus"], "KIND one of unreadable, doubled, dropped"),
        (["--fault", "416=dropped"], "a card 0 to 415"),
        (["--decks", "1", "--fault", "52=dropped"], "a card 0 to 51"),
        (["--fault", "x=dropped"], "is not INDEX=KIND"),
        (["--fault", "-1=dropped"], "is not INDEX=KIND"),
        (["--dropped", "0.7", "--doubled", "0.7"], "sum to at most 1"),
        (["--device", "shoe 1"], "bad-device"),
        (["--coup-pause", "-1"], "--coup-pause"),
        (["--extra", "1.5"], "--extra"),
    ],
)
def test_a_bad_schedule_is_refused_before_listening(options: list[str], said: str) -> None:
    result = CliRunner().invoke(app, ["studio", "simulate", *options])
    assert result.exit_code == 2
    assert said in result.output


def test_the_simulator_takes_no_seed() -> None:
    result = CliRunner().invoke(app, ["studio", "simulate", "--help"])
    assert result.exit_code == 0 and "seed" not in result.output.lower()
