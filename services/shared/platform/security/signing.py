"""Record signatures: who wrote a Kafka record, and where, checked by whoever reads it.

Scheme ``record-jws/v2``: a JWS (RFC 7515) with a detached, unencoded payload (RFC 7797),
EdDSA over Ed25519, in the record's ``pb-sig`` header as ``header..signature``. The payload is
the record's value; the protected header (compact JSON, keys sorted) binds the cluster, topic
(with its prefix), partition, key and relay position (``pb-pos``), so a genuine record copied
elsewhere does not verify. :func:`verify` takes a record only when its key id is in the
:class:`Keyring` as a key of the one service that may write it; v1 signatures only where
asked (the audit's seal anchors). Written by hand: a library JWS per record costs real CPU
(BENCHMARKS.md); docs/integrating.md verifies the same bytes with a few lines. ``cryptography``
loads and writes the keys; libsodium (PyNaCl) signs and checks: the same Ed25519 (RFC 8032), a
check in half the time of OpenSSL's (BENCHMARKS.md, "Record signatures").
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import logging
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Self, TypeVar

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from joserfc.util import urlsafe_b64encode as b64url  # RFC 4648 base64url without padding
from nacl.bindings import crypto_core_ed25519_is_valid_point
from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

log = logging.getLogger(__name__)

E = TypeVar("E")

ALGORITHM = "EdDSA"
"""JWS ``alg`` (RFC 8037): Ed25519 here."""

MAX_SIGNATURE_CHARS = 4096
"""A ``pb-sig`` value longer than this is refused unread (a real one is about 300 characters)."""

KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A key id: ``<service>-<n>`` when made by ``punto-banco keys``; at most 64 characters."""

SCHEME = "record-jws/v2"
"""The signature scheme, named in every header (``pb-scheme``)."""

_B64URL = re.compile(r"[A-Za-z0-9_-]*")
_MEMBERS_V1 = frozenset({"alg", "b64", "crit", "kid", "pb-key", "pb-pos", "pb-topic"})
_MEMBERS = _MEMBERS_V1 | {"pb-cluster", "pb-part", "pb-scheme"}
_RELOAD_EVERY = 1.0  # seconds: at most one look at a keyring file per second
HEADERS_KEPT = 4096
"""(where, key) pairs whose header a signer keeps built (about 500 B each), the least recently
used going first: memory stays bounded however many table ids records name."""


class KeyringError(ValueError):
    """A keyring that cannot be read or parsed; the message says which entry and why."""


def b64url_decode(text: str) -> bytes:
    """The bytes of a base64url text without padding; ValueError unless it is canonical."""
    if _B64URL.fullmatch(text) is None or len(text) % 4 == 1:
        raise ValueError("not base64url without padding")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if b64url(data).decode("ascii") != text:  # stray bits in the last character
        raise ValueError("not canonical base64url")
    return data


@dataclass(frozen=True, slots=True)
class Where:
    """Where a record is written, as Kafka names it: what a signature binds besides the
    record's key and relay position."""

    cluster: str  # the Kafka cluster's id ("" where there is none: in-memory tests)
    topic: str  # the topic's name, with the deployment's prefix (PB_TOPIC_PREFIX)
    partition: int


def protected_header(kid: str, where: Where, key: str, notification_id: int, index: int) -> bytes:
    """The JWS protected header of a record (compact JSON, keys sorted, ASCII)."""
    return json.dumps(
        {
            "alg": ALGORITHM,
            "b64": False,
            "crit": ["b64"],
            "kid": kid,
            "pb-cluster": where.cluster,
            "pb-key": key,
            "pb-part": where.partition,
            "pb-pos": f"{notification_id}:{index}",
            "pb-scheme": SCHEME,
            "pb-topic": where.topic,
        },
        sort_keys=True,
        separators=(",", ":"),
    ).encode("ascii")


