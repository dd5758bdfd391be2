"""Key files: each service's private signing key, and the keyring of every service's public keys.

Where (``Settings``): ``PB_SIGNING_KEY`` (default ``<data dir>/keys/<service>.pem``, an
Ed25519 private key, PKCS#8 PEM, mode 0600) and ``PB_KEYRING`` (default
``<data dir>/keys/keyring.json``: key id -> ``{"service", "public_key"}``, public keys in PEM).
The keys folder is made mode 0700. A key file that group or others may read is refused: anyone
who can read it can write as the service.

- :func:`init_keys` (``punto-banco keys init``): a key for every service that has none, every
  service's key in the keyring (ids ``<service>-1``, ``-2``...); idempotent.
- :func:`rotate_key` (``punto-banco keys rotate``): a new key for one service; its public key
  goes into the keyring FIRST (readers look at the keyring file again when they meet an unknown
  key id), then it replaces the private key file. The old public key stays in the keyring, so
  what was signed with it still verifies; remove it from the file once nothing needs it.
- :func:`load_keyring` and :func:`signer_for`: what a service loads at start; a missing or
  unusable file is a :class:`KeysError` whose message says what to run.
- :func:`init_secret_key` and :func:`rotate_secret_key`: the shoe's secret key file
  (``PB_SHOE_SECRET_KEY_FILE``, default ``<data dir>/keys/shoe-secret.json``: the AES-256 keys
  its order and salt are encrypted with at rest, ``secret_keys.py``); ``init_keys`` makes it
  with the shoe's signing key.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Sequence
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from services.shared.platform.security.key_files import create_private, replace_file
from services.shared.platform.security.secret_keys import (
    SecretKeyError,
    create_key_file,
    read_key_file,
    rotate_key_file,
)
from services.shared.platform.security.signing import Keyring, KeyringEntry, KeyringError, Signer
from services.shared.platform.settings import Settings

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
    """Give every service in ``services`` a key and put it in the keyring; what was done.

    Keys already there are kept (idempotent); one missing from the keyring is added.
    """
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
    """The shoe's secret key file, made when missing (``secret_keys.py``); what was done."""
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
