from pathlib import Path

import pytest

from services.shared.platform.settings import Settings, SettingsError


def test_defaults_use_a_sqlite_file_per_service_under_var() -> None:
    settings = Settings.from_env("shoe", {})
    assert settings.persistence == "sqlite"
    assert settings.sqlite_path == Path("var/shoe.sqlite")
    assert settings.kafka_bootstrap_servers == "127.0.0.1:9092"
    env = settings.eventsourcing_env()
    assert env["PERSISTENCE_MODULE"] == "eventsourcing.sqlite"
    assert env["SQLITE_DBNAME"] == "var/shoe.sqlite"


def test_data_dir_and_topic_prefix_come_from_the_environment() -> None:
    settings = Settings.from_env("dealing", {"PB_DATA_DIR": "/tmp/x", "PB_TOPIC_PREFIX": "t1."})
    assert settings.sqlite_path == Path("/tmp/x/dealing.sqlite")
    assert settings.topic("punto-banco.shoe-events") == "t1.punto-banco.shoe-events"
    assert settings.logical_topic("t1.punto-banco.shoe-events") == "punto-banco.shoe-events"
    assert settings.consumer_group == "t1.punto-banco-dealing"


def test_postgres_settings_give_each_service_its_own_schema() -> None:
    env = {
        "POSTGRES_HOST": "127.0.0.1",
        "POSTGRES_PORT": "5433",
        "POSTGRES_DBNAME": "pb",
        "POSTGRES_USER": "u",
        "POSTGRES_PASSWORD": "p",
    }
    settings = Settings.from_env("settlement", env)
    assert settings.persistence == "postgres"
    es = settings.eventsourcing_env()
    assert es["PERSISTENCE_MODULE"] == "eventsourcing.postgres"
    assert es["POSTGRES_SCHEMA"] == "settlement"
    assert es["POSTGRES_PORT"] == "5433"
    assert Settings.from_env("shoe", env).eventsourcing_env()["POSTGRES_SCHEMA"] == "shoe"


def test_postgres_dsn_is_parsed() -> None:
    settings = Settings.from_env(
        "shoe", {"PB_POSTGRES_DSN": "postgresql://bob:secret@127.0.0.1:6543/casino"}
    )
    assert settings.persistence == "postgres"
    assert (settings.postgres.user, settings.postgres.password) == ("bob", "secret")
    assert (settings.postgres.port, settings.postgres.dbname) == (6543, "casino")


def test_sqlite_can_be_forced_even_with_postgres_variables() -> None:
    settings = Settings.from_env("shoe", {"PB_PERSISTENCE": "sqlite", "POSTGRES_HOST": "h"})
    assert settings.persistence == "sqlite"


def test_overrides_win_over_the_environment() -> None:
    settings = Settings.from_env(
        "shoe", {"PB_DATA_DIR": "a"}, data_dir=Path("b"), topic_prefix=None
    )
    assert settings.data_dir == Path("b")


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"PB_PERSISTENCE": "mongo"}, "PB_PERSISTENCE"),
        ({"POSTGRES_PORT": "five"}, "POSTGRES_PORT"),
        ({"PB_RELAY_POLL_INTERVAL": "soon"}, "PB_RELAY_POLL_INTERVAL"),
    ],
)
def test_bad_settings_name_the_variable(env: dict[str, str], needle: str) -> None:
    with pytest.raises(SettingsError, match=needle):
        Settings.from_env("shoe", env)


def test_service_names_are_checked() -> None:
    with pytest.raises(SettingsError):
        Settings.from_env("Shoe Service", {})
