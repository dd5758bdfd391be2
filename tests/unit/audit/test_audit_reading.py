"""The fast readers give exactly what the standard library gives (or refuse what it refuses)."""

from __future__ import annotations

import hashlib
import json
from typing import Any, cast

import pytest

from services.shared.platform.store.sealing import SCHEME, ZERO_DIGEST, seal_digest
from services.tools.history.from_store import read_json, read_state

_scan = cast(Any, json.JSONDecoder()).scan_once

STATES = [
    b'{"timestamp":{"_type_":"datetime_iso","_data_":"2026-11-30T03:59:10+00:00"},'
    b'"lines":[["b0","bettor-0","player",4502,"EUR",null,""]]}',
    b'{"amount":18446744073709551617}',  # beyond 64 bits: orjson would make it a float
    b'{"amount":-9223372036854775809}',
    b'{"amount":123456789012345678901234567890}',
    b'{"a":1,"a":2}',
    b'{"a":1.5,"b":-0.0,"c":1e400}',
    b'{"a":NaN}',
    b'{"a":"\\ud800"}',
    b'{"a":1} trailing bytes',
    b' {"a":1}',  # leading whitespace: scan_once refuses it
    b'{"a":1}\n',
    b'{"a":[1,]}',
    b'{"a":"\xff"}',
    b"",
    b"[1, 2]",
]


def _outcome(read: Any, data: bytes) -> tuple[str, str]:
    try:
        return "read", repr(read(data))
    except Exception as error:  # the very same refusal is what matters
        return "refused", type(error).__name__


@pytest.mark.parametrize("state", STATES)
def test_a_state_reads_as_scan_once_reads_it(state: bytes) -> None:
    assert _outcome(read_state, state) == _outcome(lambda s: _scan(s.decode(), 0)[0], state)


@pytest.mark.parametrize("data", STATES)
def test_a_seal_reads_as_json_loads_reads_it(data: bytes) -> None:
    assert _outcome(read_json, data) == _outcome(json.loads, data)


def test_big_amounts_stay_exact_integers() -> None:
    assert read_state(b'{"amount":18446744073709551617}') == {"amount": 18446744073709551617}
    assert type(read_state(b'{"amount":18446744073709551617}')["amount"]) is int


def test_the_seal_digest_is_the_documented_concatenation() -> None:
    """Rows packed with struct give the bytes of id (8, big-endian) + row hash, and the
    auditor's extra item per row (its originator id) is ignored."""
    covered = [(n, bytes([n % 256]) * 32, b"\x01" * 16) for n in (3, 4, 5, 9, 2**40)]
    digest = hashlib.sha256(SCHEME.encode())
    digest.update(bytes.fromhex(ZERO_DIGEST))
    digest.update((2).to_bytes(8, "big") + (2**40).to_bytes(8, "big"))
    digest.update(b"".join(n.to_bytes(8, "big") + hashed for n, hashed, _ in covered))
    assert seal_digest(ZERO_DIGEST, 2, 2**40, covered) == digest.hexdigest()
    rows = [(n, hashed) for n, hashed, _ in covered]
    assert seal_digest(ZERO_DIGEST, 2, 2**40, rows) == digest.hexdigest()
