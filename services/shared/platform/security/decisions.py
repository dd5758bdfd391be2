"""Supervisors' decisions: the signed token a void carries, and the supervisors' keyring.

A token is a JWT (RFC 7519, ``typ`` ``pb-decision+jwt``), EdDSA over Ed25519, made and parsed
by ``joserfc``; its claims are exactly the scheme's (``ver`` 1): the action, table, coup and
reason, the supervisor (``iss`` = ``sub``), ``jti`` = the carrying command's ``event_id`` and a
lifetime of at most an hour. :func:`authenticate` checks what the token says by itself,
:func:`check_time` whether it may be used at a moment, :func:`mismatch` whether it is the
command's; each refusal is a :class:`DecisionRefused` with its ``CommandRejected`` reason code.
The :class:`SupervisorKeyring` file follows its file (keys added, retired at a moment).
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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal
from uuid import UUID, uuid4

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from joserfc import jws, jwt
from joserfc.errors import JoseError, UnsupportedAlgorithmError
from joserfc.jwk import OKPKey
from joserfc.util import urlsafe_b64decode

from contracts import MAX_AUTHORIZATION, MAX_TEXT, VoidCoup
from services.shared.platform.security.keys import (
    KeysError,
    create_private,
    load_private_key,
    replace_file,
)
from services.shared.platform.security.signing import (
    ALGORITHM,
    KEY_ID,
    key_entries,
    parse_public_key,
    public_key_pem,
    raw_public_key,
    unique_members,
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


TOKEN_TYPE = "pb-decision+jwt"
"""The header's ``typ``: a supervisor's decision (RFC 8725 explicit typing)."""
AUDIENCE = "punto-banco:dealing"
CLAIMS_VERSION = 1
ACTIONS = frozenset({"void"})
"""What a decision may decide (a later correction adds its action here)."""

MAX_LIFETIME = timedelta(hours=1)
"""The longest a token may be valid (``exp - iat``): a token is made just before it is sent."""
DEFAULT_LIFETIME = timedelta(minutes=5)
"""How long a token made by :func:`sign_decision` is valid unless told otherwise."""
LEEWAY = timedelta(seconds=60)
"""Clock difference allowed between the supervisor's machine and dealing (``iat``, ``exp``)."""

RefusalCode = Literal[
    "AUTHORIZATION_MALFORMED",
    "UNKNOWN_SUPERVISOR_KEY",
    "SUPERVISOR_KEY_RETIRED",
    "BAD_SIGNATURE",
    "AUTHORIZATION_EXPIRED",
    "AUTHORIZATION_MISMATCH",
]

_HEADER = frozenset({"alg", "kid", "typ"})
_CLAIMS = frozenset(
    {"action", "aud", "coup_id", "exp", "iat", "iss", "jti", "reason", "sub", "table_id", "ver"}
)
_UUID = re.compile(r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}")
_EARLIEST, _LATEST = 946_684_800, 32_503_680_000  # 2000-01-01, 3000-01-01 (Unix seconds)


class _EdDSAOnly(jws.JWSRegistry):
    def get_alg(self, name: str) -> Any:  # no warning that RFC 9864 says Ed25519 now
        if name != ALGORITHM:
            raise UnsupportedAlgorithmError(f"{name!r}: a decision is signed with {ALGORITHM}")
        return self.algorithms[name]


_JWS = _EdDSAOnly()


class DecisionRefused(ValueError):
    """A token refused; ``code`` is the ``CommandRejected.reason_code`` it is answered with."""

    def __init__(self, code: RefusalCode, message: str) -> None:
        super().__init__(message)
        self.code: RefusalCode = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Decision:
    """What a token says (once :func:`authenticate` accepted it: who signed it, too)."""

    key_id: str
    issuer: str
    supervisor_id: str
    decision_id: UUID
    action: str
    table_id: str
    coup_id: str
    reason: str
    issued_at: datetime
    expires_at: datetime


def _unix(moment: datetime) -> int:
    return int(moment.timestamp())


def sign_decision(
    key: Ed25519PrivateKey,
    key_id: str,
    *,
    supervisor_id: str,
    decision_id: UUID,
    table_id: str,
    coup_id: str,
    reason: str,
    action: str = "void",
    issued_at: datetime | None = None,
    lifetime: timedelta = DEFAULT_LIFETIME,
) -> str:
    """The token of a decision (``decision_id``: the ``event_id`` of the command carrying it)."""
    issued = issued_at or datetime.now(UTC)
    header = {"alg": ALGORITHM, "kid": key_id, "typ": TOKEN_TYPE}  # keys sorted, as the claims
    claims = {
        "action": action,
        "aud": AUDIENCE,
        "coup_id": coup_id,
        "exp": _unix(issued + lifetime),
        "iat": _unix(issued),
        "iss": supervisor_id,
        "jti": str(decision_id),
        "reason": reason,
        "sub": supervisor_id,
        "table_id": table_id,
        "ver": CLAIMS_VERSION,
    }
    return jwt.encode(header, claims, OKPKey.import_key(key), registry=_JWS, default_type=None)


