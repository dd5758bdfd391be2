"""Supervisors' decisions: a JWT (RFC 7519) as a compact JWS (RFC 7515) with EdDSA (RFC 8037).

The token is checked by hand here (not through the module's own reader): header, claims and
the signature over ``BASE64URL(header) "." BASE64URL(claims)``; the RFC 8037 example is
reproduced with the same base64url. Then the reader's strictness, each refusal code, and the
supervisors keyring file (parsing, rotation, retirement, the private key's mode).
"""

from __future__ import annotations

import base64
import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, get_args
from uuid import uuid4

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.testing import CliRunner

from contracts import CommandRejectionCode
from services.shared.platform.security import (
    SupervisorKey,
    SupervisorKeyring,
    SupervisorKeysError,
)
from services.shared.platform.security.decisions import (
    AUDIENCE,
    LEEWAY,
    DecisionRefused,
    RefusalCode,
    authenticate,
    check_time,
    read_decision,
)
from services.shared.platform.security.signing import b64url
from services.tools.admin.supervisors import (
    SupervisorSigner,
    add_supervisor_key,
    ensure_supervisor_key,
    entry_json,
    find_key,
    sign_decision,
)
from services.tools.cli.main import app

KEY = Ed25519PrivateKey.generate()
SIGNER = SupervisorSigner("sup-3-1", "sup-3", KEY)
RING = SupervisorKeyring({"sup-3-1": SupervisorKey("sup-3-1", "sup-3", KEY.public_key())})


def _decode(part: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def _encode(document: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(document).encode()).rstrip(b"=").decode()


def _token(header: dict[str, Any], claims: dict[str, Any], key: Ed25519PrivateKey = KEY) -> str:
    signing_input = f"{_encode(header)}.{_encode(claims)}"
    signature = base64.urlsafe_b64encode(key.sign(signing_input.encode())).rstrip(b"=").decode()
    return f"{signing_input}.{signature}"


def test_the_rfc_8037_example_is_reproduced_with_our_base64url() -> None:
    """RFC 8037 appendix A.4: Ed25519 over ``{"alg":"EdDSA"}`` and "Example of Ed25519 signing"."""
    d = base64.urlsafe_b64decode("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A=")
    key = Ed25519PrivateKey.from_private_bytes(d)
    signing_input = b64url(b'{"alg":"EdDSA"}') + b"." + b64url(b"Example of Ed25519 signing")
    assert signing_input == b"eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc"
    assert b64url(key.sign(signing_input)) == (
        b"hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"
    )


def test_a_void_carries_a_compact_jws_jwt_that_binds_the_command() -> None:
    void = SIGNER.void("t1", "t1.coup-5", "dealer exposed a card")
    assert void.authorization is not None
    header_part, claims_part, signature_part = void.authorization.split(".")
    assert _decode(header_part) == {"alg": "EdDSA", "kid": "sup-3-1", "typ": "pb-decision+jwt"}
    claims = _decode(claims_part)
    assert claims["exp"] - claims["iat"] == 300
    assert {k: v for k, v in claims.items() if k not in ("iat", "exp")} == {
        "action": "void",
        "aud": AUDIENCE,
        "coup_id": "t1.coup-5",
        "iss": "sup-3",
        "jti": str(void.event_id),
        "reason": "dealer exposed a card",
        "sub": "sup-3",
        "table_id": "t1",
        "ver": 1,
    }
    signature = base64.urlsafe_b64decode(signature_part + "=" * (-len(signature_part) % 4))
    KEY.public_key().verify(signature, f"{header_part}.{claims_part}".encode())  # no exception
    assert void.supervisor_id == "sup-3"


def test_a_result_correction_signs_its_cards() -> None:
    command = SIGNER.correct_result("t1", "t1.coup-5", CARDS, "the video shows the TH")
    assert command.authorization is not None
    decision, _ = authenticate(RING, command.authorization)
    assert (decision.action, decision.cards) == ("correct-result", tuple(CARDS))
    assert (decision.decision_id, decision.reason) == (command.event_id, "the video shows the TH")
    assert command.cards == CARDS and command.type == "CorrectResult"


def test_every_refusal_is_a_command_rejection_code() -> None:
    assert set(get_args(RefusalCode)) <= set(get_args(CommandRejectionCode))


def _claims(**changes: Any) -> dict[str, Any]:
    now = int(datetime.now(UTC).timestamp())
    claims = {
        "action": "void",
        "aud": AUDIENCE,
        "coup_id": "c1",
        "exp": now + 300,
        "iat": now,
        "iss": "sup-3",
        "jti": str(uuid4()),
        "reason": "",
        "sub": "sup-3",
        "table_id": "t1",
        "ver": 1,
    }
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not ...}


