"""The supervisors' keyring (who may sign a decision) and their private key files.

The file (``PB_SUPERVISOR_KEYRING``, default ``<data dir>/keys/supervisors.json``) maps key ids
to the supervisor holding the key, its Ed25519 public key (PEM) and, for a key rotated out,
when it was retired::

    {"sup-7-1": {"supervisor": "sup-7", "public_key": "-----BEGIN PUBLIC KEY-----...",
                 "retired_at": "2026-12-01T10:00:00Z"},
     "sup-7-2": {"supervisor": "sup-7", "public_key": "-----BEGIN PUBLIC KEY-----..."}}

It is its own file, not the services' keyring (``signing.py``): supervisors are people whose
roster changes, the file goes to dealing and the auditor only, and a supervisor's key is never
removed. A decision stays verifiable for the audit as long as the store keeps it, so rotation
*retires* a key (dealing refuses new decisions signed with it; the audit accepts those recorded
before ``retired_at``) instead of deleting it. The key parsing and the atomic, owner-only file
writing are the ones of the services' keys.

- :func:`add_supervisor_key` (``punto-banco supervisor keygen``): a new key for a supervisor
  (``<id>-<n>``), its private key file written 0600, its public key in the keyring, and the
  supervisor's earlier keys retired now (rotation).
- :meth:`SupervisorKeyring.watching` (dealing): the keyring of a file that may not exist yet;
  it reads the file again (at most once a second, when it changed) so that a new supervisor,
  a rotation or a retirement is taken without a restart.
"""

from __future__ import annotations

import binascii
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from services.shared.platform.security.key_files import create_private, replace_file
from services.shared.platform.security.keys import KeysError, load_private_key
from services.shared.platform.security.signing import (
    key_entries,
    parse_public_key,
    public_key_pem,
    raw_public_key,
)

log = logging.getLogger(__name__)

SUPERVISOR_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,53}")
"""A supervisor's id in the keyring: 1-54 letters, digits, ``.``, ``_`` or ``-`` (so that
``<id>-<n>`` is a key id)."""

_RELOAD_EVERY = 1.0  # seconds between two looks at the file


class SupervisorKeysError(ValueError):
    """A supervisors keyring or key file that cannot be read or written; says what to fix."""


@dataclass(frozen=True, slots=True)
class SupervisorKey:
    """One key of the keyring: who holds it, and since when it is retired (None: in use)."""

    kid: str
    supervisor: str
    public_key: Ed25519PublicKey
    retired_at: datetime | None = None

    def active_at(self, moment: datetime) -> bool:
        """True if a decision made at ``moment`` may be signed with this key."""
        return self.retired_at is None or moment < self.retired_at


def _moment(text: object, where: str) -> datetime:
    if not isinstance(text, str):
        raise SupervisorKeysError(f"{where}: retired_at must be an RFC 3339 time")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise SupervisorKeysError(f"{where}: retired_at {text!r} is not an RFC 3339 time") from None
    if moment.tzinfo is None:
        raise SupervisorKeysError(f"{where}: retired_at {text!r} has no time zone")
    return moment.astimezone(UTC)