@dataclass(frozen=True, slots=True)
class SupervisorSigner:
    """A supervisor's private key under its key id: makes signed ``VoidCoup`` commands."""

    kid: str
    supervisor_id: str
    key: Ed25519PrivateKey

    @classmethod
    def from_file(cls, key_path: Path, keyring: SupervisorKeyring) -> SupervisorSigner:
        """The signer of the private key in ``key_path``, as ``keyring`` lists it."""
        private = load_supervisor_key(key_path)
        entry = keyring.find(private.public_key())
        if entry is None:
            where = keyring.path or "the supervisors keyring"
            raise SupervisorKeysError(
                f"the key in {key_path} is not in {where}: run `punto-banco supervisor keygen` "
                "or give the keyring dealing uses (--keyring)"
            )
        return cls(entry.kid, entry.supervisor, private)

    def void(
        self,
        table_id: str,
        coup_id: str,
        reason: str = "",
        *,
        event_id: UUID | None = None,
        issued_at: datetime | None = None,
        lifetime: timedelta = DEFAULT_LIFETIME,
    ) -> VoidCoup:
        """A ``VoidCoup`` carrying this supervisor's decision to void the coup."""
        command_id = event_id or uuid4()
        token = sign_decision(
            self.key,
            self.kid,
            supervisor_id=self.supervisor_id,
            decision_id=command_id,
            table_id=table_id,
            coup_id=coup_id,
            reason=reason,
            issued_at=issued_at,
            lifetime=lifetime,
        )
        return VoidCoup(
            event_id=command_id,
            table_id=table_id,
            coup_id=coup_id,
            reason=reason,
            supervisor_id=self.supervisor_id,
            authorization=token,
        )


def read_decision(token: str) -> tuple[Decision, jws.CompactSignature]:
    """The decision a token states and its JWS, NOT verified; ``AUTHORIZATION_MALFORMED``
    unless it is a well-formed token of this scheme."""
    if len(token) > MAX_AUTHORIZATION:
        raise _malformed(f"it has {len(token)} characters, more than {MAX_AUTHORIZATION}")
    try:
        signed = jws.extract_compact(token.encode("ascii"), registry=_JWS)
        header = _object(urlsafe_b64decode(signed.segments["header"]))  # duplicates refused
        claims = _object(signed.payload)
        urlsafe_b64decode(signed.segments["signature"])
    except (ValueError, JoseError) as error:
        raise _malformed(f"not a JWS in compact serialization ({error!r})") from None
    if set(header) != _HEADER:
        raise _malformed(f"its header must have exactly {sorted(_HEADER)}")
    if header["alg"] != ALGORITHM or header["typ"] != TOKEN_TYPE:
        raise _malformed(f'its header must say "alg":"{ALGORITHM}","typ":"{TOKEN_TYPE}"')
    kid = header["kid"]
    if not isinstance(kid, str) or KEY_ID.fullmatch(kid) is None:
        raise _malformed("its kid is not a key id")
    if set(claims) != _CLAIMS:
        raise _malformed(f"its claims must be exactly {sorted(_CLAIMS)}")
    if claims["ver"] != CLAIMS_VERSION or isinstance(claims["ver"], bool):
        raise _malformed(f"claims version {claims['ver']!r}: this dealing reads {CLAIMS_VERSION}")
    if claims["aud"] != AUDIENCE:
        raise _malformed(f"its audience must be {AUDIENCE!r}")
    if claims["action"] not in ACTIONS:
        raise _malformed(f"action {claims['action']!r} is not one of {sorted(ACTIONS)}")
    for name in ("iss", "sub"):
        if not isinstance(claims[name], str) or SUPERVISOR_ID.fullmatch(claims[name]) is None:
            raise _malformed(f"its {name} is not a supervisor id")
    for name in ("table_id", "coup_id"):
        if not isinstance(claims[name], str) or not 1 <= len(claims[name]) <= 128:
            raise _malformed(f"its {name} must be 1-128 characters")
    if not isinstance(claims["reason"], str) or len(claims["reason"]) > MAX_TEXT:
        raise _malformed(f"its reason must be text of at most {MAX_TEXT} characters")
    if not isinstance(claims["jti"], str) or _UUID.fullmatch(claims["jti"]) is None:
        raise _malformed("its jti must be the command's event_id (a UUID, lower case)")
    issued, expires = claims["iat"], claims["exp"]
    for name, value in (("iat", issued), ("exp", expires)):
        if type(value) is not int or not _EARLIEST <= value <= _LATEST:
            raise _malformed(f"its {name} must be whole Unix seconds")
    if not 0 < expires - issued <= MAX_LIFETIME.total_seconds():
        raise _malformed(f"it must expire after it was issued, within {MAX_LIFETIME}")
    return (
        Decision(
            key_id=kid,
            issuer=claims["iss"],
            supervisor_id=claims["sub"],
            decision_id=UUID(claims["jti"]),
            action=claims["action"],
            table_id=claims["table_id"],
            coup_id=claims["coup_id"],
            reason=claims["reason"],
            issued_at=datetime.fromtimestamp(issued, UTC),
            expires_at=datetime.fromtimestamp(expires, UTC),
        ),
        signed,
    )


