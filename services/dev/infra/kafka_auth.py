"""Authentication and authorization of the local broker (by default; ``PB_KAFKA_AUTH=none``
opts out).

With ``PB_KAFKA_AUTH=none`` the broker has one PLAINTEXT listener on loopback and no ACLs
(anyone on the machine may do anything). With ``scram``, the default (Kafka's "Authentication
using SASL/SCRAM", "Encryption and Authentication using SSL" and "Authorization and ACLs" with
KRaft's StandardAuthorizer):

- ``CLIENT``: SASL_PLAINTEXT on 127.0.0.1 (the usual port), SCRAM-SHA-512, for processes on
  this machine; also the inter-broker listener, where the broker logs in as ``admin``.
- ``TLS``: SASL_SSL on ``PB_KAFKA_TLS_HOST`` (default 127.0.0.1; ``0.0.0.0`` for every
  interface, then advertised as ``PB_KAFKA_TLS_ADVERTISED_HOST`` or this machine's name),
  SCRAM-SHA-512 inside TLS with the broker's own CA (``kafka_tls.py``): what anything
  beyond loopback must use.
- ``CONTROLLER``: on loopback, not TLS, but SASL/PLAIN with the admin's password rather
  than PLAINTEXT: a PLAINTEXT caller is ``User:ANONYMOUS``, which the broker's own
  registration would need as a super user, and the controller listener serves CreateAcls,
  CreateTopics and AlterUserScramCredentials itself (KIP-919), so every local process
  would be a super user there (with ANONYMOUS a super user, an unauthenticated CreateAcls
  on that port succeeds). PLAIN, as Kafka's KRaft examples use: SCRAM credentials live in
  the metadata log, which the controller listener must serve before they are loaded.
- StandardAuthorizer, ``allow.everyone.if.no.acl.found=false``, ``super.users=User:admin``;
  the ACLs are ``kafka_acls.py``'s matrix, granted by ``punto-banco infra up``.

SCRAM users (the admin and every principal of the matrix) are created when the storage is
formatted (``StorageTool format --add-scram``); their random passwords live in
``<home>/secrets/<name>.password`` (0600, folder 0700), and the broker's config, which holds
the admin's, is 0600 too. Principals added later get theirs through AlterUserScramCredentials.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from services.dev.infra.common import InfraError
from services.dev.infra.kafka_admin import SCRAM_ITERATIONS
from services.dev.infra.kafka_tls import TlsFiles
from services.dev.infra.ports import LOOPBACK
from services.shared.platform.settings import KafkaAuth

SCRAM_MECHANISM = "SCRAM-SHA-512"
ADMIN = "admin"
"""The super user: used by `punto-banco infra` (ACLs, users, topics) and between brokers."""

AUTH_NONE = "none"
AUTH_SCRAM = "scram"
AUTH_MODES = (AUTH_NONE, AUTH_SCRAM)
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_WILDCARDS = ("0.0.0.0", "::")
_HOST_NAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9][A-Za-z0-9-]{0,62})*$"
)


def auth_from_env(env: Mapping[str, str] | None = None) -> str:
    """``PB_KAFKA_AUTH``: ``scram`` (default) or ``none``."""
    value = (os.environ if env is None else env).get("PB_KAFKA_AUTH", "").strip().lower()
    value = value or AUTH_SCRAM
    if value not in AUTH_MODES:
        raise InfraError(
            f"PB_KAFKA_AUTH={value!r} is not a Kafka authentication mode.",
            "set PB_KAFKA_AUTH to scram (SASL/SCRAM, TLS and ACLs: the default) or none "
            "(no authentication: anyone on this machine may do anything)",
        )
    return value


def check_host(value: str, name: str = "PB_KAFKA_TLS_HOST") -> str:
    """An IP address or a DNS name, else an :class:`InfraError` naming ``name``."""
    host = value.strip().strip("[]")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if not _HOST_NAME.match(host):
        raise InfraError(
            f"{name}={value!r} is neither an IP address nor a host name.",
            f"set {name} to the address the TLS listener binds (default {LOOPBACK}; "
            "0.0.0.0 for every interface)",
        )
    return host


def tls_host_from_env(env: Mapping[str, str] | None = None) -> str:
    """``PB_KAFKA_TLS_HOST``: where the TLS listener binds (default 127.0.0.1)."""
    raw = (os.environ if env is None else env).get("PB_KAFKA_TLS_HOST", "").strip()
    return check_host(raw) if raw else LOOPBACK


def advertised_tls_host(bind_host: str, env: Mapping[str, str] | None = None) -> str:
    """The host clients are told to use for the TLS listener (and that its certificate names)."""
    explicit = (os.environ if env is None else env).get("PB_KAFKA_TLS_ADVERTISED_HOST", "")
    if explicit.strip():
        return check_host(explicit, "PB_KAFKA_TLS_ADVERTISED_HOST")
    return socket.getfqdn() if bind_host in _WILDCARDS else bind_host


def address(host: str, port: int) -> str:
    """``host:port``, with an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def tls_names(bind_host: str, advertised: str) -> list[str]:
    """Every name the broker certificate must hold."""
    hosts = ["localhost", LOOPBACK, advertised]
    if bind_host not in _WILDCARDS:
        hosts.append(bind_host)
    return list(dict.fromkeys(hosts))


