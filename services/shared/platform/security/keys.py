"""Key files: each service's signing key and the keyring of public keys; the shoe's secret keys.

Private files are mode 0600 from their first byte (folders 0700) and replaced atomically; one
that group or others may read is refused. :func:`init_keys` makes what is missing (ids
``<service>-<n>``); :func:`rotate_key` adds the new public key to the keyring first, so readers
(who read it again on an unknown key id) never meet an unknown signer. The shoe's AES-256
secret keys (:class:`SecretKeys`) come from a JWK Set file or ``PB_SHOE_SECRET_KEY``; the first
encrypts, all decrypt (a rotation keeps the old ones).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from joserfc.errors import JoseError
from joserfc.jwk import KeySet, OctKey

from services.shared.platform.security.signing import (
    KEY_ID,
    Keyring,
    KeyringEntry,
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


SERVICES: tuple[str, ...] = ("shoe", "dealing", "settlement")
"""The services that sign what they publish: the default of ``punto-banco keys init``."""


class KeysError(RuntimeError):
    """A key or keyring missing or unusable; the message says what to run or fix."""


def init_command(settings: Settings) -> str:
    """The command that creates what ``settings`` looks for."""
    named = " (with the same PB_SIGNING_KEY / PB_KEYRING)" if settings.signing_key else ""
    return f"punto-banco keys init --data-dir {settings.data_dir}{named}"


# ---- reading ---------------------------------------------------------------------------


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """The Ed25519 private key in ``path`` (PEM); refused when group or others may read it."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        raise KeysError(f"no signing key at {path}") from None
    except OSError as error:
        raise KeysError(f"cannot read the signing key {path}: {error.strerror}") from None
    if mode & 0o077:
        raise KeysError(
            f"the signing key {path} is open to group or others (mode {mode:04o}): whoever "
            f"reads it can sign as the service. Run `chmod 600 {path}`, and if someone else may "
            "have read it, `punto-banco keys rotate`"
        )
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (ValueError, TypeError) as error:
        raise KeysError(f"{path} is not an unencrypted PEM private key: {error}") from None
    except OSError as error:
        raise KeysError(f"cannot read the signing key {path}: {error.strerror}") from None
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


# ---- writing ---------------------------------------------------------------------------


def init_keys(settings: Settings, services: Sequence[str] = SERVICES) -> list[str]:
    """Give every service in ``services`` a key and put it in the keyring; what was done."""
    keyring_path = settings.keyring_path
    paths = {service: settings.for_service(service).signing_key_path for service in services}
    if len(set(paths.values())) < len(paths):
        raise KeysError(
            f"PB_SIGNING_KEY names one file for several services ({settings.signing_key}): "
            "put {service} in it (e.g. /run/secrets/{service}.pem), each service has its own key"
        )
    try:
        keyring = Keyring.load(keyring_path) if keyring_path.exists() else Keyring({}, keyring_path)
    except KeyringError as error:
        raise KeysError(str(error)) from None
    done: list[str] = []
    changed = False
    for service, path in paths.items():
        if path.exists():
            key = load_private_key(path)
            entry = keyring.find(service, key.public_key())
            if entry is not None:
                done.append(f"{service}: key {entry.kid} kept ({path})")
                continue
            verb = "added to the keyring"
        else:
            key = Ed25519PrivateKey.generate()
            _write_private(path, key, exclusive=True)
            verb = "created"
        entry = KeyringEntry(_next_kid(keyring, service), service, key.public_key())
        keyring = keyring.with_entry(entry)
        changed = True
        done.append(f"{service}: key {entry.kid} {verb} ({path})")
    if changed or not keyring_path.exists():
        _write_keyring(keyring_path, keyring)
        done.append(f"keyring {keyring_path}: {len(keyring)} keys")
    if "shoe" in services:
        done.append(init_secret_key(settings.for_service("shoe")))
    return done


def init_secret_key(settings: Settings) -> str:
    """The shoe's secret key file, made when missing (``security/keys.py``); what was done."""
    if settings.shoe_secret_key:
        return "shoe: secret keys from PB_SHOE_SECRET_KEY (no file made)"
    path = settings.shoe_secret_key_path
    try:
        if path.exists():
            keys = read_key_file(path)
            return f"shoe: secret key {keys.current} kept ({path}, {len(keys.kids)} keys)"
        keys = create_key_file(path)
    except SecretKeyError as error:
        raise KeysError(str(error)) from None
    return f"shoe: secret key {keys.current} created ({path})"


def rotate_secret_key(settings: Settings) -> str:
    """A new secret key for the shoe, first in its key file (the old keys stay); its id."""
    if settings.shoe_secret_key:
        raise KeysError(
            "the shoe's secret keys come from PB_SHOE_SECRET_KEY: put a new "
            "<key id>:<base64 of 32 bytes> FIRST in it, keep the old ones, restart the shoe"
        )
    try:
        return rotate_key_file(settings.shoe_secret_key_path)
    except SecretKeyError as error:
        raise KeysError(str(error)) from None


def rotate_key(settings: Settings) -> str:
    """A new key for ``settings.service`` (see the module docstring); its key id."""
    keyring = load_keyring(settings)
    signer_for(settings, keyring)  # the current key must be sound before it is replaced
    key = Ed25519PrivateKey.generate()
    entry = KeyringEntry(_next_kid(keyring, settings.service), settings.service, key.public_key())
    _write_keyring(settings.keyring_path, keyring.with_entry(entry))
    _write_private(settings.signing_key_path, key, exclusive=False)
    return entry.kid


def init_run_keys(data_dir: Path, services: Sequence[str] = SERVICES) -> list[str]:
    """Keys of a local run (``punto-banco up``, the tests' system, the bench) in its folder."""
    return init_keys(Settings(service=services[0], data_dir=data_dir), services)


def _next_kid(keyring: Keyring, service: str) -> str:
    pattern = re.compile(re.escape(service) + r"-([1-9][0-9]{0,8})")
    numbers = [int(m.group(1)) for e in keyring.entries() if (m := pattern.fullmatch(e.kid))]
    return f"{service}-{max(numbers, default=0) + 1}"


def _write_private(path: Path, key: Ed25519PrivateKey, *, exclusive: bool) -> None:
    """Write ``key`` to ``path`` (mode 0600 from the start); replace it unless ``exclusive``."""
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    if exclusive:
        create_private(path, pem)
    else:
        replace_file(path, pem, 0o600)


def _write_keyring(path: Path, keyring: Keyring) -> None:
    replace_file(path, keyring.to_json().encode("utf-8"), 0o644)
