"""Supervisors' decisions: the signed token a void carries, and the supervisors' keyring.

A token is a JWT (RFC 7519, ``typ`` ``pb-decision+jwt``), EdDSA over Ed25519, made and parsed
by ``joserfc``; its claims are exactly the scheme's (``ver`` 1): the action, table, coup and
reason, the supervisor (``iss`` = ``sub``), ``jti`` = the carrying command's ``event_id`` and a
lifetime of at most an hour. :func:`authenticate` checks what the token says by itself,
:func:`check_time` whether it may be used at a moment, :func:`mismatch` whether it is the
command's; each refusal is a :class:`DecisionRefused` with its ``CommandRejected`` reason code.
The :class:`SupervisorKeyring` follows its file (keys added, retired at a moment). Making keys
and signing decisions is a tool's: ``services/tools/admin/supervisors.py``.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal
from uuid import UUID

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from joserfc import jws
from joserfc.errors import JoseError, UnsupportedAlgorithmError
from joserfc.jwk import OKPKey
from joserfc.util import urlsafe_b64decode

from contracts import MAX_AUTHORIZATION, MAX_TEXT
from services.shared.platform.security.signing import (
    ALGORITHM,
    KEY_ID,
    FileKeyring,
    shown,
    unique_members,
)

log = logging.getLogger(__name__)

SUPERVISOR_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,53}")
"""A supervisor's id in the keyring: 1-54 letters, digits, ``.``, ``_`` or ``-`` (so that
``<id>-<n>`` is a key id)."""


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


class SupervisorKeyring(FileKeyring[SupervisorKey]):
    """Key id -> :class:`SupervisorKey`. One loaded from its file looks at it on every lookup
    (at most once a second, :class:`FileKeyring`); a file removed leaves it empty."""

    KIND = "supervisors keyring"
    ERROR = SupervisorKeysError
    EMPTY_WHEN_GONE = True

    @classmethod
    def entry(cls, kid: str, entry: object, where: str) -> SupervisorKey:
        """``{"supervisor": ..., "public_key": ..., "retired_at": ...}`` (``retired_at``
        optional)."""
        if not isinstance(entry, dict) or not {"supervisor", "public_key"} <= set(entry):
            raise SupervisorKeysError(f"{where}: must be an object with supervisor, public_key")
        unknown = set(entry) - {"supervisor", "public_key", "retired_at"}
        if unknown:
            raise SupervisorKeysError(f"{where}: unknown members {sorted(unknown)}")
        supervisor = entry["supervisor"]
        if not isinstance(supervisor, str) or SUPERVISOR_ID.fullmatch(supervisor) is None:
            raise SupervisorKeysError(
                f"{where}: supervisor must be 1-54 letters, digits, '.', '_' or '-'"
            )
        key = cls.public_key(entry["public_key"], where)
        retired = entry.get("retired_at")
        return SupervisorKey(
            kid, supervisor, key, None if retired is None else _moment(retired, where)
        )

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

    def get(self, kid: str) -> SupervisorKey | None:
        """The key ``kid`` as the file says now."""
        self._reload()
        return self._entries.get(kid)

    def entries(self) -> list[SupervisorKey]:
        self._reload()
        return list(self._entries.values())


TOKEN_TYPE = "pb-decision+jwt"
"""The header's ``typ``: a supervisor's decision (RFC 8725 explicit typing)."""
AUDIENCE = "punto-banco:dealing"
CLAIMS_VERSION = 1
ACTIONS = frozenset({"void", "correct", "correct-result"})
"""What a decision may decide: void a coup, correct a held studio coup's cards, or correct a
settled studio coup's result (the last two with the claim ``cards``)."""
CARD_ACTIONS = frozenset({"correct", "correct-result"})
"""The actions whose decisions carry the claim ``cards``."""

MAX_LIFETIME = timedelta(hours=1)
"""The longest a token may be valid (``exp - iat``): a token is made just before it is sent."""
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
_CARD = re.compile(r"(?:A|[2-9]|T|J|Q|K)[CDHS]")
_UUID = re.compile(r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}")
_EARLIEST, _LATEST = 946_684_800, 32_503_680_000  # 2000-01-01, 3000-01-01 (Unix seconds)


class _EdDSAOnly(jws.JWSRegistry):
    def get_alg(self, name: str) -> Any:  # no warning that RFC 9864 says Ed25519 now
        if name != ALGORITHM:
            raise UnsupportedAlgorithmError(f"{name!r}: a decision is signed with {ALGORITHM}")
        return self.algorithms[name]


JWS_REGISTRY = _EdDSAOnly()
"""joserfc's registry for decisions: EdDSA only."""


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
    cards: tuple[str, ...]  # a correction's (empty for a void)
    issued_at: datetime
    expires_at: datetime


