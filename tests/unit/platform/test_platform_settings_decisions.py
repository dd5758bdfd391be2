"""Dealing's supervisors keyring and void window: read from the environment, handed to its
Application through ``Settings.eventsourcing_env`` (dealing's alone)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.shared.platform.settings import Settings, SettingsError


def test_dealing_gets_the_default_keyring_and_a_24_hour_window() -> None:
    settings = Settings.from_env("dealing", {"PB_DATA_DIR": "/srv/pb"})
    assert settings.supervisor_keyring_path == Path("/srv/pb/keys/supervisors.json")
    assert settings.supervisor_keys_dir == Path("/srv/pb/keys/supervisors")
    env = settings.eventsourcing_env()
    assert env["PB_SUPERVISOR_KEYRING"] == "/srv/pb/keys/supervisors.json"
    assert float(env["PB_VOID_WINDOW"]) == 24 * 3600


@pytest.mark.parametrize(
    ("given", "seconds"),
    [("3600", 3600), ("90m", 5400), ("2h", 7200), ("7d", 604_800), ("45s", 45)],
)
def test_the_void_window_is_a_duration(given: str, seconds: float) -> None:
    settings = Settings.from_env("dealing", {"PB_VOID_WINDOW": given})
    assert settings.void_window == seconds
    assert float(settings.eventsourcing_env()["PB_VOID_WINDOW"]) == seconds


@pytest.mark.parametrize("given", ["0", "-1h", "soon", "1y"])
def test_a_bad_void_window_names_the_variable(given: str) -> None:
    with pytest.raises(SettingsError, match="PB_VOID_WINDOW must be a duration"):
        Settings.from_env("dealing", {"PB_VOID_WINDOW": given})


def test_the_keyring_variable_wins_and_only_dealing_carries_it() -> None:
    env = {"PB_SUPERVISOR_KEYRING": "/run/secrets/supervisors.json"}
    dealing = Settings.from_env("dealing", env).eventsourcing_env()
    assert dealing["PB_SUPERVISOR_KEYRING"] == "/run/secrets/supervisors.json"
    for service in ("shoe", "settlement"):
        assert "PB_SUPERVISOR_KEYRING" not in Settings.from_env(service, env).eventsourcing_env()
