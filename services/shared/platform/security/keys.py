"""Key files as a service reads them: its signing key and the keyring of public keys; the
shoe's secret keys.

Private files are mode 0600 from their first byte (folders 0700) and replaced atomically; one
that group or others may read is refused. The shoe's AES-256 secret keys (:class:`SecretKeys`)
come from a JWK Set file or ``PB_SHOE_SECRET_KEY``; the first encrypts, all decrypt. Making
and rotating them is a tool's: ``services/tools/admin/keys.py``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from joserfc.errors import JoseError
from joserfc.jwk import KeySet, OctKey

from services.shared.platform.security.signing import (
    KEY_ID,
    Keyring,
    KeyringError,
    Signer,
)
from services.shared.platform.settings import Settings


def private_folder(folder: Path) -> None:
    """Make ``folder`` (mode 0700 when it is new)."""
    if not folder.exists():
        folder.mkdir(parents=True, mode=0o700)
        os.chmod(folder, 0o700)  # mkdir's mode is masked by the umask


def create_private(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file ``path``, mode 0600; FileExistsError if it exists."""
    private_folder(path.parent)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        os.fchmod(file.fileno(), 0o600)
        file.write(data)


def replace_file(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to a new file beside ``path`` and rename it over ``path`` (atomic)."""
    private_folder(path.parent)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as file:
            os.fchmod(file.fileno(), mode)
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def read_private(
    path: Path, what: str, error: type[RuntimeError], exposes: str, remedy: str
) -> bytes:
    """The bytes of the private file ``path`` (the ``what``); ``error`` when it is missing,
    cannot be read, or group or others may read it (whoever does can do what it ``exposes``:
    the message says to ``chmod`` it and, if someone else may have read it, the ``remedy``)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise error(
                f"the {what} {path} is open to group or others (mode {mode:04o}): whoever reads "
                f"it can {exposes}. Run `chmod 600 {path}`, and if someone else may have read "
                f"it, {remedy}"
            )
        return path.read_bytes()
    except FileNotFoundError:
        raise error(f"no {what} at {path}") from None
    except OSError as problem:
        raise error(f"cannot read the {what} {path}: {problem.strerror}") from None


KEY_VARIABLE = "PB_SHOE_SECRET_KEY"
KEY_FILE_VARIABLE = "PB_SHOE_SECRET_KEY_FILE"
KEY_BYTES = 32
"""AES-256."""


class SecretKeyError(RuntimeError):
    """The secret keys are missing or unusable; the message says what to run or fix."""


@dataclass(frozen=True)
class SecretKeys:
    """Key id -> 32-byte key, the first one encrypting; ``source`` says where they came from."""

    keys: tuple[tuple[str, bytes], ...]
    source: str

    def __post_init__(self) -> None:
        if not self.keys:
            raise SecretKeyError(f"{self.source} holds no key")
        for number, (kid, key) in enumerate(self.keys):
            if KEY_ID.fullmatch(kid) is None:
                raise SecretKeyError(
                    f"{self.source}: key id {kid!r} is not 1-64 letters, digits, '.', '_' or '-'"
                )
            if len(key) != KEY_BYTES:
                raise SecretKeyError(
                    f"{self.source}: key {kid} has {len(key)} bytes, AES-256 needs {KEY_BYTES}"
                )
            if kid in self.kids[:number]:
                raise SecretKeyError(f"{self.source}: key id {kid} appears twice")

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
        return dict(self.keys).get(kid)


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


def read_key_file(path: Path) -> SecretKeys:
    """The keys in ``path``; refused when group or others may read it."""
    data = read_private(
        path,
        "secret key file",
        SecretKeyError,
        "read every shoe in play",
        "`punto-banco keys rotate-secret` and finish the shoes in play",
    )
    return parse_key_set(data.decode("utf-8"), str(path))


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


class KeysError(RuntimeError):
    """A key or keyring missing or unusable; the message says what to run or fix."""


def init_command(settings: Settings) -> str:
    """The command that creates what ``settings`` looks for."""
    named = " (with the same PB_SIGNING_KEY / PB_KEYRING)" if settings.signing_key else ""
    return f"punto-banco keys init --data-dir {settings.data_dir}{named}"


# ---- reading ---------------------------------------------------------------------------


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """The Ed25519 private key in ``path`` (PEM); refused when group or others may read it."""
    data = read_private(
        path, "signing key", KeysError, "sign as the service", "`punto-banco keys rotate`"
    )
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as error:
        raise KeysError(f"{path} is not an unencrypted PEM private key: {error}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeysError(f"{path} holds a {type(key).__name__}, not an Ed25519 private key")
    return key


def load_keyring(settings: Settings) -> Keyring:
    """The keyring the service verifies records with."""
    path = settings.keyring_path
    if not path.exists():
        raise KeysError(
            f"{settings.service}: no keyring at {path} (PB_KEYRING): it cannot check who wrote "
            f"what it reads. Run `{init_command(settings)}`"
        )
    try:
        return Keyring.load(path)
    except KeyringError as error:
        raise KeysError(f"{settings.service}: {error}") from None


def signer_for(settings: Settings, keyring: Keyring) -> Signer:
    """The service's signer: its private key, under the key id the keyring gives it."""
    path = settings.signing_key_path
    if not path.exists():
        raise KeysError(
            f"{settings.service} cannot sign what it publishes: no signing key at {path} "
            f"(PB_SIGNING_KEY). Run `{init_command(settings)}`"
        )
    try:
        key = load_private_key(path)
    except KeysError as error:
        raise KeysError(f"{settings.service} cannot sign what it publishes: {error}") from None
    entry = keyring.find(settings.service, key.public_key())
    if entry is None:
        raise KeysError(
            f"{settings.service}: its signing key {path} is not in the keyring {keyring.path} "
            f"as a key of {settings.service}, so nobody would believe its records. Run "
            f"`{init_command(settings)}` (it adds the key)"
        )
    return Signer(entry.kid, settings.service, key)