def read_decision(token: str) -> tuple[Decision, jws.CompactSignature]:
    """The decision a token states and its JWS, NOT verified; ``AUTHORIZATION_MALFORMED``
    unless it is a well-formed token of this scheme."""
    if len(token) > MAX_AUTHORIZATION:
        raise _malformed(f"it has {len(token)} characters, more than {MAX_AUTHORIZATION}")
    try:
        signed = jws.extract_compact(token.encode("ascii"), registry=JWS_REGISTRY)
        header = _object(urlsafe_b64decode(signed.segments["header"]))  # duplicates refused
        claims = _object(signed.payload)
        urlsafe_b64decode(signed.segments["signature"])
    except (ValueError, JoseError) as error:
        raise _malformed(f"not a JWS in compact serialization ({error!r})") from None
    except RecursionError:  # [[[...]]]
        raise _malformed("its JSON is nested too deeply") from None
    if set(header) != _HEADER:
        raise _malformed(f"its header must have exactly {sorted(_HEADER)}")
    if header["alg"] != ALGORITHM or header["typ"] != TOKEN_TYPE:
        raise _malformed(f'its header must say "alg":"{ALGORITHM}","typ":"{TOKEN_TYPE}"')
    kid = header["kid"]
    if not isinstance(kid, str) or KEY_ID.fullmatch(kid) is None:
        raise _malformed("its kid is not a key id")
    action = claims.get("action")
    action = action if isinstance(action, str) else None  # a list or an object: `in` raises
    expected = _CLAIMS | ({"cards"} if action in CARD_ACTIONS else set())
    if set(claims) != expected:
        raise _malformed(f"its claims must be exactly {sorted(expected)}")
    if claims["ver"] != CLAIMS_VERSION or isinstance(claims["ver"], bool):
        raise _malformed(
            f"claims version {shown(claims['ver'])}: this dealing reads {CLAIMS_VERSION}"
        )
    if claims["aud"] != AUDIENCE:
        raise _malformed(f"its audience must be {AUDIENCE!r}")
    if action not in ACTIONS:
        raise _malformed(f"action {shown(claims['action'])} is not one of {sorted(ACTIONS)}")
    for name in ("iss", "sub"):
        if not isinstance(claims[name], str) or SUPERVISOR_ID.fullmatch(claims[name]) is None:
            raise _malformed(f"its {name} is not a supervisor id")
    for name in ("table_id", "coup_id"):
        if not isinstance(claims[name], str) or not 1 <= len(claims[name]) <= 128:
            raise _malformed(f"its {name} must be 1-128 characters")
    if not isinstance(claims["reason"], str) or len(claims["reason"]) > MAX_TEXT:
        raise _malformed(f"its reason must be text of at most {MAX_TEXT} characters")
    cards = claims.get("cards", [])
    if (
        not isinstance(cards, list)
        or not all(isinstance(card, str) and _CARD.fullmatch(card) for card in cards)
        or ("cards" in claims and not 4 <= len(cards) <= 6)
    ):
        raise _malformed("its cards must be the 4 to 6 card codes of a coup")
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
            cards=tuple(cards),
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
    if not jws.validate_compact(signed, OKPKey.import_key(key.public_key), registry=JWS_REGISTRY):
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
            f"key {key.kid!r} was retired at {_when(key.retired_at)}: sign with "
            f"{key.supervisor}'s current key",
        )
    if moment > decision.expires_at + LEEWAY:
        raise DecisionRefused(
            "AUTHORIZATION_EXPIRED",
            f"it expired at {_when(decision.expires_at)} (now {_when(moment)}): sign again",
        )
    if moment < decision.issued_at - LEEWAY:
        raise DecisionRefused(
            "AUTHORIZATION_EXPIRED",
            f"it is issued at {_when(decision.issued_at)}, later than now ({_when(moment)}): "
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
    cards: tuple[str, ...] = (),
) -> str | None:
    """Why the decision is not the one of this command (None: it is)."""
    wanted = {
        "jti": (decision.decision_id, command_id),
        "action": (decision.action, action),
        "table_id": (decision.table_id, table_id),
        "coup_id": (decision.coup_id, coup_id),
        "reason": (decision.reason, reason),
        "cards": (" ".join(decision.cards), " ".join(cards)),
    }
    for name, (signed, given) in wanted.items():
        if signed != given:
            return f"it signs {name} {shown(str(signed))}, the command says {shown(str(given))}"
    if supervisor_id is not None and supervisor_id != decision.supervisor_id:
        return (
            f"signed by {decision.supervisor_id!r}, the command names supervisor "
            f"{shown(str(supervisor_id))}"
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


def _when(moment: datetime | None) -> str:
    return "?" if moment is None else moment.astimezone(UTC).isoformat(timespec="seconds")
