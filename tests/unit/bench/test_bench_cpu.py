"""The benchmark's CPU accounting: what each part of the system spent, per bet."""

from __future__ import annotations

from services.dev.bench.cpu import CpuCell, budget_text, capacity_text, cpu_table


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


def test_the_budget_is_what_a_sustained_bar_leaves_settlement_once_the_rest_is_paid() -> None:
    # per bet: shoe 10, dealing 20, kafka 30, driver 25 (85 us), settlement 100 us
    cpu = {"shoe": 0.1, "dealing": 0.2, "settlement": 1.0, "kafka": 0.3, "driver": 0.25}
    cell = CpuCell("sqlite", tables=10, bets=1_000, settled=10_000, seconds=1.0, cpu=cpu)
    # 2 cores at 10,000 bets/s: 200 us a bet for every process together
    text = budget_text(cell, target=10_000, cores=2)
    assert "give every process on it 200 us of CPU per bet together" in text
    assert "used 85 us per bet, which leaves settlement 115 us per bet; it used 100" in text
    # at 25,000 bets/s: 80 us a bet, less than the rest already takes
    text = budget_text(cell, target=25_000, cores=2)
    assert "leaves settlement nothing: no settlement cost meets that bar" in text
    assert budget_text(cell, target=0, cores=2) == ""  # no ceiling measured, no bar