def authenticate(keyring: SupervisorKeyring, token: str) -> tuple[Decision, SupervisorKey]:
    """The decision and the key that signed it, when a key of ``keyring`` did and holds it."""
    decision, signed = read_decision(token)
    key = keyring.get(decision.key_id)
    if key is None:
        raise DecisionRefused(
            "UNKNOWN_SUPERVISOR_KEY",
            f"key {decision.key_id!r} is not in the supervisors keyring",
        )
    if not jws.validate_compact(signed, OKPKey.import_key(key.public_key), registry=_JWS):
        raise DecisionRefused(
            "BAD_SIGNATURE",
            f"the signature is not key {decision.key_id!r}'s: the token was changed, or forged",
        )
    for name, named in (("iss", decision.issuer), ("sub", decision.supervisor_id)):
        if named != key.supervisor:
            raise DecisionRefused(
                "AUTHORIZATION_MISMATCH",
                f"key {key.kid!r} is {key.supervisor}'s, the token's {name} is {named!r}: a "
                "supervisor signs only their own decisions",
            )
    return decision, key


def check_time(decision: Decision, key: SupervisorKey, moment: datetime) -> None:
    """The decision may be used at ``moment``: its key not retired, ``iat <= moment <= exp``
    (give or take :data:`LEEWAY`)."""
    if not key.active_at(moment):
        raise DecisionRefused(
            "SUPERVISOR_KEY_RETIRED",
            f"key {key.kid!r} was retired at {_shown(key.retired_at)}: sign with "
            f"{key.supervisor}'s current key",
        )
    if moment > decision.expires_at + LEEWAY:
        raise DecisionRefused(
            "AUTHORIZATION_EXPIRED",
            f"it expired at {_shown(decision.expires_at)} (now {_shown(moment)}): sign again",
        )
    if moment < decision.issued_at - LEEWAY:
        raise DecisionRefused(
            "AUTHORIZATION_EXPIRED",
            f"it is issued at {_shown(decision.issued_at)}, later than now ({_shown(moment)}): "
            "check the signing machine's clock",
        )


def mismatch(
    decision: Decision,
    *,
    command_id: UUID,
    action: str,
    table_id: str,
    coup_id: str,
    reason: str,
    supervisor_id: str | None,
) -> str | None:
    """Why the decision is not the one of this command (None: it is)."""
    wanted = {
        "jti": (decision.decision_id, command_id),
        "action": (decision.action, action),
        "table_id": (decision.table_id, table_id),
        "coup_id": (decision.coup_id, coup_id),
        "reason": (decision.reason, reason),
    }
    for name, (signed, given) in wanted.items():
        if signed != given:
            return f"it signs {name} {_limited(signed)}, the command says {_limited(given)}"
    if supervisor_id is not None and supervisor_id != decision.supervisor_id:
        return (
            f"signed by {decision.supervisor_id!r}, the command names supervisor "
            f"{_limited(supervisor_id)}"
        )
    return None


def decision_id_of(token: str) -> UUID | None:
    """The ``jti`` of a token (unverified: for one already verified and stored), or None."""
    try:
        return read_decision(token)[0].decision_id
    except DecisionRefused:
        return None


def _object(data: bytes) -> dict[str, Any]:
    document = json.loads(data.decode("utf-8"), object_pairs_hook=unique_members)
    if not isinstance(document, dict):
        raise ValueError("a JSON object was expected")
    return document


def _malformed(why: str) -> DecisionRefused:
    return DecisionRefused("AUTHORIZATION_MALFORMED", f"the authorization is malformed: {why}")


def _shown(moment: datetime | None) -> str:
    return "?" if moment is None else moment.astimezone(UTC).isoformat(timespec="seconds")


def _limited(value: object, limit: int = 80) -> str:
    text = repr(str(value))
    return text if len(text) <= limit else text[:limit] + "..."
