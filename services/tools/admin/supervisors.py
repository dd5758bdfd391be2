"""``punto-banco supervisor``: supervisors' keys and the decisions they sign.

A supervisor's key is Ed25519 (its private half 0600, its public half in the keyring dealing
reads as ``<supervisor>-<n>``; a new key retires the supervisor's keys in use). A decision is
the JWT the runtime's ``security/decisions.py`` reads and verifies; :class:`SupervisorSigner`
makes the ``VoidCoup`` carrying one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar
from uuid import UUID, uuid4

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from joserfc import jwt
from joserfc.jwk import OKPKey

from contracts import CorrectCoup, CorrectResult, VoidCoup
from services.shared.platform.security import (
    ALGORITHM,
    AUDIENCE,
    CLAIMS_VERSION,
    JWS_REGISTRY,
    SUPERVISOR_ID,
    TOKEN_TYPE,
    KeysError,
    SupervisorKey,
    SupervisorKeyring,
    SupervisorKeysError,
    load_private_key,
    public_key_pem,
    replace_file,
)
from services.tools.admin.keys import next_kid, write_private

DEFAULT_LIFETIME = timedelta(minutes=5)
"""How long a token made by :func:`sign_decision` is valid unless told otherwise."""


def load_supervisor_key(path: Path) -> Ed25519PrivateKey:
    """A supervisor's private key (PEM); refused when group or others may read it."""
    try:
        return load_private_key(path)
    except KeysError as error:
        raise SupervisorKeysError(str(error).replace("signing key", "supervisor key")) from None


def find_key(keyring: SupervisorKeyring, public_key: Ed25519PublicKey) -> SupervisorKey | None:
    """The key of ``keyring`` whose public half is ``public_key`` (a private key file's own
    entry)."""
    for key in keyring.entries():
        if key.public_key == public_key:
            return key
    return None


def entry_json(keys: Iterable[SupervisorKey]) -> str:
    """The keyring file of ``keys`` (also what an operator adds to another keyring file)."""
    document: dict[str, dict[str, str]] = {}
    for key in sorted(keys, key=lambda key: key.kid):
        entry = {"supervisor": key.supervisor, "public_key": public_key_pem(key.public_key)}
        if key.retired_at is not None:
            entry["retired_at"] = key.retired_at.isoformat().replace("+00:00", "Z")
        document[key.kid] = entry
    return json.dumps(document, indent=2) + "\n"


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
    found = SupervisorKeyring.load(keyring_path).entries() if keyring_path.exists() else []
    keys = {key.kid: key for key in found}
    retired = [k.kid for k in found if k.supervisor == supervisor and k.retired_at is None]
    keys |= {kid: replace(keys[kid], retired_at=now) for kid in retired}
    private = Ed25519PrivateKey.generate()
    key = SupervisorKey(next_kid(keys, f"{supervisor}-"), supervisor, private.public_key())
    # The keyring first (as a service key's rotation): a key file is never left that no
    # keyring knows; if writing the key file fails, running keygen again makes another.
    replace_file(keyring_path, entry_json([*keys.values(), key]).encode("utf-8"), 0o644)
    write_private(key_path, private, exclusive=not key_path.exists())
    return key, retired


def ensure_supervisor_key(
    keyring_path: Path, key_path: Path, supervisor: str
) -> tuple[Ed25519PrivateKey, SupervisorKey]:
    """The supervisor's private key at ``key_path`` and its keyring entry, made (as by
    :func:`add_supervisor_key`) unless the file holds a key the keyring lists as the
    supervisor's and in use (idempotent: local runs, the tests' supervisor)."""
    if key_path.exists() and keyring_path.exists():
        private = load_supervisor_key(key_path)
        known = find_key(SupervisorKeyring.load(keyring_path), private.public_key())
        if known is not None and known.supervisor == supervisor and known.retired_at is None:
            return private, known
    key, _ = add_supervisor_key(keyring_path, key_path, supervisor)
    return load_supervisor_key(key_path), key


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
    cards: Sequence[str] = (),
    issued_at: datetime | None = None,
    lifetime: timedelta = DEFAULT_LIFETIME,
) -> str:
    """The token of a decision (``decision_id``: the ``event_id`` of the command carrying it;
    ``cards``: a correction's)."""
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
    if action != "void":  # a correction: of a held coup's cards, or of a settled result
        claims["cards"] = list(cards)
    return jwt.encode(
        header, claims, OKPKey.import_key(key), registry=JWS_REGISTRY, default_type=None
    )


Correction = TypeVar("Correction", CorrectCoup, CorrectResult)


@dataclass(frozen=True, slots=True)
class SupervisorSigner:
    """A supervisor's private key under its key id: makes signed ``VoidCoup``,
    ``CorrectCoup`` and ``CorrectResult`` commands."""

    kid: str
    supervisor_id: str
    key: Ed25519PrivateKey

    @classmethod
    def from_file(cls, key_path: Path, keyring: SupervisorKeyring) -> SupervisorSigner:
        """The signer of the private key in ``key_path``, as ``keyring`` lists it."""
        private = load_supervisor_key(key_path)
        entry = find_key(keyring, private.public_key())
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

    def correct(
        self,
        table_id: str,
        coup_id: str,
        cards: Sequence[str],
        reason: str = "",
        *,
        event_id: UUID | None = None,
        issued_at: datetime | None = None,
    ) -> CorrectCoup:
        """A ``CorrectCoup`` carrying this supervisor's decision that the coup's cards are
        ``cards`` (a held studio coup)."""
        return self._correction(
            CorrectCoup, "correct", table_id, coup_id, cards, reason, event_id, issued_at
        )

    def correct_result(
        self,
        table_id: str,
        coup_id: str,
        cards: Sequence[str],
        reason: str = "",
        *,
        event_id: UUID | None = None,
        issued_at: datetime | None = None,
    ) -> CorrectResult:
        """A ``CorrectResult`` carrying this supervisor's decision that the cards of the coup,
        resolved and settled, were ``cards`` (its device misread one)."""
        return self._correction(
            CorrectResult, "correct-result", table_id, coup_id, cards, reason, event_id, issued_at
        )

    def _correction(
        self,
        command: type[Correction],
        action: str,
        table_id: str,
        coup_id: str,
        cards: Sequence[str],
        reason: str,
        event_id: UUID | None,
        issued_at: datetime | None,
    ) -> Correction:
        command_id = event_id or uuid4()
        token = sign_decision(
            self.key,
            self.kid,
            supervisor_id=self.supervisor_id,
            decision_id=command_id,
            table_id=table_id,
            coup_id=coup_id,
            reason=reason,
            action=action,
            cards=cards,
            issued_at=issued_at,
        )
        return command(
            event_id=command_id,
            table_id=table_id,
            coup_id=coup_id,
            cards=list(cards),
            reason=reason,
            supervisor_id=self.supervisor_id,
            authorization=token,
        )