class Signer:
    """Signs records with one Ed25519 private key known in the keyring as ``kid``."""

    def __init__(self, kid: str, service: str, private_key: Ed25519PrivateKey) -> None:
        if KEY_ID.fullmatch(kid) is None:
            raise ValueError(f"key id {kid!r} is not 1-64 letters, digits, '.', '_' or '-'")
        self.kid = kid
        self.service = service
        self._key = private_key
        self._sodium = SigningKey(private_key.private_bytes_raw())
        # The header of each (where, key), built once, the least recently used going first.
        self._halves = functools.lru_cache(maxsize=HEADERS_KEPT)(self._header_halves)

    @property
    def public_key(self) -> Ed25519PublicKey:
        return self._key.public_key()

    def _header_halves(self, where: Where, key: bytes) -> tuple[bytes, bytes]:
        """The header's bytes before and after the position (which is digits and a colon)."""
        whole = protected_header(self.kid, where, key.decode("utf-8"), 0, 0)
        before, after = whole.split(b'"pb-pos":"0:0"')
        return before + b'"pb-pos":"', b'"' + after

    def sign(
        self, where: Where, key: bytes, value: bytes, notification_id: int, index: int
    ) -> bytes:
        """The ``pb-sig`` header value of the record written ``where``."""
        before, after = self._halves(where, key)
        header = b64url(b"%s%d:%d%s" % (before, notification_id, index, after))
        signature = self._sodium.sign(header + b"." + value).signature
        return header + b".." + b64url(signature)


@dataclass(frozen=True, slots=True)
class KeyringEntry:
    kid: str
    service: str
    public_key: Ed25519PublicKey
    tables: frozenset[str] | None = None  # the only record keys (table ids) it signs; None: any
    verifier: VerifyKey = field(init=False, repr=False, compare=False)  # libsodium's, of the key

    def __post_init__(self) -> None:
        object.__setattr__(self, "verifier", VerifyKey(self.public_key.public_bytes_raw()))


def public_key_pem(key: Ed25519PublicKey) -> str:
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode("ascii")


class FileKeyring(Generic[E]):
    """Key id -> entry, parsed from a JSON file ``{"<key id>": {...}, ...}``. One loaded from
    its file can read it again when it changed (at most once a second, :meth:`_reload`; when it
    does is each keyring's, see its docstring), so a rotation needs no restart; a changed file
    that cannot be used is logged and the keys held are kept."""

    KIND: ClassVar[str]
    """What the file is, in messages."""
    ERROR: ClassVar[type[ValueError]]
    """What a file that cannot be read or parsed raises."""
    EMPTY_WHEN_GONE: ClassVar[bool] = False
    """Whether a file that was removed leaves the keyring empty (else: the keys held are kept)."""

    def __init__(self, entries: Mapping[str, E], path: Path | None = None) -> None:
        self._entries = dict(entries)
        self.path = path
        self._stamp = _stamp(path) if path is not None else None
        self._checked = time.monotonic()
        self._lock = threading.Lock()

    @classmethod
    def entry(cls, kid: str, entry: object, where: str) -> E:
        """The entry of ``kid`` from its JSON (``where`` it is, for error messages)."""
        raise NotImplementedError

    @classmethod
    def parse(cls, text: str, source: str = "", path: Path | None = None) -> Self:
        """A keyring from its JSON (``source``: what it is, for error messages)."""
        source = source or cls.KIND
        try:
            document = json.loads(text)
        except ValueError as problem:
            raise cls.ERROR(f"{source} is not JSON: {problem}") from None
        if not isinstance(document, dict):
            raise cls.ERROR(f"{source} must be a JSON object: key id -> entry")
        entries: dict[str, E] = {}
        for kid, entry in document.items():
            where = f"{source}, key {kid!r}"
            if KEY_ID.fullmatch(kid) is None:
                raise cls.ERROR(f"{where}: a key id is 1-64 letters, digits, '.', '_' or '-'")
            entries[kid] = cls.entry(kid, entry, where)
        return cls(entries, path)

    @classmethod
    def load(cls, path: Path) -> Self:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise cls.ERROR(f"cannot read the {cls.KIND} {path}: {error.strerror}") from None
        return cls.parse(text, f"{cls.KIND} {path}", path)

    @classmethod
    def public_key(cls, public: object, where: str) -> Ed25519PublicKey:
        """The ``public_key`` member of an entry: an Ed25519 public key in PEM
        (SubjectPublicKeyInfo), or base64 (or base64url) of its 32 raw bytes."""
        if not isinstance(public, str):
            raise cls.ERROR(f"{where}: 'public_key' must be PEM or base64 of 32 bytes")
        text = public.strip()
        try:
            if "-----BEGIN" in text:
                loaded = serialization.load_pem_public_key(text.encode("ascii"))
                if not isinstance(loaded, Ed25519PublicKey):
                    raise ValueError(f"a {type(loaded).__name__}, not an Ed25519 public key")
                key = loaded
            else:
                standard = text.rstrip("=").replace("-", "+").replace("_", "/")
                raw = base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
                if len(raw) != 32:
                    raise ValueError(f"{len(raw)} bytes, an Ed25519 public key has 32")
                key = Ed25519PublicKey.from_public_bytes(raw)
        except (ValueError, TypeError, binascii.Error) as error:
            raise cls.ERROR(f"{where}: public_key is not an Ed25519 key ({error})") from None
        if not crypto_core_ed25519_is_valid_point(key.public_bytes_raw()):
            raise cls.ERROR(  # no key pair has one; signatures "by" it can be forged
                f"{where}: public_key is not an Ed25519 key of the curve's prime-order "
                "subgroup (a small-order or non-canonical point)"
            )
        return key

    def _reload(self) -> bool:
        """Read the file again if it changed (at most once a second); True if it was."""
        path = self.path
        if path is None:
            return False
        with self._lock:
            now = time.monotonic()
            if now - self._checked < _RELOAD_EVERY:
                return False
            self._checked = now
            stamp = _stamp(path)
            if stamp == self._stamp:
                return False
            try:
                gone = stamp is None and self.EMPTY_WHEN_GONE
                self._entries = {} if gone else type(self).load(path)._entries
            except self.ERROR as error:
                log.error("%s changed but is unusable (%s): the keys held are kept", path, error)
                return False
            self._stamp = stamp
            log.warning("%s %s read again: %d keys", self.KIND, path, len(self._entries))
            return True


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size, status.st_ino