HEADER = {"alg": "EdDSA", "kid": "sup-3-1", "typ": "pb-decision+jwt"}
CARDS = ["9S", "2D", "TH", "3C"]


@pytest.mark.parametrize(
    ("token", "code"),
    [
        (_token(HEADER, _claims()), None),
        (_token({**HEADER, "alg": "none"}, _claims()), "AUTHORIZATION_MALFORMED"),
        (_token({**HEADER, "typ": "JWT"}, _claims()), "AUTHORIZATION_MALFORMED"),
        (_token({**HEADER, "crit": ["exp"]}, _claims()), "AUTHORIZATION_MALFORMED"),
        (_token(HEADER, _claims(extra=1)), "AUTHORIZATION_MALFORMED"),
        (_token(HEADER, _claims(reason=...)), "AUTHORIZATION_MALFORMED"),
        (_token(HEADER, _claims(ver=2)), "AUTHORIZATION_MALFORMED"),
        (_token(HEADER, _claims(ver=True)), "AUTHORIZATION_MALFORMED"),
        (_token(HEADER, _claims(aud="someone-else")), "AUTHORIZATION_MALFORMED"),
        (_token(HEADER, _claims(action="pay")), "AUTHORIZATION_MALFORMED"),
        (_token(HEADER, _claims(action="correct-result", cards=CARDS)), None),
        (_token(HEADER, _claims(action="correct-result")), "AUTHORIZATION_MALFORMED"),  # no cards
        (
            _token(HEADER, _claims(action="correct-result", cards=CARDS[:3])),
            "AUTHORIZATION_MALFORMED",
        ),
        (_token(HEADER, _claims(cards=CARDS)), "AUTHORIZATION_MALFORMED"),  # a void has none
        (_token(HEADER, _claims(jti="not-a-uuid")), "AUTHORIZATION_MALFORMED"),
        (_token(HEADER, _claims(jti=str(uuid4()).upper())), "AUTHORIZATION_MALFORMED"),
        (_token(HEADER, _claims(iat=1.5)), "AUTHORIZATION_MALFORMED"),
        (_token(HEADER, _claims(exp=0)), "AUTHORIZATION_MALFORMED"),
        (_token(HEADER, _claims(reason="x" * 1001)), "AUTHORIZATION_MALFORMED"),
        (_token(HEADER, _claims(iss="sup-4")), "AUTHORIZATION_MISMATCH"),
        (_token(HEADER, _claims(iss="sup-4", sub="sup-4")), "AUTHORIZATION_MISMATCH"),
        (_token({**HEADER, "kid": "sup-9-1"}, _claims()), "UNKNOWN_SUPERVISOR_KEY"),
        (_token(HEADER, _claims(), Ed25519PrivateKey.generate()), "BAD_SIGNATURE"),
        ("e30.e30.e30", "AUTHORIZATION_MALFORMED"),
        ("a.b", "AUTHORIZATION_MALFORMED"),
        ("x" * 20_000, "AUTHORIZATION_MALFORMED"),
    ],
)
def test_authenticate_accepts_only_a_well_formed_token_signed_by_its_holder(
    token: str, code: str | None
) -> None:
    if code is None:
        decision, key = authenticate(RING, token)
        assert (decision.supervisor_id, key.kid) == ("sup-3", "sup-3-1")
        return
    with pytest.raises(DecisionRefused) as refused:
        authenticate(RING, token)
    assert refused.value.code == code, refused.value.message


