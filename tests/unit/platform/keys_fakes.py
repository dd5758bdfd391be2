"""Fixed Ed25519 keys and a keyring for unit tests: the same bytes on every run."""

from __future__ import annotations

import hashlib

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from services.shared.platform.kafka import SIGNATURE_HEADER
from services.shared.platform.security import Keyring, KeyringEntry, Signer, Where


def fixed_key(name: str) -> Ed25519PrivateKey:
    """A private key derived from ``name`` (tests only: anyone can derive it)."""
    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(name.encode()).digest())


SIGNERS = {
    service: Signer(f"{service}-1", service, fixed_key(f"pb-test-{service}"))
    for service in ("shoe", "dealing", "settlement")
}
"""Each service's signer (key id ``<service>-1``)."""

KEYRING = Keyring({s.kid: KeyringEntry(s.kid, s.service, s.public_key) for s in SIGNERS.values()})
"""The keyring of :data:`SIGNERS`."""


def signature(
    service: str, where: Where, key: bytes, value: bytes, notification: int, index: int = 0
) -> tuple[str, bytes]:
    """The ``pb-sig`` header ``service``'s relay puts on this record, written ``where``."""
    return SIGNATURE_HEADER, SIGNERS[service].sign(where, key, value, notification, index)