class Keyring(FileKeyring[KeyringEntry]):
    """Key id -> (service, public key): whose records a key signs. One loaded from its file
    reads it again on meeting an unknown key id (:class:`FileKeyring`)."""

    KIND = "keyring"
    ERROR = KeyringError

    @classmethod
    def entry(cls, kid: str, entry: object, where: str) -> KeyringEntry:
        """``{"service": ..., "public_key": ...}``, and ``"tables": [...]`` for a key that
        signs the records of these tables only (a studio table's device bridge)."""
        if not isinstance(entry, dict):
            raise KeyringError(f"{where}: must be an object with service and public_key")
        service = entry.get("service")
        if not isinstance(service, str) or not service:
            raise KeyringError(f"{where}: 'service' must name the service holding the key")
        tables = entry.get("tables")
        if tables is not None and (
            not isinstance(tables, list)
            or not tables
            or not all(isinstance(table, str) and table for table in tables)
        ):
            raise KeyringError(f"{where}: 'tables' must list the table ids the key signs for")
        public_key = cls.public_key(entry.get("public_key"), where)
        return KeyringEntry(kid, service, public_key, None if tables is None else frozenset(tables))

    def entries(self) -> list[KeyringEntry]:
        return list(self._entries.values())

    def get(self, kid: str) -> KeyringEntry | None:
        """The entry of ``kid``; an unknown id makes a file-backed keyring look at its file."""
        entry = self._entries.get(kid)
        if entry is None and self._reload():
            entry = self._entries.get(kid)
        return entry

    def find(self, service: str, public_key: Ed25519PublicKey) -> KeyringEntry | None:
        """The entry of ``service`` holding ``public_key`` (a signer's own key id)."""
        for entry in self._entries.values():
            if entry.service == service and entry.public_key == public_key:
                return entry
        return None


