"""The benchmark's CPU accounting: what each part of the system spent, per bet."""

from __future__ import annotations

from services.dev.bench.cpu import CpuCell, capacity_text, cpu_table


def test_per_bet_figures_and_the_capacity_model_follow_from_the_cpu_seconds() -> None:
    cell = CpuCell(
        "postgres",
        tables=100,
        bets=1_000,
        settled=100_000,
        seconds=40.0,
        cpu={
            "shoe": 1.0,
            "dealing": 4.0,
            "settlement": 30.0,
            "kafka": 10.0,
            "postgres": 5.0,
            "driver": 20.0,
        },
    )
    assert cell.micros_per_bet("settlement") == 300.0
    assert cell.system_micros_per_bet == 500.0  # the driver is not the system
    table = cpu_table([cell])
    assert "| postgres | 100 x 1,000 | 10 | 40 | 300 | 100 | 50 | 200 | 500 | 2,000 |" in table
    text = capacity_text(cell, bets_per_coup=600, coup_seconds=60.0)
    assert "one core carries about 2,000 bets/s" in text
    assert "one settlement process tops out near 3,333 bets/s" in text
    # 100 tables x 600 bets a minute = 1,000 bets/s = 0.5 cores at 500 us per bet
    assert "1,000 bets/s: about 0.5 cores in all, 0.30 of them settlement's" in text
