"""Supervisors' decisions: the signed token a void (and any later correction) carries.

Scheme: a JWT (RFC 7519) in JWS compact serialization (RFC 7515), algorithm ``EdDSA`` over
Ed25519 (RFC 8037), keys from PyCA ``cryptography`` and the supervisors' keyring
(``supervisors.py``). Header and claims are compact JSON with sorted keys::

    header  {"alg":"EdDSA","kid":"sup-7-2","typ":"pb-decision+jwt"}
    claims  {"action":"void","aud":"punto-banco:dealing","coup_id":"t1.coup-5",
             "exp":1796119500,"iat":1796119200,"iss":"sup-7","jti":"<the command's event_id>",
             "reason":"dealer exposed a card","sub":"sup-7","table_id":"t1","ver":1}

``typ`` types the token explicitly (RFC 8725 section 3.11: a JWT of another kind is not a
decision), ``ver`` is the version of the claim set. ``iss`` and ``sub`` are the supervisor
who holds ``kid`` in the keyring; ``jti`` is the ``event_id`` of the command carrying it, so a
token is good for one command; ``exp`` is at most :data:`MAX_LIFETIME` after ``iat``.

:func:`authenticate` checks what the token says by itself (its form, a key of the keyring,
the signature, the key's holder) and :func:`check_time` whether it may be used at a moment
(the key not retired, ``iat`` and ``exp``); dealing checks both at the time it handles the
command, and :func:`mismatch` against the command itself. The audit checks the same against
the stored void and the time it was recorded. Every refusal is a :class:`DecisionRefused`
with the ``CommandRejected.reason_code`` it is answered with.

``joserfc`` makes and parses the JWS; the claim rules are the scheme's own (exactly these
members, ids, a bounded lifetime), and :func:`check_time` accepts up to ``exp + LEEWAY``
inclusive, as the audit did for the voids in the stores (joserfc's ``JWTClaimsRegistry``
refuses at that second).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal
from uuid import UUID, uuid4

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from joserfc import jws, jwt
from joserfc.errors import JoseError, UnsupportedAlgorithmError
from joserfc.jwk import OKPKey
from joserfc.util import urlsafe_b64decode

from contracts import MAX_AUTHORIZATION, MAX_TEXT, VoidCoup
from services.shared.platform.security.signing import ALGORITHM, KEY_ID
from services.shared.platform.security.supervisors import (
    SUPERVISOR_ID,
    SupervisorKey,
    SupervisorKeyring,
    SupervisorKeysError,
    load_supervisor_key,
)

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
    document = json.loads(data.decode("utf-8"), object_pairs_hook=_unique)
    if not isinstance(document, dict):
        raise ValueError("a JSON object was expected")
    return document


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, value in pairs:
        if name in found:
            raise ValueError(f"member {name!r} appears twice")
        found[name] = value
    return found


def _malformed(why: str) -> DecisionRefused:
    return DecisionRefused("AUTHORIZATION_MALFORMED", f"the authorization is malformed: {why}")


def _shown(moment: datetime | None) -> str:
    return "?" if moment is None else moment.astimezone(UTC).isoformat(timespec="seconds")


def _limited(value: object, limit: int = 80) -> str:
    text = repr(str(value))
    return text if len(text) <= limit else text[:limit] + "..."
