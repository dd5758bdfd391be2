"""The shoe's secret keys: the AES-256 keys its order and salt are encrypted with at rest.

Two ways to give them (``Settings``; the shoe's Application gets both in its environment):

- ``PB_SHOE_SECRET_KEY_FILE`` (default ``<data dir>/keys/shoe-secret.json``): a JWK Set
  (RFC 7517 section 5) of symmetric keys, mode 0600 (refused when group or others may read
  it)::

      {"keys": [{"kty": "oct", "use": "enc", "kid": "shoe-secret-2", "k": "<base64url>"},
                {"kty": "oct", "use": "enc", "kid": "shoe-secret-1", "k": "<base64url>"}]}

- ``PB_SHOE_SECRET_KEY``: ``<key id>:<base64 of 32 bytes>[,<key id>:<base64>...]``.

Either way the FIRST key encrypts new shoes and every key decrypts what it encrypted: a
rotation (:func:`rotate_key_file`, ``punto-banco keys rotate-secret``) puts a new key first
and keeps the old ones, so shoes shuffled before it still decrypt. A key id is 1-64
letters, digits, ``.``, ``_`` or ``-``; ``punto-banco keys init`` names them
``shoe-secret-<n>``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from joserfc.errors import JoseError
from joserfc.jwk import KeySet, OctKey

from services.shared.platform.security.key_files import create_private, replace_file
from services.shared.platform.security.signing import KEY_ID

KEY_VARIABLE = "PB_SHOE_SECRET_KEY"
KEY_FILE_VARIABLE = "PB_SHOE_SECRET_KEY_FILE"
KEY_BYTES = 32
"""AES-256."""
KID_PREFIX = "shoe-secret-"


class SecretKeyError(RuntimeError):
    """The secret keys are missing or unusable; the message says what to run or fix."""


@dataclass(frozen=True)
class SecretKeys:
    """Key id -> 32-byte key, the first one encrypting; ``source`` says where they came from."""

    keys: tuple[tuple[str, bytes], ...]
    source: str
    _by_kid: dict[str, bytes] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.keys:
            raise SecretKeyError(f"{self.source} holds no key")
        by_kid: dict[str, bytes] = {}
        for kid, key in self.keys:
            if KEY_ID.fullmatch(kid) is None:
                raise SecretKeyError(
                    f"{self.source}: key id {kid!r} is not 1-64 letters, digits, '.', '_' or '-'"
                )
            if len(key) != KEY_BYTES:
                raise SecretKeyError(
                    f"{self.source}: key {kid} has {len(key)} bytes, AES-256 needs {KEY_BYTES}"
                )
            if kid in by_kid:
                raise SecretKeyError(f"{self.source}: key id {kid} appears twice")
            by_kid[kid] = key
        object.__setattr__(self, "_by_kid", by_kid)

    def __repr__(self) -> str:  # never the keys themselves
        return f"SecretKeys(kids={self.kids!r}, source={self.source!r})"

    @property
    def current(self) -> str:
        """The key id new shoes are encrypted with."""
        return self.keys[0][0]

    @property
    def kids(self) -> tuple[str, ...]:
        return tuple(kid for kid, _ in self.keys)

    def key(self, kid: str) -> bytes | None:
        return self._by_kid.get(kid)


def new_key() -> bytes:
    """A fresh AES-256 key from the operating system's CSPRNG."""
    return AESGCM.generate_key(bit_length=KEY_BYTES * 8)


# ---- the environment form ----------------------------------------------------------------


def parse_env_keys(text: str, source: str = KEY_VARIABLE) -> SecretKeys:
    """``<kid>:<base64>[,<kid>:<base64>...]`` (standard base64, padded)."""
    keys: list[tuple[str, bytes]] = []
    for number, item in enumerate(text.split(","), start=1):
        kid, colon, encoded = item.strip().partition(":")
        if not colon:
            raise SecretKeyError(
                f"{source}: entry {number} must be <key id>:<base64 of {KEY_BYTES} bytes>"
            )
        try:
            key = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise SecretKeyError(f"{source}: key {kid} is not base64") from None
        keys.append((kid, key))
    return SecretKeys(tuple(keys), source)


def env_form(keys: SecretKeys) -> str:
    """The keys as ``PB_SHOE_SECRET_KEY`` holds them."""
    return ",".join(f"{kid}:{base64.b64encode(key).decode('ascii')}" for kid, key in keys.keys)


