"""Store fixture for platform/shoe integration tests: SQLite file or PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str] | None:
    """None for SQLite (files under tmp_path), else the PostgreSQL settings."""
    if request.param == "postgres":
        env: dict[str, str] = request.getfixturevalue("postgres_env")
        return env
    return None
