"""CPU per record of the record signature (``pb-sig``): ``signing.py`` against joserfc.

``python -m services.dev.bench.record_jws [RECORDS] [ROUNDS]``: signs and verifies RECORDS
records (416-byte values, relay positions counting up) with ``signing.py``'s hand-written JWS
and with the same detached, unencoded JWS (RFC 7797) made and checked by joserfc, the two
alternating ROUNDS times in one process; prints the median CPU microseconds per record. Both
sides do what the relay and the consumer do: the joserfc side checks the same header members
(key id in the keyring and its service, topic, key, position) before the signature, with the
keyring's joserfc keys made once.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from joserfc import jws
from joserfc.jwk import OKPKey
from joserfc.registry import HeaderParameter

from services.shared.platform.security import (
    ALGORITHM,
    Keyring,
    KeyringEntry,
    Signer,
    Where,
    verify,
)
from services.shared.platform.security import RECORD_SCHEME as SCHEME

TOPIC, KEY, KID, SERVICE = "punto-banco.bet-events", b"t1", "settlement-1", "settlement"
WHERE = Where("cluster-1", TOPIC, 0)
VALUE = b'{"type":"BetSettled","bet_id":"' + b"b" * 370 + b'","returned":2000}'


class _EdDSA(jws.JWSRegistry):
    def get_alg(self, name: str) -> Any:  # EdDSA without RFC 9864's warning, as decisions.py
        return self.algorithms[name]


_TEXT = HeaderParameter("where the record was written", "str")
_PART = HeaderParameter("the record's partition", "int")
REGISTRY = _EdDSA(
    {
        **{name: _TEXT for name in ("pb-cluster", "pb-key", "pb-pos", "pb-scheme", "pb-topic")},
        "pb-part": _PART,
    },
    [ALGORITHM],
)
Sign = Callable[[int], bytes]
Check = Callable[[int, bytes], None]


def hand_written(signer: Signer, keyring: Keyring) -> tuple[Sign, Check]:
    def sign(n: int) -> bytes:
        return signer.sign(WHERE, KEY, VALUE, n, 0)

    def check(n: int, pb_sig: bytes) -> None:
        assert verify(keyring, SERVICE, WHERE, KEY, VALUE, n, 0, pb_sig) is None

    return sign, check


def with_joserfc(private: Ed25519PrivateKey, keyring: Keyring) -> tuple[Sign, Check]:
    secret = OKPKey.import_key(private)
    public = {entry.kid: OKPKey.import_key(entry.public_key) for entry in keyring.entries()}

    def sign(n: int) -> bytes:
        header = {"alg": ALGORITHM, "b64": False, "crit": ["b64"], "kid": KID}
        header.update({"pb-cluster": WHERE.cluster, "pb-key": KEY.decode(), "pb-part": 0})
        header.update({"pb-pos": f"{n}:0", "pb-scheme": SCHEME, "pb-topic": TOPIC})
        signed = jws.serialize_compact(header, VALUE, secret, registry=REGISTRY)
        return jws.detach_content(signed).encode("ascii")

    def check(n: int, pb_sig: bytes) -> None:
        signed = jws.extract_compact(pb_sig, VALUE, REGISTRY)
        header = signed.protected
        entry = keyring.get(header["kid"])
        assert entry is not None and entry.service == SERVICE
        assert (header["pb-topic"], header["pb-key"]) == (TOPIC, KEY.decode())
        assert (header["pb-cluster"], header["pb-part"]) == (WHERE.cluster, WHERE.partition)
        assert header["pb-pos"] == f"{n}:0" and header["b64"] is False
        assert jws.validate_compact(signed, public[entry.kid], registry=REGISTRY)

    return sign, check


def per_record(sign: Sign, check: Check, records: int) -> tuple[float, float]:
    """CPU microseconds per record: signing, then verifying what was signed."""
    started = time.process_time()
    signatures = [sign(n) for n in range(records)]
    signed = time.process_time()
    for n, pb_sig in enumerate(signatures):
        check(n, pb_sig)
    checked = time.process_time()
    return (signed - started) / records * 1e6, (checked - signed) / records * 1e6


def main(records: int = 20_000, rounds: int = 7) -> None:
    private = Ed25519PrivateKey.generate()
    keyring = Keyring({KID: KeyringEntry(KID, SERVICE, private.public_key())})
    sides = {
        "signing.py (hand-written)": hand_written(Signer(KID, SERVICE, private), keyring),
        "joserfc": with_joserfc(private, keyring),
    }
    hand_sig = sides["signing.py (hand-written)"][0](7)
    sides["joserfc"][1](7, hand_sig)  # the same bytes: each side verifies the other's
    sides["signing.py (hand-written)"][1](7, sides["joserfc"][0](7))
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, (sign, check) in sides.items():
            figures[name].append(per_record(sign, check, records))
    print(f"{records:,} records x {rounds} rounds, {len(VALUE)}-byte values, median CPU us/record")
    print("| Implementation | sign | verify | sign + verify |")
    print("|---|---:|---:|---:|")
    for name, runs in figures.items():
        sign_us = statistics.median(s for s, _ in runs)
        check_us = statistics.median(c for _, c in runs)
        both = statistics.median(s + c for s, c in runs)
        print(f"| {name} | {sign_us:.1f} | {check_us:.1f} | {both:.1f} |")


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:3]))
