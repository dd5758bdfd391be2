"""A reference seamless wallet for the punto-banco gateway (Python standard library only).

Run it, then give its URL to the gateway (``punto-banco operators add acme --wallet-url
http://127.0.0.1:8200``) and the operator's wallet secret to it (``PB_WALLET_SECRET``)::

    PB_WALLET_SECRET=... python examples/wallet.py --port 8200 --db var/wallet.sqlite

It keeps players' balances (integer minor units) in SQLite and answers the wallet contract of
``docs/integrating.md``: ``POST /debit``, ``/credit``, ``/rollback``, each signed
(``X-PB-Signature: sha256=<HMAC-SHA256 of the raw body>``), each idempotent by its
``transaction_id``:

- a transaction seen before gets its first answer again (nothing moves twice);
- a debit above the balance is 402; an unknown player starts with ``--initial-balance``;
- a rollback reverses the transaction it names (a debit gives the stake back, a credit takes
  it back); a rollback of a transaction never seen is 404, and that transaction is refused
  (409) if it arrives later: a late debit is never applied after its rollback;
- every 200 is ``{"balance": <int>}``.

``--test-controls`` adds what the gateway's tests use: ``GET /_balances``, ``GET /_calls``
(every call as it arrives, [kind, "received"], and as applied, [kind, status]) and
``POST /_faults`` (``{"kind": "debit"|"credit"|"rollback"|"*", "mode": "fail"|"delay"|"drop"|
"garbage"|"negative"|"redirect", "status": 500, "seconds": 2, "count": 3}``): the next
``count`` calls of ``kind`` fail with ``status``, are answered late, applied but never
answered (the connection closes), answered 200 with a body that is not JSON, with a negative
balance, or redirected. Never enable them in production.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import json
import os
import sqlite3
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 16 * 1024
SCHEMA = """
CREATE TABLE IF NOT EXISTS players (player_id TEXT PRIMARY KEY, balance INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS transactions (
    transaction_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,            -- debit, credit, rollback; 'refused' for a tombstone
    player_id TEXT,
    amount INTEGER NOT NULL,
    reference TEXT,
    rolled_back INTEGER NOT NULL DEFAULT 0,
    status INTEGER NOT NULL,
    balance INTEGER
);
"""


class Wallet:
    """Balances and transactions in one SQLite file (one writer at a time)."""

    def __init__(self, path: str, initial_balance: int) -> None:
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.executescript(SCHEMA)
        self.initial = initial_balance
        self.lock = threading.Lock()

    def _balance(self, player: str) -> int:
        row = self.db.execute("SELECT balance FROM players WHERE player_id=?", (player,)).fetchone()
        if row is None:
            self.db.execute("INSERT INTO players VALUES (?, ?)", (player, self.initial))
            return self.initial
        return int(row[0])

    def _move(self, player: str, delta: int) -> int:
        balance = self._balance(player) + delta
        self.db.execute("UPDATE players SET balance=? WHERE player_id=?", (balance, player))
        return balance

    def apply(self, kind: str, body: dict[str, Any]) -> tuple[int, int | None]:
        """(status, balance) of one call, applied at most once per transaction id."""
        tx, player, amount = body["transaction_id"], body["player_id"], body["amount"]
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                result = self._apply(kind, tx, player, amount, body.get("reference_transaction_id"))
                self.db.execute("COMMIT")
                return result
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def _apply(
        self, kind: str, tx: str, player: str, amount: int, reference: str | None
    ) -> tuple[int, int | None]:
        seen = self.db.execute(
            "SELECT kind, status FROM transactions WHERE transaction_id=?", (tx,)
        ).fetchone()
        if seen is not None:
            if seen[0] == "refused":
                return 409, None  # rolled back before it arrived: never applied
            return int(seen[1]), self._balance(player)
        status, balance = 200, None
        if kind == "debit":
            if self._balance(player) < amount:
                return 402, None  # not recorded: the same id may be tried again
            balance = self._move(player, -amount)
        elif kind == "credit":
            balance = self._move(player, amount)
        else:
            found = self.db.execute(
                "SELECT kind, amount, rolled_back FROM transactions WHERE transaction_id=?",
                (reference,),
            ).fetchone()
            if found is None:  # never seen: refuse it if it comes later
                self.db.execute(
                    "INSERT INTO transactions VALUES (?, 'refused', ?, 0, NULL, 0, 409, NULL)",
                    (reference, player),
                )
                status = 404
            elif not found[2] and found[0] in ("debit", "credit"):
                sign = 1 if found[0] == "debit" else -1
                balance = self._move(player, sign * int(found[1]))
                self.db.execute(
                    "UPDATE transactions SET rolled_back=1 WHERE transaction_id=?", (reference,)
                )
            else:
                balance = self._balance(player)
        self.db.execute(
            "INSERT INTO transactions VALUES (?, ?, ?, ?, ?, 0, ?, ?)",
            (tx, kind, player, amount, reference, status, balance),
        )
        return status, balance if status == 200 else None

    def balances(self) -> dict[str, int]:
        with self.lock:
            rows = self.db.execute("SELECT player_id, balance FROM players").fetchall()
        return {player: int(balance) for player, balance in rows}


class Faults:
    """The test controls' rules (see the module docstring)."""

    def __init__(self) -> None:
        self.rules: list[dict[str, Any]] = []
        self.answered: list[tuple[str, int | str]] = []  # (kind, "received" | status)
        self.lock = threading.Lock()

    def take(self, kind: str) -> dict[str, Any] | None:
        with self.lock:
            for rule in self.rules:
                if rule.get("kind", "*") in ("*", kind) and rule.get("count", 1) > 0:
                    rule["count"] = rule.get("count", 1) - 1
                    return dict(rule)
            self.rules = [r for r in self.rules if r.get("count", 1) > 0]
        return None


def handler(wallet: Wallet, secret: bytes, faults: Faults | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if faults is not None and self.path == "/_balances":
                self._answer(200, json.dumps(wallet.balances()).encode())
            elif faults is not None and self.path == "/_calls":
                self._answer(200, json.dumps(faults.answered).encode())
            else:
                self._answer(404, b'{"error":"not found"}')

        def do_POST(self) -> None:
            length = self.headers.get("Content-Length", "")
            if not length.isdigit() or int(length) > MAX_BODY:
                self._answer(413, b'{"error":"body too large"}')
                return
            raw = self.rfile.read(int(length))
            kind = self.path.strip("/")
            if faults is not None and kind == "_faults":
                faults.rules.append(json.loads(raw))
                self._answer(200, b"{}")
                return
            if kind not in ("debit", "credit", "rollback"):
                self._answer(404, b'{"error":"not found"}')
                return
            expected = "sha256=" + hmac.new(secret, raw, hashlib.sha256).hexdigest()
            if not hmac.compare_digest(expected, self.headers.get("X-PB-Signature", "")):
                self._answer(401, b'{"error":"bad signature"}')
                return
            try:
                body = json.loads(raw)
                if not isinstance(body.get("amount"), int) or isinstance(body["amount"], bool):
                    raise ValueError("amount")
                str(body["transaction_id"]), str(body["player_id"])
            except (ValueError, KeyError, TypeError, AttributeError):
                self._answer(400, b'{"error":"malformed"}')
                return
            if faults is not None:
                faults.answered.append((kind, "received"))
            fault = faults.take(kind) if faults is not None else None
            mode = fault["mode"] if fault else None
            if mode == "fail":
                self._answer(int(fault.get("status", 500)), b'{"error":"failing"}')  # type: ignore[union-attr]
                return
            if mode == "redirect":
                self._answer(302, b"", {"Location": "http://127.0.0.1:9/elsewhere"})
                return
            if mode == "delay":
                time.sleep(float(fault.get("seconds", 1)))  # type: ignore[union-attr]
            status, balance = wallet.apply(kind, body)
            if faults is not None:
                faults.answered.append((kind, status))
            if mode == "drop":
                self.close_connection = True
                self.connection.close()
                return
            if status == 200 and mode == "garbage":
                self._answer(200, b"<html>not json</html>")
            elif status == 200 and mode == "negative":
                self._answer(200, b'{"balance": -5}')
            elif status == 200:
                self._answer(200, json.dumps({"balance": balance}).encode())
            else:
                self._answer(status, json.dumps({"error": status}).encode())

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8200)
    parser.add_argument("--db", default="wallet.sqlite")
    parser.add_argument("--initial-balance", type=int, default=0)
    parser.add_argument("--secret-env", default="PB_WALLET_SECRET")
    parser.add_argument("--test-controls", action="store_true")
    args = parser.parse_args(argv)
    secret = os.environ.get(args.secret_env, "")
    if not secret:
        print(f"wallet: set {args.secret_env} to the operator's wallet secret", file=sys.stderr)
        return 2
    wallet = Wallet(args.db, args.initial_balance)
    faults = Faults() if args.test_controls else None
    server = ThreadingHTTPServer((args.host, args.port), handler(wallet, secret.encode(), faults))
    server.daemon_threads = True
    print(f"wallet: listening on http://{args.host}:{server.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
