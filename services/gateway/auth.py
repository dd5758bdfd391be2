"""Who calls the API, and how often: HMAC-SHA256 request signatures and per-operator limits.

A request carries ``X-PB-Operator``, ``X-PB-Timestamp`` (Unix seconds) and ``X-PB-Signature:
sha256=<hex>``, the HMAC-SHA256 with the operator's API secret of
``<timestamp>.<METHOD>.<path with query>.<raw body>``. A timestamp more than the allowed skew
(300 s) away from now, a missing or malformed header, an unknown operator or a signature that
no current secret of the operator makes is refused (401, and nothing says which). Within the
window a replayed request is answered as the first one was (the API is idempotent by the
operator's ids), never acted on twice.

The same scheme signs the gateway's wallet calls (:func:`body_signature`: the raw body alone,
with the operator's wallet secret).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

OPERATOR_HEADER = "x-pb-operator"
TIMESTAMP_HEADER = "x-pb-timestamp"
SIGNATURE_HEADER = "x-pb-signature"

_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_SIGNATURE = re.compile(r"sha256=([0-9a-f]{64})")


def canonical(timestamp: str, method: str, path: str, body: bytes) -> bytes:
    """What a request's signature is over."""
    return f"{timestamp}.{method.upper()}.{path}.".encode() + body


def request_signature(secret: str, timestamp: str, method: str, path: str, body: bytes) -> str:
    """The ``X-PB-Signature`` value of a request (what a client sends)."""
    digest = hmac.new(secret.encode(), canonical(timestamp, method, path, body), hashlib.sha256)
    return f"sha256={digest.hexdigest()}"


def body_signature(secret: str, body: bytes) -> str:
    """The ``X-PB-Signature`` of a wallet call: over its raw body."""
    return f"sha256={hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()}"


def signed_headers(
    operator: str, secret: str, method: str, path: str, body: bytes, now: float | None = None
) -> dict[str, str]:
    """The three headers of a signed request (clients in Python, the tests, the demo)."""
    timestamp = str(int(time.time() if now is None else now))
    return {
        "X-PB-Operator": operator,
        "X-PB-Timestamp": timestamp,
        "X-PB-Signature": request_signature(secret, timestamp, method, path, body),
    }


def verify(
    secrets: Sequence[str],
    timestamp: str | None,
    signature: str | None,
    method: str,
    path: str,
    body: bytes,
    now: float,
    skew: float,
) -> str | None:
    """Why the request is refused, or None when one of ``secrets`` signed it in time."""
    if timestamp is None or _TIMESTAMP.fullmatch(timestamp) is None:
        return "X-PB-Timestamp must be the request's time in Unix seconds"
    if abs(now - int(timestamp)) > skew:
        return f"X-PB-Timestamp is more than {skew:.0f} s from the server's time"
    found = _SIGNATURE.fullmatch(signature or "")
    if found is None:
        return "X-PB-Signature must be sha256=<64 lower-case hex digits>"
    given = bytes.fromhex(found[1])
    message = canonical(timestamp, method, path, body)
    for secret in secrets:
        expected = hmac.new(secret.encode(), message, hashlib.sha256).digest()
        if hmac.compare_digest(expected, given):
            return None
    return "the signature does not match the request"


@dataclass
class RateLimit:
    """A token bucket: ``rate`` requests per second, bursts of ``burst``."""

    rate: float
    burst: int
    clock: Callable[[], float] = time.monotonic
    _tokens: float = field(init=False)
    _at: float = field(init=False)

    def __post_init__(self) -> None:
        self._tokens = float(self.burst)
        self._at = self.clock()

    def take(self) -> int | None:
        """None when the request may go; else the seconds to wait (``Retry-After``)."""
        now = self.clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return None
        return max(1, math.ceil((1 - self._tokens) / self.rate))
