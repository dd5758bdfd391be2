"""Percentiles and rates of benchmark samples (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The ``fraction`` (0..1) percentile of ``samples``, linearly interpolated between ranks.

    ``percentile(xs, 0.5)`` is the median; ``percentile(xs, 0.99)`` of fewer than 100 samples
    lies between the two largest. Raises ValueError for no samples or a fraction outside 0..1.
    """
    if not samples:
        raise ValueError("percentile of no samples")
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be within 0..1, got {fraction}")
    ordered = sorted(samples)
    position = fraction * (len(ordered) - 1)
    low = math.floor(position)
    high = math.ceil(position)
    if low == high:
        return ordered[low]
    weight = position - low
    return ordered[low] * (1.0 - weight) + ordered[high] * weight


def rate(count: int, seconds: float) -> float:
    """``count`` per second over ``seconds`` (0 when no time passed)."""
    return count / seconds if seconds > 0 else 0.0


def fraction_of(value: float, ceiling: float) -> float:
    """``value`` as a fraction of ``ceiling`` (0 when there is no ceiling)."""
    return value / ceiling if ceiling > 0 else 0.0
