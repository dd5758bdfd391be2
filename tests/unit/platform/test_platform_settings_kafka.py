"""Who a process logs in to Kafka as: KAFKA_SECURITY_PROTOCOL, KAFKA_SASL_*, KAFKA_SSL_CAFILE.

The settings are checked when read (a SASL protocol without a principal, credentials that a
PLAINTEXT connection would silently drop, a CA file that is not there), become FastStream's
security object and so every client's options, and never show the password.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from faststream.security import SASLScram256, SASLScram512

from services.dev.infra.kafka_tls import ensure_tls
from services.shared.platform.host.faststream import kafka_security
from services.shared.platform.kafka import client_options
from services.shared.platform.settings import Settings, SettingsError

SASL = {
    "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
    "KAFKA_SASL_USERNAME": "dealing",
    "KAFKA_SASL_PASSWORD": "s3cret-pw",
}


def test_without_settings_kafka_is_plaintext_and_anonymous() -> None:
    settings = Settings.from_env("shoe", {})
    assert settings.kafka_auth.protocol == "PLAINTEXT"
    assert kafka_security(settings) is None
    assert client_options(settings) == {"bootstrap_servers": "127.0.0.1:9092"}


def test_sasl_plaintext_logs_in_with_scram_sha_512_as_the_principal() -> None:
    settings = Settings.from_env("dealing", SASL)
    security = kafka_security(settings)
    assert isinstance(security, SASLScram512)
    options = client_options(settings)
    assert options["security_protocol"] == "SASL_PLAINTEXT"
    assert options["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (options["sasl_plain_username"], options["sasl_plain_password"]) == (
        "dealing",
        "s3cret-pw",
    )
    assert options["ssl_context"] is None


def test_scram_sha_256_may_be_chosen_and_names_are_case_insensitive() -> None:
    env = {
        **SASL,
        "KAFKA_SECURITY_PROTOCOL": "sasl_plaintext",
        "KAFKA_SASL_MECHANISM": "scram-sha-256",
    }
    settings = Settings.from_env("dealing", env)
    assert isinstance(kafka_security(settings), SASLScram256)
    assert client_options(settings)["sasl_mechanism"] == "SCRAM-SHA-256"


def test_sasl_ssl_checks_the_broker_against_the_ca_file_and_its_name(tmp_path: Path) -> None:
    tls = ensure_tls(tmp_path, ["localhost", "127.0.0.1"])
    env = {**SASL, "KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SSL_CAFILE": str(tls.ca_cert)}
    options = client_options(Settings.from_env("dealing", env))
    assert options["security_protocol"] == "SASL_SSL"
    context = options["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert len(context.get_ca_certs()) == 1  # the broker's CA, not the system's


def test_ssl_without_sasl_is_tls_only() -> None:
    options = client_options(Settings.from_env("shoe", {"KAFKA_SECURITY_PROTOCOL": "SSL"}))
    assert options["security_protocol"] == "SSL"
    assert isinstance(options["ssl_context"], ssl.SSLContext)
    assert "sasl_mechanism" not in options


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"},
            "needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD",
        ),
        ({**SASL, "KAFKA_SASL_PASSWORD": ""}, "needs KAFKA_SASL_PASSWORD"),
        (
            {"KAFKA_SASL_USERNAME": "shoe", "KAFKA_SASL_PASSWORD": "x"},
            "KAFKA_SASL_PASSWORD is set but KAFKA_SECURITY_PROTOCOL is PLAINTEXT",
        ),
        (
            {"KAFKA_SECURITY_PROTOCOL": "TLS"},
            "KAFKA_SECURITY_PROTOCOL must be PLAINTEXT, SASL_PLAINTEXT",
        ),
        ({**SASL, "KAFKA_SASL_MECHANISM": "PLAIN"}, "KAFKA_SASL_MECHANISM must be SCRAM-SHA-512"),
    ],
)
def test_bad_kafka_security_settings_say_what_to_fix(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as raised:
        client_options(Settings.from_env("shoe", env))  # at the latest when a client is made
    assert message in str(raised.value)


def test_a_command_that_never_connects_needs_no_principal() -> None:
    """`eval "$(punto-banco infra up)"` sets the broker's protocol, not a principal: `keys
    init` or `audit` in that shell still run; a Kafka client would be refused its start."""
    settings = Settings.from_env("shoe", {"KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"})
    assert settings.kafka_auth.protocol == "SASL_PLAINTEXT"
    with pytest.raises(SettingsError, match="needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD"):
        kafka_security(settings)


def test_a_missing_ca_file_is_named_when_a_client_is_made() -> None:
    env = {**SASL, "KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SSL_CAFILE": "/no/such/ca.pem"}
    settings = Settings.from_env("shoe", env)  # read before a mounted secret may be there
    with pytest.raises(SettingsError, match=r"KAFKA_SSL_CAFILE='/no/such/ca\.pem' is not a file"):
        client_options(settings)


def test_the_ca_file_is_not_needed_without_tls() -> None:
    """`infra up` prints KAFKA_SSL_CAFILE beside SASL_PLAINTEXT (for the TLS listener)."""
    env = {**SASL, "KAFKA_SSL_CAFILE": "/no/such/ca.pem"}
    assert client_options(Settings.from_env("shoe", env))["ssl_context"] is None


def test_a_principals_name_alone_may_stay_in_a_plaintext_config() -> None:
    """A shared config (compose) names each service's principal; PLAINTEXT just ignores it."""
    settings = Settings.from_env("shoe", {"KAFKA_SASL_USERNAME": "shoe"})
    assert kafka_security(settings) is None


def test_the_password_is_never_shown() -> None:
    settings = Settings.from_env("dealing", SASL)
    assert "s3cret-pw" not in repr(settings)
    assert "s3cret-pw" not in settings.kafka_auth.describe()
    assert settings.kafka_auth.describe() == "SASL_PLAINTEXT as dealing"


def test_a_child_process_gets_every_variable_so_none_leaks_in_from_its_parent() -> None:
    env = Settings.from_env("dealing", SASL).kafka_auth.env()
    assert env == {**SASL, "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "KAFKA_SSL_CAFILE": ""}
    assert (
        Settings.from_env("dealing", env).kafka_auth
        == Settings.from_env("dealing", SASL).kafka_auth
    )
