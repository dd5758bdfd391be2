"""Field-level encryption of stored events: some fields of an event kept as one ciphertext.

Scheme ``jwe-dir-a256gcm/v1``: JWE (RFC 7516) compact serialization, key management ``dir``
(the key is the content encryption key: no encrypted key part) and content encryption
``A256GCM`` (RFC 7518 section 5.3: AES-256-GCM, a random 96-bit IV per event, a 128-bit tag),
PyCA ``cryptography``'s ``AESGCM``. The plaintext is the encrypted fields as compact JSON
(keys sorted). The protected header, which is the AEAD's associated data
(``ASCII(BASE64URL(header))``), names the key id and binds the ciphertext to where it belongs::

    {"alg":"dir","enc":"A256GCM","kid":"shoe-secret-1",
     "pb-bind":{"aggregate_id":"<uuid>","shoe_id":"<shoe>","table_id":"<table>"}}

(compact JSON, keys sorted). A ciphertext copied to another shoe, table or aggregate, a
changed header, IV, ciphertext or tag, or the wrong key: decryption fails
(:class:`FieldDecryptionError`), it never yields other values. What is stored in the event's
``encrypted`` field::

    {"scheme": "jwe-dir-a256gcm/v1", "kid": "shoe-secret-1", "jwe": "<header>..<iv>.<ct>.<tag>"}

(``kid`` repeated outside for people and queries: which rows a key id still protects; it
must equal the header's).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from services.shared.platform.secret_keys import SecretKeys
from services.shared.platform.signing import b64url, b64url_decode

SCHEME = "jwe-dir-a256gcm/v1"
"""The scheme named in every encrypted field (its version: the binding and the plaintext)."""
IV_BYTES = 12
TAG_BYTES = 16
_HEADER_MEMBERS = frozenset({"alg", "enc", "kid", "pb-bind"})


class FieldEncryptionError(ValueError):
    """Secret fields that cannot be stored encrypted or read back; the message says why."""


class FieldDecryptionError(FieldEncryptionError):
    """An encrypted field that does not decrypt here: the message says which key and why."""


def _compact(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def encrypt_fields(
    keys: SecretKeys, values: Mapping[str, Any], binding: Mapping[str, str]
) -> dict[str, str]:
    """``values`` encrypted with the current key, bound to ``binding``: the stored envelope."""
    kid = keys.current
    key = keys.key(kid)
    assert key is not None
    header = {"alg": "dir", "enc": "A256GCM", "kid": kid, "pb-bind": dict(binding)}
    protected = b64url(_compact(header))
    iv = os.urandom(IV_BYTES)
    sealed = AESGCM(key).encrypt(iv, _compact(dict(values)), protected)
    ciphertext, tag = sealed[:-TAG_BYTES], sealed[-TAG_BYTES:]
    jwe = b".".join((protected, b"", b64url(iv), b64url(ciphertext), b64url(tag)))
    return {"scheme": SCHEME, "kid": kid, "jwe": jwe.decode("ascii")}


def decrypt_fields(
    keys: SecretKeys, envelope: Any, binding: Mapping[str, str], where: str
) -> dict[str, Any]:
    """The fields in ``envelope`` (as :func:`encrypt_fields` made it for ``binding``);
    :class:`FieldDecryptionError` (naming ``where``) unless it decrypts and authenticates."""
    if not isinstance(envelope, dict) or set(envelope) != {"scheme", "kid", "jwe"}:
        raise FieldDecryptionError(f"{where}: the encrypted field is not a {SCHEME} envelope")
    if envelope["scheme"] != SCHEME:
        raise FieldDecryptionError(
            f"{where}: encrypted with scheme {envelope['scheme']!r}, this version reads {SCHEME}"
        )
    kid = envelope["kid"]
    key = keys.key(kid) if isinstance(kid, str) else None
    if key is None:
        raise FieldDecryptionError(
            f"{where}: encrypted with key {kid!r}, which is not among the shoe's secret keys "
            f"({', '.join(keys.kids)} from {keys.source}): give the shoe the key set that holds "
            "it (a rotation keeps the old keys)"
        )
    try:
        protected, encrypted_key, iv, ciphertext, tag = str(envelope["jwe"]).split(".")
        header = json.loads(b64url_decode(protected))
        parts = [b64url_decode(part) for part in (iv, ciphertext, tag)]
    except ValueError:
        raise FieldDecryptionError(f"{where}: the JWE is malformed") from None
    expected = {"alg": "dir", "enc": "A256GCM", "kid": kid, "pb-bind": dict(binding)}
    if encrypted_key or not isinstance(header, dict) or set(header) != _HEADER_MEMBERS:
        raise FieldDecryptionError(f"{where}: the JWE header is not a {SCHEME} header")
    if header != expected:
        raise FieldDecryptionError(
            f"{where}: the ciphertext belongs elsewhere (its header says "
            f"{json.dumps(header, sort_keys=True)}): copied from another row, or altered"
        )
    if len(parts[0]) != IV_BYTES or len(parts[2]) != TAG_BYTES:
        raise FieldDecryptionError(f"{where}: the JWE's IV or tag has the wrong length")
    try:
        plain = AESGCM(key).decrypt(parts[0], parts[1] + parts[2], protected.encode("ascii"))
    except InvalidTag:
        raise FieldDecryptionError(
            f"{where}: does not decrypt with key {kid} from {keys.source}: the key file holds "
            "another key under that id, or the stored row was altered"
        ) from None
    values = json.loads(plain)
    if not isinstance(values, dict):
        raise FieldDecryptionError(f"{where}: the plaintext is not a JSON object")
    return values
