"""Record signatures (platform/security/signing.py): a detached, unencoded JWS (RFC 7515
Appendix F, RFC 7797) with EdDSA over Ed25519 (RFC 8037), byte-stable, and refused when
anything it binds was changed."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from joserfc import jws
from joserfc.errors import BadSignatureError
from joserfc.jwk import OKPKey

from services.shared.platform.security.signing import (
    SCHEME,
    Keyring,
    KeyringEntry,
    KeyringError,
    Signer,
    Where,
    b64url,
    b64url_decode,
    protected_header,
    public_key_pem,
    verify,
)
from services.tools.admin.keys import keyring_json, with_entry

RFC8032_SECRET = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
"""RFC 8032 section 7.1, TEST 1 (also RFC 8037 appendix A.1's key)."""
KEY = Ed25519PrivateKey.from_private_bytes(RFC8032_SECRET)
SIGNER = Signer("dealing-1", "dealing", KEY)
KEYRING = Keyring({"dealing-1": KeyringEntry("dealing-1", "dealing", KEY.public_key())})

TOPIC, RECORD_KEY, VALUE = "punto-banco.table-events", b"table-1", b'{"type":"TableClosed"}'
WHERE = Where("cluster-A", "acme." + TOPIC, 2)
"""Partition 2 of table-events under the prefix ``acme.``, on the cluster ``cluster-A``."""
VECTOR = (
    "eyJhbGciOiJFZERTQSIsImI2NCI6ZmFsc2UsImNyaXQiOlsiYjY0Il0sImtpZCI6ImRlYWxpbmctMSIsInBiLWNsdXN0ZX"
    "IiOiJjbHVzdGVyLUEiLCJwYi1rZXkiOiJ0YWJsZS0xIiwicGItcGFydCI6MiwicGItcG9zIjoiNDI6MyIsInBiLXNjaGVt"
    "ZSI6InJlY29yZC1qd3MvdjIiLCJwYi10b3BpYyI6ImFjbWUucHVudG8tYmFuY28udGFibGUtZXZlbnRzIn0..jI7jeeUtU"
    "ex0Rb11CqFs2i7WRAfZqBCY7z2c6WyK9_ETe9DR6mO_liuVDCPWwLpwkLZO5eDUMAXSe-SPDIlCAg"
)
"""pb-sig of VALUE at WHERE, key table-1, notification 42 message 3, by the RFC 8032 key as
dealing-1 (scheme record-jws/v2). Checked once with joserfc 1.6.5 (an independent JOSE library)
as an RFC 7797 detached unencoded JWS, its pb-* members registered."""
V1_VECTOR = (
    "eyJhbGciOiJFZERTQSIsImI2NCI6ZmFsc2UsImNyaXQiOlsiYjY0Il0sImtpZCI6ImRlYWxpbmctMSIsInBiLWtleSI6"
    "InRhYmxlLTEiLCJwYi1wb3MiOiI0MjozIiwicGItdG9waWMiOiJwdW50by1iYW5jby50YWJsZS1ldmVudHMifQ.."
    "s79Kavr2oSqHDCGXZzO_Gy5s8jSBj-kJunljkV2RiiniymOTmcA7vAQbBcJqcswEzAIVLO-EnPL_QDoTtDidBA"
)
"""The same record signed with the first scheme (v1: the logical topic, no partition, prefix or
cluster), as relays wrote it before record-jws/v2."""


def check(header: bytes | None, **record: object) -> str | None:
    fields: dict[str, object] = {
        "signer": "dealing",
        "where": WHERE,
        "key": RECORD_KEY,
        "value": VALUE,
        "notification_id": 42,
        "index": 3,
    }
    fields.update(record)
    return verify(KEYRING, header=header, **fields)  # type: ignore[arg-type]


def test_ed25519_here_is_rfc_8037_eddsa() -> None:
    """RFC 8037 appendix A.4: the JWS of "Example of Ed25519 signing" with {"alg":"EdDSA"}."""
    signing_input = b64url(b'{"alg":"EdDSA"}') + b"." + b64url(b"Example of Ed25519 signing")
    assert b64url(KEY.sign(signing_input)) == (
        b"hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"
    )
    assert KEY.public_key().public_bytes_raw().hex() == (
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    )


@pytest.mark.filterwarnings("ignore:EdDSA is deprecated")  # RFC 9864's name is Ed25519
def test_joserfc_verifies_a_record_signature_as_a_detached_unencoded_jws() -> None:
    """signing.py stays hand-written (BENCHMARKS.md, "Record signatures"): an independent JOSE
    library reads its pb-sig as RFC 7515 appendix F with RFC 7797 and checks it over the value."""
    registry = jws.JWSRegistry(algorithms=["EdDSA"], strict_check_header=False)  # pb-* members
    public = OKPKey.import_key(KEY.public_key())
    for value, pb_sig in ((VALUE, VECTOR), (b"[]", SIGNER.sign(WHERE, RECORD_KEY, b"[]", 7, 0))):
        signed = jws.deserialize_compact(pb_sig, public, registry=registry, payload=value)
        assert signed.payload == value and signed.protected["b64"] is False
        with pytest.raises(BadSignatureError):
            jws.deserialize_compact(pb_sig, public, registry=registry, payload=value + b"!")


def test_a_signature_with_a_fixed_key_is_byte_stable() -> None:
    assert SIGNER.sign(WHERE, RECORD_KEY, VALUE, 42, 3).decode() == VECTOR
    assert SIGNER.sign(WHERE, RECORD_KEY, VALUE, 42, 3).decode() == VECTOR  # cached halves


def test_the_header_is_the_protected_header_and_the_payload_is_detached_and_unencoded() -> None:
    encoded, payload, signature = VECTOR.split(".")
    assert payload == ""
    header = b64url_decode(encoded)
    assert header == protected_header("dealing-1", WHERE, "table-1", 42, 3)
    assert json.loads(header) == {
        "alg": "EdDSA",
        "b64": False,
        "crit": ["b64"],
        "kid": "dealing-1",
        "pb-cluster": "cluster-A",
        "pb-key": "table-1",
        "pb-part": 2,
        "pb-pos": "42:3",
        "pb-scheme": "record-jws/v2",
        "pb-topic": "acme.punto-banco.table-events",
    }
    # RFC 7797: the signing input is the encoded header, ".", and the value as it is.
    KEY.public_key().verify(b64url_decode(signature), encoded.encode() + b"." + VALUE)


def test_the_fast_header_equals_the_canonical_json_for_any_key_and_position() -> None:
    for key, notification, index in [(b"t", 1, 0), ('tàble "x"'.encode(), 10**14, 2**20 - 1)]:
        encoded = SIGNER.sign(WHERE, key, VALUE, notification, index).split(b"..")[0]
        expected = protected_header("dealing-1", WHERE, key.decode(), notification, index)
        assert b64url_decode(encoded.decode()) == expected


def test_the_genuine_record_verifies() -> None:
    assert check(VECTOR.encode()) is None


def _reheader(**changes: object) -> bytes:
    """VECTOR's header with ``changes`` (None removes a member), signed again by the key."""
    fields = json.loads(b64url_decode(VECTOR.split(".")[0]))
    for name, item in changes.items():
        if item is None:
            fields.pop(name.replace("_", "-"))
        else:
            fields[name.replace("_", "-")] = item
    encoded = b64url(json.dumps(fields, separators=(",", ":")).encode())
    return encoded + b".." + b64url(KEY.sign(encoded + b"." + VALUE))


@pytest.mark.parametrize(
    ("record", "header", "reason"),
    [
        ({"value": VALUE + b" "}, VECTOR, "bad signature"),
        ({"value": None}, VECTOR, "no value"),
        ({"key": b"table-2"}, VECTOR, "signed for key 'table-1', not 'table-2'"),
        ({"key": None}, VECTOR, "signed for key 'table-1', not ''"),
        ({"key": b"\xff"}, VECTOR, "not UTF-8"),
        ({"where": Where("cluster-A", "acme.punto-banco.shoe-events", 2)}, VECTOR, "for topic"),
        ({"where": Where("cluster-A", TOPIC, 2)}, VECTOR, "signed for topic"),  # no prefix
        ({"where": Where("cluster-A", "other." + TOPIC, 2)}, VECTOR, "signed for topic"),
        ({"where": Where("cluster-B", WHERE.topic, 2)}, VECTOR, "signed for cluster"),
        ({"where": Where("cluster-A", WHERE.topic, 1)}, VECTOR, "signed for partition 2, not 1"),
        ({"notification_id": 43}, VECTOR, "signed for position '42:3', not 43:3"),
        ({"index": 0}, VECTOR, "signed for position '42:3', not 42:0"),
        ({"signer": "shoe"}, VECTOR, "key 'dealing-1' belongs to dealing, but only shoe"),
        ({}, None, "no pb-sig header"),
        ({}, VECTOR.replace("..", ".e30."), "carries a payload"),
        ({}, VECTOR + "=", "not a JWS"),  # padding
        ({}, VECTOR[:-1] + "B", "not a JWS"),  # stray bits: not canonical base64url
        ({}, VECTOR[:-2], "bad signature"),  # truncated: 63 bytes
        ({}, VECTOR + ".x", "not a JWS"),  # four parts
        ({}, "é" + VECTOR, "not a JWS"),
        ({}, "a" * 5000, "more than 4096"),
        ({}, _reheader(kid="dealing-2"), "unknown key id 'dealing-2'"),
        ({}, _reheader(kid=7), "kid is not a key id"),
        ({}, _reheader(alg="none"), '"alg":"EdDSA"'),
        ({}, _reheader(alg="Ed25519"), '"alg":"EdDSA"'),
        ({}, _reheader(b64=True), '"b64":false'),
        ({}, _reheader(crit=None), "exactly"),
        ({}, _reheader(crit=["b64", "exp"]), '"crit":["b64"]'),
        ({}, _reheader(exp=1), "exactly"),
        ({}, _reheader(pb_pos="42:03"), "signed for position '42:03'"),
        ({}, _reheader(pb_key=["table-1"]), "signed for key"),
        ({"where": Where("cluster-A", WHERE.topic, 1)}, _reheader(pb_part=True), "partition"),
        ({}, _reheader(pb_part=2.0), "signed for partition"),
        ({}, _reheader(pb_part="2"), "signed for partition"),
        ({}, _reheader(pb_scheme="record-jws/v3"), "pb-scheme"),
        ({}, _reheader(pb_scheme=None), "exactly"),
        ({}, _reheader(pb_cluster=None), "exactly"),
        ({}, V1_VECTOR, "first scheme (v1)"),
    ],
)
def test_every_change_is_refused(record: dict[str, object], header: object, reason: str) -> None:
    raw = header.encode() if isinstance(header, str) else header
    why = check(raw if isinstance(raw, bytes | None) else None, **record)
    assert why is not None and reason in why, why


def test_a_record_of_the_first_scheme_verifies_only_where_v1_is_accepted() -> None:
    """v1 bound the logical topic, key and position only: a consumer refuses it (a copy to
    another partition, prefix or cluster would verify), the audit's anchors still take it."""
    v1 = V1_VECTOR.encode()
    assert check(v1, v1_topic=TOPIC) is None
    assert "signed for topic" in str(check(v1, v1_topic="punto-banco.shoe-events"))
    assert "bad signature" in str(check(v1, v1_topic=TOPIC, value=VALUE + b" "))
    assert check(VECTOR.encode(), v1_topic=TOPIC) is None  # v2 is always taken
    assert SCHEME == "record-jws/v2"


def test_a_header_with_a_member_twice_is_refused() -> None:
    header = protected_header("dealing-1", WHERE, "table-1", 42, 3)
    doubled = header[:-1] + b',"kid":"dealing-1"}'
    encoded = b64url(doubled)
    why = check(encoded + b".." + b64url(KEY.sign(encoded + b"." + VALUE)))
    assert why is not None and "appears twice" in why


IDENTITY = bytes([1]) + bytes(31)
"""The encoding of the curve's neutral point (order 1): a small-order "public key"."""
ORDER = 2**252 + 27742317777372353535851937790883648493
"""L, the order of the curve's prime-order subgroup (RFC 8032)."""


def test_a_signature_anyone_could_forge_is_refused() -> None:
    """R = the neutral point and S = 0 satisfy the verification equation for a small-order key
    whatever is signed: such a key never reaches a keyring (below), and a signature by it is
    refused even if one did (OpenSSL took it; libsodium refuses small-order keys and R)."""
    neutral = Ed25519PublicKey.from_public_bytes(IDENTITY)
    keyring = Keyring({"dealing-1": KeyringEntry("dealing-1", "dealing", neutral)})
    encoded = b64url(protected_header("dealing-1", WHERE, "table-1", 42, 3))
    forged = encoded + b".." + b64url(IDENTITY + bytes(32))
    why = verify(keyring, "dealing", WHERE, RECORD_KEY, VALUE, 42, 3, forged)
    assert why is not None and "bad signature" in why


@pytest.mark.parametrize(
    "signature",
    [
        b"",  # no signature
        bytes(65),  # a byte too many
        b"\xff" * 2000,
    ],
)
def test_a_signature_of_the_wrong_length_is_refused_not_raised(signature: bytes) -> None:
    encoded = VECTOR.split("..")[0].encode()
    why = check(encoded + b".." + b64url(signature))
    assert why is not None and "bad signature" in why


def test_a_signature_whose_s_is_not_reduced_is_refused() -> None:
    """S + L verifies the same equation as S: a second valid-looking signature of one record
    (malleability), refused as RFC 8032 asks (S < L)."""
    encoded, signature_text = VECTOR.split("..")
    signature = b64url_decode(signature_text)
    s = int.from_bytes(signature[32:], "little") + ORDER
    assert s < 2**256
    twin = signature[:32] + s.to_bytes(32, "little")
    assert check(VECTOR.encode()) is None
    why = check(encoded.encode() + b".." + b64url(twin))
    assert why is not None and "bad signature" in why


@pytest.mark.parametrize("raw", [IDENTITY, bytes(32)], ids=["neutral point", "all zero"])
def test_a_keyring_refuses_a_small_order_key(raw: bytes) -> None:
    text = json.dumps({"k": {"service": "x", "public_key": b64url(raw).decode()}})
    with pytest.raises(KeyringError, match="prime-order subgroup"):
        Keyring.parse(text)


# ---- keyrings and rotation ---------------------------------------------------------------


def test_every_key_of_a_service_verifies_after_a_rotation() -> None:
    second = Signer("dealing-2", "dealing", Ed25519PrivateKey.generate())
    keyring = with_entry(KEYRING, KeyringEntry("dealing-2", "dealing", second.public_key))
    old = SIGNER.sign(WHERE, RECORD_KEY, VALUE, 42, 3)
    new = second.sign(WHERE, RECORD_KEY, VALUE, 42, 3)
    assert old != new
    for header in (old, new):
        assert verify(keyring, "dealing", WHERE, RECORD_KEY, VALUE, 42, 3, header) is None
    assert keyring.find("dealing", second.public_key) == keyring.get("dealing-2")
    assert keyring.find("shoe", second.public_key) is None
    assert "unknown key id 'dealing-2'" in str(
        verify(KEYRING, "dealing", WHERE, RECORD_KEY, VALUE, 42, 3, new)
    )


def test_a_keyring_reads_pem_and_raw_base64_and_writes_pem() -> None:
    raw = KEY.public_key().public_bytes_raw()
    text = json.dumps(
        {
            "dealing-1": {"service": "dealing", "public_key": public_key_pem(KEY.public_key())},
            "dealing-2": {"service": "dealing", "public_key": base64.b64encode(raw).decode()},
            "dealing-3": {"service": "dealing", "public_key": b64url(raw).decode()},
        }
    )
    keyring = Keyring.parse(text)
    assert [e.public_key.public_bytes_raw() for e in keyring.entries()] == [raw] * 3
    again = Keyring.parse(keyring_json(keyring))
    assert [(e.kid, e.service, e.public_key.public_bytes_raw()) for e in again.entries()] == [
        (e.kid, e.service, e.public_key.public_bytes_raw()) for e in keyring.entries()
    ]


def test_a_key_scoped_to_tables_signs_their_records_only_and_keeps_its_scope_in_the_file() -> None:
    scoped = Keyring(
        {"dealing-1": KeyringEntry("dealing-1", "dealing", KEY.public_key(), frozenset({"t1"}))}
    )
    other = SIGNER.sign(WHERE, RECORD_KEY, VALUE, 42, 3)  # table-1
    assert verify(scoped, "dealing", WHERE, RECORD_KEY, VALUE, 42, 3, other) == (
        "key 'dealing-1' signs for tables ['t1'] only, not 'table-1'"
    )
    own = SIGNER.sign(WHERE, b"t1", VALUE, 42, 3)
    assert verify(scoped, "dealing", WHERE, b"t1", VALUE, 42, 3, own) is None
    again = Keyring.parse(keyring_json(scoped))
    assert [e.tables for e in again.entries()] == [frozenset({"t1"})]
    assert '"tables"' not in keyring_json(KEYRING)  # an unscoped key's entry as before


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[]", "must be a JSON object"),
        ("{", "not JSON"),
        ('{"a b": {"service": "x", "public_key": "AA"}}', "a key id is"),
        ('{"k": "x"}', "must be an object"),
        ('{"k": {"public_key": "AA"}}', "'service'"),
        ('{"k": {"service": "x"}}', "'public_key'"),
        ('{"k": {"service": "x", "public_key": "AAAA"}}', "3 bytes"),
        ('{"k": {"service": "x", "public_key": "-----BEGIN PUBLIC KEY-----"}}', "not an Ed25519"),
        ('{"k": {"service": "x", "public_key": "AA", "tables": []}}', "'tables' must list"),
        ('{"k": {"service": "x", "public_key": "AA", "tables": "t1"}}', "'tables' must list"),
        ('{"k": {"service": "x", "public_key": "AA", "tables": [""]}}', "'tables' must list"),
    ],
)
def test_a_bad_keyring_says_what_is_wrong(text: str, reason: str) -> None:
    with pytest.raises(KeyringError) as raised:
        Keyring.parse(text)
    assert reason in str(raised.value)


def test_a_signer_keeps_the_headers_of_a_bounded_number_of_table_ids() -> None:
    """A header is built once per (where, key) and kept, the least recently used going beyond 4,096
    (``signing.HEADERS_KEPT``): a flood of table ids costs no memory beyond that, and one
    built again signs the same."""
    signer = Signer("dealing-1", "dealing", KEY)
    first = signer.sign(WHERE, RECORD_KEY, VALUE, 42, 3)
    for n in range(5000):
        signer.sign(WHERE, f"table-{n}".encode(), VALUE, 1, 0)
    assert signer._halves.cache_info().currsize == 4096
    assert signer.sign(WHERE, RECORD_KEY, VALUE, 42, 3) == first