def test_duplicate_members_and_padded_base64_are_malformed() -> None:
    header = base64.urlsafe_b64encode(
        b'{"alg":"EdDSA","alg":"EdDSA","kid":"sup-3-1","typ":"pb-decision+jwt"}'
    ).rstrip(b"=")
    good = _token(HEADER, _claims())
    duplicate = header.decode() + good[good.index(".") :]
    padded = good.split(".")[0] + "=." + ".".join(good.split(".")[1:])
    for token in (duplicate, padded):
        with pytest.raises(DecisionRefused) as refused:
            read_decision(token)
        assert refused.value.code == "AUTHORIZATION_MALFORMED"


def test_claims_of_the_wrong_shape_or_nested_too_deeply_are_malformed_never_an_error() -> None:
    """Read before any signature is checked: a list where a text belongs, or JSON nested past
    Python's recursion limit, is refused like any malformed token (it once raised TypeError
    and RecursionError, and the command was dead-lettered unanswered)."""
    good = _token(HEADER, _claims())
    nested = base64.urlsafe_b64encode(b"[" * 1500 + b"]" * 1500).rstrip(b"=").decode()
    tokens = [
        _token(HEADER, _claims(action=[])),
        _token(HEADER, _claims(action={})),
        _token(HEADER, _claims(ver=["x" * 500])),
        good.split(".")[0] + "." + nested + "." + good.split(".")[2],
        nested + good[good.index(".") :],
    ]
    for token in tokens:
        with pytest.raises(DecisionRefused) as refused:
            read_decision(token)
        assert refused.value.code == "AUTHORIZATION_MALFORMED"
        assert len(refused.value.message) < 300


def test_check_time_honours_iat_exp_the_leeway_and_retirement() -> None:
    issued = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    token = sign_decision(
        KEY, "sup-3-1", supervisor_id="sup-3", decision_id=uuid4(), table_id="t", coup_id="c",
        reason="", issued_at=issued, lifetime=timedelta(minutes=5),
    )  # fmt: skip
    decision, key = authenticate(RING, token)
    check_time(decision, key, issued + timedelta(minutes=5) + LEEWAY)
    check_time(decision, key, issued - LEEWAY)
    for moment in (issued + timedelta(minutes=7), issued - timedelta(minutes=2)):
        with pytest.raises(DecisionRefused) as refused:
            check_time(decision, key, moment)
        assert refused.value.code == "AUTHORIZATION_EXPIRED"
    retired = SupervisorKey(key.kid, key.supervisor, key.public_key, issued)
    with pytest.raises(DecisionRefused) as refused:
        check_time(decision, retired, issued + timedelta(seconds=1))
    assert refused.value.code == "SUPERVISOR_KEY_RETIRED"
    check_time(decision, retired, issued - timedelta(seconds=1))


