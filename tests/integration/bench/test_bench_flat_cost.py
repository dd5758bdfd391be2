"""The 'flat' bench group's pieces run: both stores' batches timed, the ratio computed."""

from __future__ import annotations

from pathlib import Path

from services.dev.bench.flat_cost import RATIO_LIMIT, dealing_times, figures, settlement_times


def test_the_flat_group_times_a_batch_on_each_store(tmp_path: Path) -> None:
    steps: list[str] = []
    fresh, loaded = settlement_times(1_000, 2, tmp_path, steps.append)
    assert len(fresh) == len(loaded) == 2 and min(fresh + loaded) > 0
    assert steps == ["settlement: 0 of 1,000 late bets before"]
    (tmp_path / "dealing").mkdir()
    fresh, loaded = dealing_times(1_000, 2, tmp_path / "dealing", steps.append)
    assert len(fresh) == len(loaded) == 2
    shown = figures("Dealing", "refused commands", 1_000, [0.01, 0.03], [0.02, 0.02])
    assert [f.name for f in shown] == [
        "Dealing batch, 0 before",
        "Dealing batch, 1,000 before",
        "Dealing ratio",
    ]
    assert shown[2].value == 1.0 and shown[2].limit == RATIO_LIMIT