# ---- the file form -----------------------------------------------------------------------


def parse_key_set(text: str, source: str) -> SecretKeys:
    """The keys of a JWK Set of ``oct`` keys, each with its ``kid`` (in its order; an entry
    that is not one is refused, not skipped)."""
    try:
        entries = json.loads(text)["keys"]
        key_set = KeySet.import_key_set({"keys": entries})
    except (ValueError, TypeError, LookupError, JoseError) as error:
        raise SecretKeyError(f'{source} must be a JWK Set {{"keys": [...]}}: {error!r}') from None
    keys = [(str(key.kid), key.raw_value) for key in key_set if isinstance(key, OctKey)]
    if len(keys) != len(entries) or not all("kid" in entry for entry in entries):
        raise SecretKeyError(
            f'{source}: each key must be a symmetric JWK ("kty": "oct") with a kid'
        )
    return SecretKeys(tuple(keys), source)


def key_set_json(keys: SecretKeys) -> str:
    jwks = KeySet([OctKey.import_key(key, {"kid": kid, "use": "enc"}) for kid, key in keys.keys])
    return json.dumps(jwks.as_dict(private=True), indent=2) + "\n"


def read_key_file(path: Path) -> SecretKeys:
    """The keys in ``path``; refused when group or others may read it."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise SecretKeyError(
                f"the shoe's secret key file {path} is open to group or others (mode "
                f"{mode:04o}): whoever reads it can read every shoe in play. Run "
                f"`chmod 600 {path}`, and if someone else may have read it, "
                "`punto-banco keys rotate-secret` and finish the shoes in play"
            )
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SecretKeyError(f"no secret key file at {path}") from None
    except OSError as error:
        raise SecretKeyError(f"cannot read the secret key file {path}: {error.strerror}") from None
    return parse_key_set(text, str(path))


def write_key_file(path: Path, keys: SecretKeys, *, exclusive: bool) -> None:
    """Write ``keys`` to ``path``, mode 0600 from the start (replace it unless ``exclusive``)."""
    data = key_set_json(keys).encode("utf-8")
    if exclusive:
        create_private(path, data)
    else:
        replace_file(path, data, 0o600)


def next_kid(kids: Iterable[str]) -> str:
    pattern = re.compile(re.escape(KID_PREFIX) + r"([1-9][0-9]{0,8})")
    numbers = [int(m.group(1)) for kid in kids if (m := pattern.fullmatch(kid))]
    return f"{KID_PREFIX}{max(numbers, default=0) + 1}"


def create_key_file(path: Path) -> SecretKeys:
    """A new key file with one key (``shoe-secret-1``); refused if the file exists."""
    keys = SecretKeys(((next_kid(()), new_key()),), str(path))
    write_key_file(path, keys, exclusive=True)
    return keys


def rotate_key_file(path: Path) -> str:
    """Put a new key first in ``path`` (it encrypts the next shoes); the old keys stay."""
    old = read_key_file(path)
    kid = next_kid(old.kids)
    write_key_file(path, SecretKeys(((kid, new_key()), *old.keys), str(path)), exclusive=False)
    return kid


# ---- what the shoe's Application loads ---------------------------------------------------


def load_secret_keys(value: str | None, path: str | None) -> SecretKeys:
    """The keys given by ``PB_SHOE_SECRET_KEY`` (``value``) or ``PB_SHOE_SECRET_KEY_FILE``
    (``path``), exactly one of them (as the shoe's Application environment has them)."""
    value, path = (value or "").strip(), (path or "").strip()
    if value and path:
        raise SecretKeyError(
            f"both {KEY_VARIABLE} and {KEY_FILE_VARIABLE} are set: give the shoe one of them"
        )
    if value:
        return parse_env_keys(value)
    if not path:
        raise SecretKeyError(
            f"the shoe has no secret key to encrypt its shoes with: set {KEY_FILE_VARIABLE} "
            f"(made by `punto-banco keys init`) or {KEY_VARIABLE}"
        )
    try:
        return read_key_file(Path(path))
    except SecretKeyError as error:
        raise SecretKeyError(
            f"{error}. The shoe encrypts its order and salt at rest and will not start "
            f"without its key: run `punto-banco keys init` (with the same {KEY_FILE_VARIABLE} "
            "or PB_DATA_DIR), or restore the key file the store was written with"
        ) from None