# -- the keyring file ------------------------------------------------------------------------
def test_keygen_writes_an_owner_only_key_and_rotation_retires_the_old_one(tmp_path: Path) -> None:
    ring_path, key_path = tmp_path / "keys" / "supervisors.json", tmp_path / "s" / "sup-3.pem"
    first, retired = add_supervisor_key(ring_path, key_path, "sup-3")
    assert (first.kid, retired) == ("sup-3-1", [])
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_path.parent.stat().st_mode) == 0o700
    old_signer = SupervisorSigner.from_file(key_path, SupervisorKeyring.load(ring_path))
    second, retired = add_supervisor_key(ring_path, key_path, "sup-3")
    assert (second.kid, retired) == ("sup-3-2", ["sup-3-1"])
    ring = SupervisorKeyring.load(ring_path)
    old, new = ring.get("sup-3-1"), ring.get("sup-3-2")
    assert old is not None and old.retired_at is not None and new is not None
    assert new.retired_at is None
    assert SupervisorSigner.from_file(key_path, ring).kid == "sup-3-2"
    void = old_signer.void("t1", "c1")  # the old key's decisions still verify (the audit)
    assert void.authorization is not None
    assert authenticate(ring, void.authorization)[1].kid == "sup-3-1"
    again, _ = ensure_supervisor_key(ring_path, key_path, "sup-3")
    assert find_key(SupervisorKeyring.load(ring_path), again.public_key()) == new  # idempotent


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ("[]", "must be a JSON object"),
        ('{"bad id!": {}}', "key id"),
        ('{"s-1": {"supervisor": "s"}}', "supervisor, public_key"),
        ('{"s-1": {"supervisor": "s", "public_key": "AAAA"}}', "not an Ed25519 key"),
        ('{"s-1": {"supervisor": "s", "public_key": "x", "role": "admin"}}', "unknown members"),
        ('{"s-1": {"supervisor": "a b", "public_key": "x"}}', "supervisor must be"),
    ],
)
def test_a_bad_keyring_says_which_entry_and_why(document: str, says: str) -> None:
    with pytest.raises(SupervisorKeysError, match=says):
        SupervisorKeyring.parse(document)


def test_a_retirement_time_round_trips_through_the_file() -> None:
    at = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    key = SupervisorKey("s-1", "s", KEY.public_key(), at)
    again = SupervisorKeyring.parse(entry_json([key])).get("s-1")
    assert again is not None and again.retired_at == at
    with pytest.raises(SupervisorKeysError, match="time zone"):
        SupervisorKeyring.parse(
            json.dumps(
                {"s-1": {"supervisor": "s", "public_key": _pem(), "retired_at": "2026-12-01"}}
            )
        )


def _pem() -> str:
    from services.shared.platform.security.signing import public_key_pem

    return public_key_pem(KEY.public_key())


def test_the_keygen_command_makes_the_key_and_prints_its_entry(tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["supervisor", "keygen", "--id", "sup-3", "--data-dir", str(tmp_path)]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "key sup-3-1" in first.output and '"supervisor": "sup-3"' in first.output
    second = runner.invoke(app, args)
    assert "sup-3-2 added, sup-3-1 retired" in second.output
    key_file = tmp_path / "keys" / "supervisors" / "sup-3.pem"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    bad = runner.invoke(
        app, ["supervisor", "keygen", "--id", "no spaces", "--data-dir", str(tmp_path)]
    )
    assert bad.exit_code == 1 and "supervisor id" in bad.output


def test_a_key_readable_by_others_is_refused(tmp_path: Path) -> None:
    ring_path, key_path = tmp_path / "supervisors.json", tmp_path / "sup-3.pem"
    add_supervisor_key(ring_path, key_path, "sup-3")
    key_path.chmod(0o644)
    with pytest.raises(SupervisorKeysError, match="open to group or others"):
        SupervisorSigner.from_file(key_path, SupervisorKeyring.load(ring_path))


def test_the_void_command_says_what_to_do_with_a_key_the_keyring_lacks(tmp_path: Path) -> None:
    ring_path, key_path = tmp_path / "keys" / "supervisors.json", tmp_path / "sup-3.pem"
    add_supervisor_key(ring_path, key_path, "sup-3")
    ring_path.write_text("{}", encoding="utf-8")  # the keyring no longer lists it
    result = CliRunner().invoke(
        app,
        ["supervisor", "void", "--table", "t1", "--coup", "c1", "--reason", "r",
         "--key", str(key_path), "--data-dir", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "is not in" in result.output and "supervisor keygen" in result.output
