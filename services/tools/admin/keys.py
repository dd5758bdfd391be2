"""``punto-banco keys``: the services' signing keys and the keyring, the shoe's secret keys.

Private files are written by the runtime's ``create_private`` / ``replace_file`` (mode 0600
from their first byte). :func:`init_keys` makes what is missing (ids ``<service>-<n>``);
:func:`rotate_key` adds the new public key to the keyring first, so readers (who read it again
on an unknown key id) never meet an unknown signer. A secret-key rotation puts the new key
first and keeps the old ones (they still decrypt the shoes in play).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from joserfc.jwk import KeySet, OctKey

from services.shared.platform.security import (
    Keyring,
    KeyringEntry,
    KeyringError,
    KeysError,
    SecretKeyError,
    SecretKeys,
    create_private,
    load_keyring,
    load_private_key,
    public_key_pem,
    read_key_file,
    replace_file,
    signer_for,
)
from services.shared.platform.settings import Settings

KID_PREFIX = "shoe-secret-"

SERVICES: tuple[str, ...] = ("shoe", "dealing", "settlement")
"""The services that sign what they publish: the default of ``punto-banco keys init``."""


def new_key() -> bytes:
    """A fresh AES-256 key from the operating system's CSPRNG."""
    return AESGCM.generate_key(bit_length=256)


def env_form(keys: SecretKeys) -> str:
    """The keys as ``PB_SHOE_SECRET_KEY`` holds them."""
    return ",".join(f"{kid}:{base64.b64encode(key).decode('ascii')}" for kid, key in keys.keys)


def key_set_json(keys: SecretKeys) -> str:
    jwks = KeySet([OctKey.import_key(key, {"kid": kid, "use": "enc"}) for kid, key in keys.keys])
    return json.dumps(jwks.as_dict(private=True), indent=2) + "\n"


def write_key_file(path: Path, keys: SecretKeys, *, exclusive: bool) -> None:
    """Write ``keys`` to ``path``, mode 0600 from the start (replace it unless ``exclusive``)."""
    data = key_set_json(keys).encode("utf-8")
    if exclusive:
        create_private(path, data)
    else:
        replace_file(path, data, 0o600)


def next_kid(kids: Iterable[str], prefix: str = KID_PREFIX) -> str:
    """``<prefix><n>``: one more than the highest number after ``prefix``, never reused."""
    pattern = re.compile(re.escape(prefix) + r"([1-9][0-9]{0,8})")
    numbers = [int(m.group(1)) for kid in kids if (m := pattern.fullmatch(kid))]
    return f"{prefix}{max(numbers, default=0) + 1}"


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


def init_keys(
    settings: Settings,
    services: Sequence[str] = SERVICES,
    tables: Sequence[str] | None = None,
) -> list[str]:
    """Give every service in ``services`` a key and put it in the keyring; what was done.
    With ``tables``, each new key signs the records of these tables only (a device bridge's)."""
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
            write_private(path, key, exclusive=True)
            verb = "created"
        scope = frozenset(tables) if tables else None
        entry = KeyringEntry(_kid(keyring, service), service, key.public_key(), scope)
        keyring = with_entry(keyring, entry)
        changed = True
        done.append(f"{service}: key {entry.kid} {verb} ({path})")
    if changed or not keyring_path.exists():
        _write_keyring(keyring_path, keyring)
        done.append(f"keyring {keyring_path}: {len(keyring.entries())} keys")
    if "shoe" in services:
        done.append(init_secret_key(settings.for_service("shoe")))
    return done


def init_secret_key(settings: Settings) -> str:
    """The shoe's secret key file, made when missing; what was done."""
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
    current = signer_for(settings, keyring)  # sound before it is replaced
    scope = keyring.find(settings.service, current.public_key)
    key = Ed25519PrivateKey.generate()
    tables = scope.tables if scope is not None else None  # the new key signs as the old did
    entry = KeyringEntry(
        _kid(keyring, settings.service), settings.service, key.public_key(), tables
    )
    _write_keyring(settings.keyring_path, with_entry(keyring, entry))
    write_private(settings.signing_key_path, key, exclusive=False)
    return entry.kid


def init_run_keys(data_dir: Path, services: Sequence[str] = SERVICES) -> list[str]:
    """Keys of a local run (``punto-banco up``, the tests' system, the bench) in its folder."""
    return init_keys(Settings(service=services[0], data_dir=data_dir), services)


def _kid(keyring: Keyring, service: str) -> str:
    return next_kid((entry.kid for entry in keyring.entries()), f"{service}-")


def write_private(path: Path, key: Ed25519PrivateKey, *, exclusive: bool) -> None:
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


def with_entry(keyring: Keyring, entry: KeyringEntry) -> Keyring:
    """``keyring`` with ``entry`` added (or replacing the entry of its key id)."""
    entries = {known.kid: known for known in keyring.entries()}
    return Keyring({**entries, entry.kid: entry}, keyring.path)


def keyring_json(keyring: Keyring) -> str:
    """The keyring as the file holds it (public keys in PEM)."""
    document: dict[str, dict[str, object]] = {}
    for entry in sorted(keyring.entries(), key=lambda entry: entry.kid):
        fields: dict[str, object] = {
            "service": entry.service,
            "public_key": public_key_pem(entry.public_key),
        }
        if entry.tables is not None:
            fields["tables"] = sorted(entry.tables)
        document[entry.kid] = fields
    return json.dumps(document, indent=2) + "\n"


def _write_keyring(path: Path, keyring: Keyring) -> None:
    replace_file(path, keyring_json(keyring).encode("utf-8"), 0o644)