def scram_login(name: str, password: str, cafile: Path | None = None) -> KafkaAuth:
    """A principal's SCRAM-SHA-512 login to the local broker (over TLS with ``cafile``)."""
    protocol = "SASL_SSL" if cafile else "SASL_PLAINTEXT"
    return KafkaAuth(protocol, SCRAM_MECHANISM, name, password, str(cafile or ""))


def _jaas(module: str, **options: str) -> str:
    settings = " ".join(f'{key}="{value}"' for key, value in options.items())
    return f"org.apache.kafka.common.security.{module} required {settings};"


def broker_settings(state: Mapping[str, Any], admin_password: str, tls: TlsFiles) -> dict[str, str]:
    """The broker settings of authentication, TLS and authorization (see the module doc), on
    the ports and TLS host of ``state`` (the broker's state file)."""
    tls_host, tls_port = str(state["tls_host"]), int(state["tls_port"])
    client = address(LOOPBACK, int(state["port"]))
    tls_bootstrap = address(str(state["tls_advertised"]), tls_port)
    scram = _jaas("scram.ScramLoginModule", username=ADMIN, password=admin_password)
    plain = _jaas(
        "plain.PlainLoginModule",
        username=ADMIN,
        password=admin_password,
        **{f"user_{ADMIN}": admin_password},
    )
    mechanism = SCRAM_MECHANISM.lower()
    return {
        "listeners": f"CLIENT://{client},TLS://{address(tls_host, tls_port)},"
        f"CONTROLLER://{address(LOOPBACK, int(state['controller_port']))}",
        "advertised.listeners": f"CLIENT://{client},TLS://{tls_bootstrap}",
        "listener.security.protocol.map": (
            "CLIENT:SASL_PLAINTEXT,TLS:SASL_SSL,CONTROLLER:SASL_PLAINTEXT"
        ),
        "inter.broker.listener.name": "CLIENT",
        "sasl.enabled.mechanisms": SCRAM_MECHANISM,
        "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
        f"listener.name.client.{mechanism}.sasl.jaas.config": scram,
        f"listener.name.tls.{mechanism}.sasl.jaas.config": scram,
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": plain,
        "listener.name.tls.ssl.keystore.type": "PEM",
        "listener.name.tls.ssl.keystore.location": str(tls.broker_pem),
        "listener.name.tls.ssl.client.auth": "none",
        "ssl.enabled.protocols": "TLSv1.3,TLSv1.2",
        "authorizer.class.name": AUTHORIZER,
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:{ADMIN}",
        "auto.create.topics.enable": "false",  # topics are the admin's (`infra up`)
    }


def scram_format_arguments(passwords: Mapping[str, str]) -> list[str]:
    """StorageTool ``--add-scram`` arguments creating these users at format time."""
    arguments: list[str] = []
    for name, password in passwords.items():
        arguments += [
            "--add-scram",
            f"{SCRAM_MECHANISM}=[name={name},iterations={SCRAM_ITERATIONS},password={password}]",
        ]
    return arguments
