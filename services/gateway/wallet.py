"""Calling an operator's seamless wallet, and what its answer means.

:class:`WalletClient` POSTs a call's JSON body to ``{wallet}/debit|credit|rollback`` with
``X-PB-Signature: sha256=<hex HMAC-SHA256 of the raw body with the wallet secret>``, a time-out
on the whole call, redirects never followed, and at most :data:`MAX_ANSWER` bytes of answer
read. :func:`judge` says what the answer means:

- a debit: 200 with a balance -> ``confirmed`` (the bet goes on); 402 -> ``refused``
  ``INSUFFICIENT_FUNDS``; another 4xx -> ``refused`` ``WALLET_REFUSED`` (nothing moved); a 5xx,
  a redirect, a time-out, no answer or a 200 without a balance -> ``unknown`` (the bet is
  refused ``WALLET_UNAVAILABLE`` and the debit rolled back: a debit whose fate is unknown is
  never left standing);
- a credit (the settlement's, or a correction's), a correction's debit (winnings taken back):
  200 with a balance -> ``confirmed``; anything else -> ``retry`` (the same transaction id:
  applied once, whenever it lands). A correction's debit refused (4xx: the player has spent it)
  is an incident too (``WALLET_CORRECTION_REFUSED``): the result was decided, so the debit is
  tried again until the wallet takes it, or the coup is voided and it is rolled back;
- a rollback: 200 with a balance, or 404 (the wallet never had the call: rolled back all the
  same) -> ``confirmed``; anything else -> ``retry``.

A balance is never used for money. One that cannot be (not a whole number, out of range) makes
the answer no answer; one that does not add up (below zero after a debit or a credit) is an
incident: recorded, published, and the call counts as its status says.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

import httpx2

from services.gateway.auth import body_signature
from services.gateway.domain import Kind

MAX_ANSWER = 16 * 1024
"""The most bytes of a wallet's answer read; a longer one is no answer."""
MAX_BALANCE = 2**53 - 1

BALANCE_MISMATCH = "WALLET_BALANCE_MISMATCH"
ANSWER_MALFORMED = "WALLET_ANSWER_MALFORMED"
CORRECTION_REFUSED = "WALLET_CORRECTION_REFUSED"


@dataclass(frozen=True, slots=True)
class Answer:
    """What came back from one call: the status (None: no answer) and the body's balance."""

    status: int | None
    balance: int | None = None
    error: str = ""  # why there is no usable answer
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Verdict:
    """What an answer means for the call (see the module docstring)."""

    outcome: str  # confirmed | refused | unknown | retry
    reason_code: str = ""
    message: str = ""
    incident: tuple[str, str] | None = None


def judge(kind: Kind, answer: Answer) -> Verdict:
    status = answer.status
    malformed = None
    if status == 200 and answer.balance is None:
        malformed = (ANSWER_MALFORMED, f"the wallet answered a {kind.path} 200 {answer.error}")
    if status == 200 and answer.balance is not None:
        incident = None
        if answer.balance < 0 and kind.path != "rollback":
            incident = (
                BALANCE_MISMATCH,
                f"the wallet answered a {kind.path} with a balance below zero "
                f"({answer.balance}): not trusted",
            )
        return Verdict("confirmed", incident=incident)
    if kind is Kind.DEBIT:
        if status == 402:
            return Verdict("refused", "INSUFFICIENT_FUNDS", "the wallet refused the stake (402)")
        if status is not None and 400 <= status < 500:
            return Verdict("refused", "WALLET_REFUSED", f"the wallet refused the stake ({status})")
        why = answer.error or f"status {status}"
        return Verdict(
            "unknown",
            "WALLET_UNAVAILABLE",
            f"the wallet did not answer the stake's debit ({why}); it is rolled back",
            malformed,
        )
    if status == 404 and kind.path == "rollback":
        return Verdict("confirmed")
    if kind is Kind.CORRECTION_DEBIT and status is not None and 400 <= status < 500:
        why = (
            f"the wallet refused a corrected result's debit ({status}): the player owes the "
            "difference; it is asked for again until the wallet takes it"
        )
        return Verdict("retry", message=why, incident=(CORRECTION_REFUSED, why))
    return Verdict("retry", message=answer.error or f"status {status}", incident=malformed)


class WalletClient:
    """One operator's wallet (see the module docstring)."""

    def __init__(
        self,
        url: str,
        secret: str,
        timeout: float,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.secret = secret
        self.timeout = timeout
        self.client = httpx2.AsyncClient(
            timeout=httpx2.Timeout(timeout),
            follow_redirects=False,
            trust_env=False,
            transport=transport,
        )

    async def close(self) -> None:
        await self.client.aclose()

    async def call(self, kind: Kind, body: dict[str, Any]) -> Answer:
        raw = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
        headers = {
            "content-type": "application/json",
            "x-pb-signature": body_signature(self.secret, raw),
        }
        started = time.perf_counter()
        try:  # the client's time-out is each read's: a wallet trickling bytes would outlast it
            async with (
                asyncio.timeout(self.timeout),
                self.client.stream(
                    "POST", f"{self.url}/{kind.path}", content=raw, headers=headers
                ) as response,
            ):
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > MAX_ANSWER:
                        return Answer(None, error=f"an answer over {MAX_ANSWER} bytes")
                status = response.status_code
        except httpx2.HTTPError as error:
            return Answer(None, error=f"{type(error).__name__}: {error}"[:300])
        except TimeoutError:
            return Answer(None, error=f"no whole answer within {self.timeout:g} s")
        seconds = time.perf_counter() - started
        if 300 <= status < 400:
            return Answer(None, error=f"a redirect ({status}), not followed", seconds=seconds)
        balance, why = _balance(bytes(data)) if status == 200 else (None, "")
        return Answer(status, balance, why, seconds)


def _balance(data: bytes) -> tuple[int | None, str]:
    try:
        body = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: [[[...]]]
        return None, "with a body that is not JSON"
    value = body.get("balance") if isinstance(body, dict) else None
    if isinstance(value, bool) or not isinstance(value, int):
        return None, "without a whole-number balance"
    if abs(value) > MAX_BALANCE:
        return None, "with a balance out of range"
    return value, ""