class SupervisorKeyring:
    """Key id -> :class:`SupervisorKey`; a file-backed one follows its file (see the module)."""

    def __init__(self, keys: Mapping[str, SupervisorKey], path: Path | None = None) -> None:
        self._keys = dict(keys)
        self.path = path
        self._stamp = _stamp(path) if path is not None else None
        self._checked = time.monotonic()
        self._lock = threading.Lock()

    # -- reading ---------------------------------------------------------------------------
    @classmethod
    def parse(
        cls, text: str, source: str = "supervisors keyring", path: Path | None = None
    ) -> SupervisorKeyring:
        keys: dict[str, SupervisorKey] = {}
        for kid, entry, where in key_entries(text, source, SupervisorKeysError):
            if not isinstance(entry, dict) or not {"supervisor", "public_key"} <= set(entry):
                raise SupervisorKeysError(f"{where}: must be an object with supervisor, public_key")
            unknown = set(entry) - {"supervisor", "public_key", "retired_at"}
            if unknown:
                raise SupervisorKeysError(f"{where}: unknown members {sorted(unknown)}")
            supervisor, public = entry["supervisor"], entry["public_key"]
            if not isinstance(supervisor, str) or SUPERVISOR_ID.fullmatch(supervisor) is None:
                raise SupervisorKeysError(
                    f"{where}: supervisor must be 1-54 letters, digits, '.', '_' or '-'"
                )
            if not isinstance(public, str):
                raise SupervisorKeysError(f"{where}: public_key must be PEM or base64 of 32 bytes")
            try:
                key = parse_public_key(public.strip())
            except (ValueError, TypeError, binascii.Error) as error:
                raise SupervisorKeysError(
                    f"{where}: public_key is not an Ed25519 key ({error})"
                ) from None
            retired = entry.get("retired_at")
            keys[kid] = SupervisorKey(
                kid, supervisor, key, None if retired is None else _moment(retired, where)
            )
        return cls(keys, path)

    @classmethod
    def load(cls, path: Path) -> SupervisorKeyring:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise SupervisorKeysError(
                f"cannot read the supervisors keyring {path}: {error.strerror}"
            ) from None
        return cls.parse(text, f"supervisors keyring {path}", path)

    @classmethod
    def watching(cls, path: Path) -> SupervisorKeyring:
        """The keyring of ``path``, empty while the file does not exist (it is read when it
        appears); a file that exists but cannot be read is a :class:`SupervisorKeysError`."""
        if path.exists():
            return cls.load(path)
        log.warning(
            "no supervisors keyring at %s (PB_SUPERVISOR_KEYRING): every void is refused until "
            "`punto-banco supervisor keygen` adds a supervisor's key",
            path,
        )
        return cls({}, path)

    # -- looking up ------------------------------------------------------------------------
    def get(self, kid: str) -> SupervisorKey | None:
        """The key ``kid`` as the file says now (a file-backed keyring looks at its file)."""
        self._refresh()
        return self._keys.get(kid)

    def entries(self) -> list[SupervisorKey]:
        self._refresh()
        return list(self._keys.values())

    def find(self, public_key: Ed25519PublicKey) -> SupervisorKey | None:
        """The key whose public half is ``public_key`` (a private key file's own entry)."""
        raw = raw_public_key(public_key)
        for key in self.entries():
            if raw_public_key(key.public_key) == raw:
                return key
        return None

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, kid: object) -> bool:
        return kid in self._keys

    # -- changing ---------------------------------------------------------------------------
    def with_key(self, key: SupervisorKey) -> SupervisorKeyring:
        return SupervisorKeyring({**self._keys, key.kid: key}, self.path)

    def retiring(self, supervisor: str, at: datetime) -> SupervisorKeyring:
        """The keyring with every key of ``supervisor`` in use retired at ``at``."""
        keys = {
            kid: replace(key, retired_at=at)
            if key.supervisor == supervisor and key.retired_at is None
            else key
            for kid, key in self._keys.items()
        }
        return SupervisorKeyring(keys, self.path)

    def next_kid(self, supervisor: str) -> str:
        """``<supervisor>-<n>``: one more than the supervisor's highest number, never reused."""
        pattern = re.compile(re.escape(supervisor) + r"-([1-9][0-9]{0,8})")
        numbers = [int(m.group(1)) for kid in self._keys if (m := pattern.fullmatch(kid))]
        return f"{supervisor}-{max(numbers, default=0) + 1}"

    def to_json(self) -> str:
        document: dict[str, dict[str, str]] = {}
        for kid, key in sorted(self._keys.items()):
            entry = {"supervisor": key.supervisor, "public_key": public_key_pem(key.public_key)}
            if key.retired_at is not None:
                entry["retired_at"] = key.retired_at.isoformat().replace("+00:00", "Z")
            document[kid] = entry
        return json.dumps(document, indent=2) + "\n"

    def _refresh(self) -> None:
        path = self.path
        if path is None:
            return
        with self._lock:
            now = time.monotonic()
            if now - self._checked < _RELOAD_EVERY:
                return
            self._checked = now
            stamp = _stamp(path)
            if stamp == self._stamp:
                return
            try:
                fresh = SupervisorKeyring.load(path) if stamp is not None else None
            except SupervisorKeysError as error:
                log.error("%s changed but is unusable (%s): the old keys are kept", path, error)
                return
            self._keys = {} if fresh is None else fresh._keys
            self._stamp = stamp
            log.warning("supervisors keyring %s read again: %d keys", path, len(self._keys))


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size, status.st_ino


