"""Percentiles, rates and cell parsing of the end-to-end benchmark (pure, no timing)."""

from __future__ import annotations

import pytest

from services.dev.bench.e2e import coups_for, parse_cells
from services.dev.bench.stats import fraction_of, percentile, rate


def test_percentile_interpolates_between_ranks() -> None:
    samples = [4.0, 1.0, 3.0, 2.0]
    assert percentile(samples, 0.0) == 1.0
    assert percentile(samples, 1.0) == 4.0
    assert percentile(samples, 0.5) == pytest.approx(2.5)
    assert percentile(list(range(101)), 0.99) == pytest.approx(99.0)


def test_percentile_of_one_sample_is_that_sample() -> None:
    assert percentile([7.5], 0.99) == 7.5


@pytest.mark.parametrize("fraction", [-0.1, 1.5])
def test_percentile_refuses_fractions_outside_0_to_1(fraction: float) -> None:
    with pytest.raises(ValueError, match="fraction"):
        percentile([1.0], fraction)


def test_percentile_refuses_no_samples() -> None:
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 0.5)


def test_rate_and_fraction_guard_against_zero() -> None:
    assert rate(10, 2.0) == 5.0
    assert rate(10, 0.0) == 0.0
    assert fraction_of(25.0, 100.0) == 0.25
    assert fraction_of(25.0, 0.0) == 0.0


def test_cells_parse_and_full_run_coups() -> None:
    assert parse_cells("1x10000x2, 10x1000x3") == ((1, 10_000, 2), (10, 1_000, 3))
    assert parse_cells("") == ()
    with pytest.raises(ValueError, match="TABLESxBETSxCOUPS"):
        parse_cells("1x10")
    assert coups_for(1, 10) == 5
    assert coups_for(100, 10_000) == 1
