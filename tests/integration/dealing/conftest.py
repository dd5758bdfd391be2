from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.settlement.stores import DURABLE_STORES, durable_env


@pytest.fixture(params=DURABLE_STORES)
def store_env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    return durable_env(request, tmp_path)
