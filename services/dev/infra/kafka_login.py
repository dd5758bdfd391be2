"""How a Kafka client logs in to the local broker when authentication is on.

SASL with SCRAM-SHA-512 (RFC 5802 / RFC 7677 with SHA-512, as Kafka implements it): over
the loopback listener (``SASL_PLAINTEXT``), or over the TLS listener (``SASL_SSL``) with
the broker's CA file and hostname checking, which is what anything beyond loopback uses.
:meth:`KafkaLogin.client_options` are keyword arguments for aiokafka's producer, consumer,
admin client and ``AIOKafkaClient``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCRAM_MECHANISM = "SCRAM-SHA-512"
ADMIN = "admin"
"""The super user: used by `punto-banco infra` (ACLs, users, topics) and between brokers."""

PRINCIPAL_NAME = re.compile(r"^[a-z][a-z0-9._-]{0,63}$")
"""A principal's name: lower case, digits, ``.``, ``_``, ``-``; at most 64 characters (it is
also a file name, and SCRAM would have to escape ``,`` and ``=``)."""


@dataclass(frozen=True)
class KafkaLogin:
    """A principal's SCRAM credentials; with ``cafile``, over TLS checked against that CA."""

    username: str
    password: str = field(repr=False)
    cafile: Path | None = None

    @property
    def security_protocol(self) -> str:
        return "SASL_SSL" if self.cafile else "SASL_PLAINTEXT"

    def over_tls(self, cafile: Path) -> KafkaLogin:
        return KafkaLogin(self.username, self.password, cafile)

    def client_options(self) -> dict[str, Any]:
        """aiokafka keyword arguments (``security_protocol``, ``sasl_*``, ``ssl_context``)."""
        options: dict[str, Any] = {
            "security_protocol": self.security_protocol,
            "sasl_mechanism": SCRAM_MECHANISM,
            "sasl_plain_username": self.username,
            "sasl_plain_password": self.password,
        }
        if self.cafile:
            from aiokafka.helpers import create_ssl_context

            # check_hostname and CERT_REQUIRED: the broker's name must be in its certificate.
            options["ssl_context"] = create_ssl_context(cafile=str(self.cafile))
        return options

    def env(self) -> dict[str, str]:
        """The principal's part of a client's environment."""
        return {"KAFKA_SASL_USERNAME": self.username, "KAFKA_SASL_PASSWORD": self.password}
