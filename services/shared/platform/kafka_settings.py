"""How a process logs in to Kafka: security protocol, SASL/SCRAM credentials, the TLS CA.

Read from ``KAFKA_SECURITY_PROTOCOL`` (``PLAINTEXT`` when unset, ``SASL_PLAINTEXT``,
``SASL_SSL``, ``SSL``), ``KAFKA_SASL_MECHANISM`` (``SCRAM-SHA-512`` by default, or
``SCRAM-SHA-256``), ``KAFKA_SASL_USERNAME`` / ``KAFKA_SASL_PASSWORD`` (the principal) and
``KAFKA_SSL_CAFILE`` (the CA that signed the broker's certificate; the system's CAs when
unset). :meth:`KafkaAuth.security` is FastStream's security object (``SASLScram512``...),
from which every client of the platform takes its options and the AsyncAPI documents their
security. The password is never in a repr or a log line.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.shared.platform.environment import SettingsError

if TYPE_CHECKING:
    from faststream.security import BaseSecurity

    from services.shared.platform.environment import Environment

PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL")
MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")
_CREDENTIALS_HINT = "`punto-banco infra credentials <principal>` prints them for the local broker"


@dataclass(frozen=True, slots=True)
class KafkaAuth:
    """One principal's way in to the broker (PLAINTEXT: nobody's, the default)."""

    protocol: str = "PLAINTEXT"
    mechanism: str = "SCRAM-SHA-512"
    username: str = ""
    password: str = field(default="", repr=False)
    cafile: str = ""

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise SettingsError(
                f"KAFKA_SECURITY_PROTOCOL must be one of {', '.join(PROTOCOLS)}, "
                f"got {self.protocol!r}"
            )
        if self.mechanism not in MECHANISMS:
            raise SettingsError(
                f"KAFKA_SASL_MECHANISM must be {' or '.join(MECHANISMS)}, got {self.mechanism!r}"
            )
        # A principal's name alone may stay in a shared config; a password that would not
        # be sent may not.
        if self.password and not self.sasl:
            raise SettingsError(
                f"KAFKA_SASL_PASSWORD is set but KAFKA_SECURITY_PROTOCOL is {self.protocol}, "
                "which sends no credentials: set it to SASL_PLAINTEXT (or SASL_SSL beyond this "
                "machine)"
            )

    @classmethod
    def from_environment(cls, environment: Environment) -> KafkaAuth:
        return cls(
            protocol=environment.kafka_security_protocol or "PLAINTEXT",
            mechanism=environment.kafka_sasl_mechanism or "SCRAM-SHA-512",
            username=environment.kafka_sasl_username,
            password=environment.kafka_sasl_password.get_secret_value(),
            cafile=environment.kafka_ssl_cafile,
        )

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")

    def ssl_context(self) -> ssl.SSLContext:
        """TLS checked against ``cafile`` (else the system's CAs), the broker's name included.

        The file is read here, when a client is made (as the service's keys are read when it
        starts), not with the settings: a mounted secret may appear after they are read."""
        if self.cafile and not Path(self.cafile).is_file():
            raise SettingsError(
                f"KAFKA_SSL_CAFILE={self.cafile!r} is not a file: give the CA certificate (PEM) "
                "that signed the broker's (`punto-banco infra up` prints the local one)"
            )
        return ssl.create_default_context(cafile=self.cafile or None)

    def check_principal(self) -> None:
        """SettingsError unless a SASL protocol has its username and password. Checked when a
        client is made, not with the settings: a command that never connects (``keys init``,
        ``audit``) runs in a shell that has the broker's settings but no principal's."""
        missing = [
            name
            for name, value in (
                ("KAFKA_SASL_USERNAME", self.username),
                ("KAFKA_SASL_PASSWORD", self.password),
            )
            if not value
        ]
        if self.sasl and missing:
            raise SettingsError(
                f"KAFKA_SECURITY_PROTOCOL={self.protocol} needs {' and '.join(missing)} "
                f"(the principal this process logs in as; {_CREDENTIALS_HINT})"
            )

    def security(self) -> BaseSecurity | None:
        """FastStream's security object for this login (None: PLAINTEXT); SettingsError when
        the principal or the CA file is missing."""
        from faststream.security import BaseSecurity, SASLScram256, SASLScram512

        self.check_principal()
        context = self.ssl_context() if self.tls else None
        if self.sasl:
            scram = SASLScram512 if self.mechanism == "SCRAM-SHA-512" else SASLScram256
            return scram(self.username, self.password, ssl_context=context, use_ssl=self.tls)
        if self.tls:
            return BaseSecurity(ssl_context=context, use_ssl=True)
        return None

    def client_options(self) -> dict[str, Any]:
        """aiokafka's keyword arguments for this login (FastStream's reading of
        :meth:`security`; none for PLAINTEXT)."""
        from faststream.kafka.security import parse_security

        return parse_security(self.security())

    def env(self) -> dict[str, str]:
        """These settings as the variables a child process reads (all of them, empty where
        unset, so that the parent's environment cannot add another principal's)."""
        return {
            "KAFKA_SECURITY_PROTOCOL": self.protocol,
            "KAFKA_SASL_MECHANISM": self.mechanism,
            "KAFKA_SASL_USERNAME": self.username,
            "KAFKA_SASL_PASSWORD": self.password,
            "KAFKA_SSL_CAFILE": self.cafile,
        }

    def describe(self) -> str:
        """For logs: the protocol and who logs in, never the password."""
        return f"{self.protocol} as {self.username}" if self.sasl else self.protocol