# -- key files ----------------------------------------------------------------------------------
def load_supervisor_key(path: Path) -> Ed25519PrivateKey:
    """A supervisor's private key (PEM); refused when group or others may read it."""
    try:
        return load_private_key(path)
    except KeysError as error:
        raise SupervisorKeysError(str(error).replace("signing key", "supervisor key")) from None


def write_keyring(path: Path, keyring: SupervisorKeyring) -> None:
    """Write the keyring atomically (readable by all: it holds no secret)."""
    replace_file(path, keyring.to_json().encode("utf-8"), 0o644)


def add_supervisor_key(
    keyring_path: Path,
    key_path: Path,
    supervisor: str,
    now: datetime | None = None,
) -> tuple[SupervisorKey, list[str]]:
    """A new key for ``supervisor``: the private key replaces ``key_path`` (0600), the public key
    enters the keyring at ``keyring_path`` (made when missing) under ``<supervisor>-<n>``, and
    the supervisor's keys in use are retired now. The new key and the ids retired."""
    if SUPERVISOR_ID.fullmatch(supervisor) is None:
        raise SupervisorKeysError(
            f"supervisor id {supervisor!r}: 1-54 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    now = (now or datetime.now(UTC)).astimezone(UTC)
    keyring = (
        SupervisorKeyring.load(keyring_path)
        if keyring_path.exists()
        else SupervisorKeyring({}, keyring_path)
    )
    retired = [
        k.kid for k in keyring.entries() if k.supervisor == supervisor and k.retired_at is None
    ]
    private = Ed25519PrivateKey.generate()
    key = SupervisorKey(keyring.next_kid(supervisor), supervisor, private.public_key())
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    # The keyring first (as a service key's rotation): a key file is never left that no
    # keyring knows; if writing the key file fails, running keygen again makes another.
    write_keyring(keyring_path, keyring.retiring(supervisor, now).with_key(key))
    if key_path.exists():
        replace_file(key_path, pem, 0o600)
    else:
        create_private(key_path, pem)
    return key, retired


def ensure_supervisor_key(
    keyring_path: Path, key_path: Path, supervisor: str
) -> tuple[Ed25519PrivateKey, SupervisorKey]:
    """The supervisor's private key at ``key_path`` and its keyring entry, made (as by
    :func:`add_supervisor_key`) unless the file holds a key the keyring lists as the
    supervisor's and in use (idempotent: local runs, the tests' supervisor)."""
    if key_path.exists() and keyring_path.exists():
        private = load_supervisor_key(key_path)
        known = SupervisorKeyring.load(keyring_path).find(private.public_key())
        if known is not None and known.supervisor == supervisor and known.retired_at is None:
            return private, known
    key, _ = add_supervisor_key(keyring_path, key_path, supervisor)
    return load_supervisor_key(key_path), key


def entry_json(keys: Iterable[SupervisorKey]) -> str:
    """The keyring entries of ``keys`` (what an operator adds to another keyring file)."""
    return SupervisorKeyring({key.kid: key for key in keys}).to_json()