def verify(
    keyring: Keyring,
    signer: str,
    where: Where,
    key: bytes | None,
    value: bytes | None,
    notification_id: int,
    index: int,
    header: bytes | None,
    *,
    v1_topic: str | None = None,
) -> str | None:
    """None when ``header`` (a ``pb-sig`` value) is ``signer``'s signature of this record
    (its place, ``key``, ``value``, relay position); else why not, in a few words."""
    if header is None:
        return f"no pb-sig header (only {signer} publishes this, and signs what it publishes)"
    if len(header) > MAX_SIGNATURE_CHARS:
        return f"malformed: pb-sig has {len(header)} bytes, more than {MAX_SIGNATURE_CHARS}"
    try:
        text = header.decode("ascii")
        encoded, payload, signature_text = text.split(".")
        if payload:
            return "malformed: pb-sig carries a payload; it must be detached (header..signature)"
        protected = b64url_decode(encoded)
        signature = b64url_decode(signature_text)
        fields = json.loads(protected, object_pairs_hook=unique_members)
    except (UnicodeDecodeError, ValueError) as error:
        return f"malformed: pb-sig is not a JWS header..signature ({error})"
    except RecursionError:  # [[[...]]]: raised again by every reading of the record
        return "malformed: pb-sig's protected header is nested too deeply"
    first = isinstance(fields, dict) and set(fields) == _MEMBERS_V1
    if first and v1_topic is None:
        return (
            "signed with the first scheme (v1), which binds no partition, prefix or cluster: "
            f"refused (a reader takes {SCHEME} only; docs/security.md, Upgrading)"
        )
    if not first and (not isinstance(fields, dict) or set(fields) != _MEMBERS):
        return f"malformed: the protected header must have exactly {sorted(_MEMBERS)}"
    if fields["alg"] != ALGORITHM or fields["b64"] is not False or fields["crit"] != ["b64"]:
        return 'malformed: the header must say "alg":"EdDSA","b64":false,"crit":["b64"]'
    if not first and fields["pb-scheme"] != SCHEME:
        return f"malformed: pb-scheme is {shown(fields['pb-scheme'])}, not {SCHEME!r}"
    kid = fields["kid"]
    if not isinstance(kid, str) or KEY_ID.fullmatch(kid) is None:
        return "malformed: kid is not a key id"
    entry = keyring.get(kid)
    if entry is None:
        return f"unknown key id {kid!r} (not in the keyring)"
    if entry.service != signer:
        return f"key {kid!r} belongs to {entry.service}, but only {signer} writes here"
    topic = v1_topic if first else where.topic
    if fields["pb-topic"] != topic:
        return f"signed for topic {shown(fields['pb-topic'])}, not {topic}"
    if not first and fields["pb-cluster"] != where.cluster:
        return f"signed for cluster {shown(fields['pb-cluster'])}, not {where.cluster!r}"
    part = fields.get("pb-part")
    if not first and (type(part) is not int or part != where.partition):
        return f"signed for partition {shown(part)}, not {where.partition}"
    try:
        key_text = "" if key is None else key.decode("utf-8")
    except UnicodeDecodeError:
        return "the record key is not UTF-8 (a signed record's key is its table id)"
    if fields["pb-key"] != key_text:
        return f"signed for key {shown(fields['pb-key'])}, not {shown(key_text)}"
    if entry.tables is not None and key_text not in entry.tables:
        return f"key {kid!r} signs for tables {sorted(entry.tables)} only, not {shown(key_text)}"
    position = f"{notification_id}:{index}"
    if fields["pb-pos"] != position:
        return f"signed for position {shown(fields['pb-pos'])}, not {position}"
    if value is None:
        return "the record has no value"
    try:
        entry.verifier.verify(encoded.encode("ascii") + b"." + value, signature)
    except (BadSignatureError, ValueError):  # ValueError: not 64 bytes
        return f"bad signature (key {kid!r}): the value or header was changed, or forged"
    return None


def unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's members, refused (ValueError) when one appears twice."""
    found: dict[str, Any] = {}
    for name, item in pairs:
        if name in found:
            raise ValueError(f"member {name!r} appears twice")
        found[name] = item
    return found


def shown(item: object, limit: int = 80) -> str:
    """``repr(item)``, cut to ``limit`` characters (it may quote untrusted input)."""
    text = repr(item)
    return text if len(text) <= limit else text[:limit] + "..."
