"""Field-level encryption at rest: a fact's secret fields stored as one ciphertext.

Scheme ``jwe-dir-a256gcm/v1``: a JWE (RFC 7516) in compact form, ``dir`` + ``A256GCM`` (a
random IV per event), by ``joserfc``. Its protected header (the AEAD's associated data) names
the key id and binds the ciphertext to its aggregate and the fact's ``ENCRYPTION_BINDS``: one
copied to another row, altered, or read with another key fails to decrypt
(:class:`FieldDecryptionError`), never yielding other values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidTag
from joserfc import jwe
from joserfc.errors import JoseError
from joserfc.jwk import OctKey
from joserfc.registry import HeaderParameter

from services.shared.platform.security.keys import SecretKeys

SCHEME = "jwe-dir-a256gcm/v1"
"""The scheme named in every encrypted field (its version: the binding and the plaintext)."""


def _an_object(value: object) -> None:  # pb-bind; compared whole with the row's once opened
    if not isinstance(value, dict):
        raise ValueError("must be an object")


_JWE = jwe.JWERegistry(
    header_registry={"pb-bind": HeaderParameter("where the ciphertext belongs", _an_object)},
    algorithms=["dir", "A256GCM"],
)


class FieldEncryptionError(ValueError):
    """Secret fields that cannot be stored encrypted or read back; the message says why."""


class FieldDecryptionError(FieldEncryptionError):
    """An encrypted field that does not decrypt here: the message says which key and why."""


def _compact(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _header(kid: str, binding: Mapping[str, str]) -> dict[str, Any]:
    """The protected header (keys sorted: joserfc writes them in this order)."""
    return {"alg": "dir", "enc": "A256GCM", "kid": kid, "pb-bind": dict(sorted(binding.items()))}


def encrypt_fields(
    keys: SecretKeys, values: Mapping[str, Any], binding: Mapping[str, str]
) -> dict[str, str]:
    """``values`` encrypted with the current key, bound to ``binding``: the stored envelope."""
    kid = keys.current
    key = keys.key(kid)
    assert key is not None
    sealed = jwe.encrypt_compact(
        _header(kid, binding), _compact(dict(values)), OctKey.import_key(key), registry=_JWE
    )
    return {"scheme": SCHEME, "kid": kid, "jwe": sealed}


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
        opened = jwe.decrypt_compact(str(envelope["jwe"]), OctKey.import_key(key), registry=_JWE)
    except (JoseError, ValueError) as error:
        if isinstance(error.__cause__, InvalidTag):
            raise FieldDecryptionError(
                f"{where}: does not decrypt with key {kid} from {keys.source}: the key file "
                "holds another key under that id, or the stored row was altered"
            ) from None
        raise FieldDecryptionError(f"{where}: not a {SCHEME} JWE ({error!r})") from None
    if opened.protected != _header(kid, binding):
        raise FieldDecryptionError(
            f"{where}: the ciphertext belongs elsewhere (its header says "
            f"{json.dumps(opened.protected, sort_keys=True)}): copied from another row, or altered"
        )
    values = json.loads(opened.plaintext or b"")
    if not isinstance(values, dict):
        raise FieldDecryptionError(f"{where}: the plaintext is not a JSON object")
    return values
