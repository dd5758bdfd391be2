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
    assert es["PERSISTENCE_MODULE"] == "services.shared.platform.store.postgres:FencedFactory"
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


def test_empty_variables_count_as_unset() -> None:
    settings = Settings.from_env(
        "shoe", {"PB_DATA_DIR": "", "POSTGRES_PORT": "", "PB_LOG_LEVEL": ""}
    )
    assert settings.data_dir == Path("var")
    assert settings.persistence == "sqlite"
    assert settings.log_level == "INFO"


def test_every_bad_variable_is_named_in_one_message() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env("shoe", {"PB_TOPIC_PARTITIONS": "three", "PB_LOG_FORMAT": "xml"})
    message = str(caught.value)
    assert "PB_TOPIC_PARTITIONS must be a whole number, got 'three'" in message
    assert "PB_LOG_FORMAT must be 'text' or 'json', not 'xml'" in message


@pytest.mark.parametrize("port", ["PB_HTTP_PORT", "PB_HTTP_PORT_SHOE"])
def test_a_bad_http_port_is_named_with_the_other_bad_variables(port: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env("shoe", {port: "http", "PB_LOG_FORMAT": "xml"})
    message = str(caught.value)
    assert f"{port} must be a whole number, got 'http'" in message
    assert "PB_LOG_FORMAT must be 'text' or 'json', not 'xml'" in message
    with pytest.raises(SettingsError, match=f"^{port} must be a port number"):
        Settings.from_env("shoe", {port: "70000"})  # alone, as before


def test_the_process_environment_is_read_when_no_mapping_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PB_TOPIC_PREFIX", "env.")
    monkeypatch.setenv("PB_RELAY_BATCH_SIZE", "17")
    settings = Settings.from_env("shoe")
    assert (settings.topic_prefix, settings.relay_batch_size) == ("env.", 17)
    assert Settings.from_env("shoe", {}).topic_prefix == ""  # a given mapping is all there is


def test_http_host_is_loopback_by_default_and_any_address_is_allowed() -> None:
    assert Settings.from_env("shoe", {}).http_host == "127.0.0.1"
    for host in ("0.0.0.0", "::", "10.1.2.3", "shoe.punto-banco.svc"):
        assert Settings.from_env("shoe", {"PB_HTTP_HOST": host}).http_host == host
    for bad in ("http://shoe", "shoe:8101", "a b"):
        with pytest.raises(SettingsError, match="PB_HTTP_HOST must be an IP address"):
            Settings.from_env("shoe", {"PB_HTTP_HOST": bad})


def test_allowed_hosts_default_to_the_bind_address_and_localhost() -> None:
    assert Settings.from_env("shoe", {}).allowed_hosts == ("127.0.0.1", "localhost")
    assert Settings.from_env("shoe", {"PB_HTTP_HOST": "::1"}).allowed_hosts == (
        "[::1]",
        "localhost",
        "127.0.0.1",
    )
    # The wildcard address is nobody's Host header: a container lists its names.
    assert Settings.from_env("shoe", {"PB_HTTP_HOST": "0.0.0.0"}).allowed_hosts == (
        "localhost",
        "127.0.0.1",
    )


def test_allowed_hosts_are_a_checked_comma_separated_list() -> None:
    env = {"PB_HTTP_HOST": "0.0.0.0", "PB_HTTP_ALLOWED_HOSTS": "Shoe, 10.0.0.7 ::1,*.svc.local"}
    settings = Settings.from_env("shoe", env)
    assert settings.allowed_hosts == ("shoe", "10.0.0.7", "[::1]", "*.svc.local")
    for bad, needle in (
        ("shoe:8101", "without port"),
        ("http://shoe", "without port"),
        ("sh*e", "'\\*.example.com'"),
        ("bad_name!", "not a host name"),
    ):
        with pytest.raises(SettingsError, match=needle):
            Settings.from_env("shoe", {"PB_HTTP_ALLOWED_HOSTS": bad})


def settings_table() -> str:
    """docs/operations.md's settings table: a row per variable, from the fields of
    :class:`Settings`."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for info in Settings.model_fields.values():
        if info.alias is None:
            continue
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        shown = extra.get("shown")
        if shown is None:
            default = info.default
            if isinstance(default, bool):
                default = "yes" if default else "no"
            shown = f"`{default}`" if default not in ("", None, ()) else ""
        meaning = " ".join((info.description or "").split())
        rows.append(f"| `{info.alias}` | {shown} | {meaning} |")
    return "\n".join(rows) + "\n"


def test_the_operations_page_settings_table_is_the_one_the_settings_declare() -> None:
    page = (Path(__file__).resolve().parents[3] / "docs" / "operations.md").read_text()
    section = page.split("\n## Settings", 1)[1].split("\n## ", 1)[0]
    table = section[section.index("| variable |") :].split("\n\n", 1)[0].strip() + "\n"
    assert table == settings_table(), (
        "docs/operations.md's settings table differs from the settings' fields: paste the output "
        "of `.venv/bin/python -c 'from tests.unit.platform.test_platform_settings import "
        "settings_table; print(settings_table())'`"
    )


def test_operators_are_named_once_each_and_default_to_the_house() -> None:
    """PB_OPERATORS: the operators whose gateway topics dealing marks and settlement reads."""
    assert Settings.from_env("settlement", {}).operators == ("house",)
    assert Settings.from_env("settlement", {"PB_OPERATORS": " acme, bravo-2 "}).operators == (
        "acme",
        "bravo-2",
    )
    assert Settings(service="dealing", operators=()).operators == ("house",)
    env = Settings.from_env("settlement", {"PB_OPERATORS": "acme,bravo"}).eventsourcing_env()
    assert env["PB_OPERATORS"] == "acme,bravo"  # a new book waits for both close marks
    for bad in ("Acme", "acme,acme", "9lives", "a" * 33, "acme.eu"):
        with pytest.raises(SettingsError, match="PB_OPERATORS"):
            Settings.from_env("settlement", {"PB_OPERATORS": bad})


def test_the_postgres_password_is_never_in_a_repr() -> None:
    """Settings are logged and shown in tracebacks: the password (given alone or in the DSN)
    stays out of every repr, and still reaches the store's connection."""
    for env in (
        {"POSTGRES_HOST": "db", "POSTGRES_PASSWORD": "pg-s3cret"},
        {"PB_POSTGRES_DSN": "postgresql://bob:pg-s3cret@db:5432/casino"},
    ):
        settings = Settings.from_env("settlement", env)
        for shown in (repr(settings), str(settings)):
            assert "pg-s3cret" not in shown
        assert settings.postgres.connect_options()["password"] == "pg-s3cret"
        assert settings.eventsourcing_env()["POSTGRES_PASSWORD"] == "pg-s3cret"
    with pytest.raises(SettingsError, match="port") as refused:
        Settings.from_env("shoe", {"PB_POSTGRES_DSN": "postgresql://bob:pg-s3cret@db:x/casino"})
    assert "pg-s3cret" not in str(refused.value)


def test_the_brokers_clock_skew_is_a_duration_from_0_to_60_seconds() -> None:
    """PB_BROKER_CLOCK_SKEW: settlement's tolerance in the early-card check (100 ms by
    default)."""
    assert Settings.from_env("settlement", {}).broker_clock_skew == 0.1
    for text, seconds in (("0", 0.0), ("250ms", 0.25), ("0.5s", 0.5), ("2", 2.0), ("1m", 60.0)):
        settings = Settings.from_env("settlement", {"PB_BROKER_CLOCK_SKEW": text})
        assert settings.broker_clock_skew == seconds
        assert settings.eventsourcing_env()["PB_BROKER_CLOCK_SKEW"] == repr(seconds)
    for bad in ("61s", "-1", "abc", "1y", "2m"):
        with pytest.raises(SettingsError, match="PB_BROKER_CLOCK_SKEW must be a duration"):
            Settings.from_env("settlement", {"PB_BROKER_CLOCK_SKEW": bad})


@pytest.mark.parametrize(
    ("variable", "bad"),
    [
        ("PB_GATEWAY_RATE", "inf"),
        ("PB_GATEWAY_RATE", "nan"),
        ("PB_GATEWAY_RATE", "0"),
        ("PB_WALLET_SILENCE", "inf"),
        ("PB_WALLET_RETRY", "1,0"),
        ("PB_GATEWAY_MAX_BODY", "10"),
        ("PB_GATEWAY_OPERATORS", "Bad Name"),
    ],
)
def test_the_gateways_settings_are_bounded(variable: str, bad: str) -> None:
    """The gateway's settings refuse what no deployment means (an endless rate, no retry
    delay, a body too small for a bet), naming the variable."""
    with pytest.raises(SettingsError, match=variable):
        Settings.from_env("gateway", {variable: bad})
    assert Settings.from_env("gateway", {}).gateway_rate == 200.0
