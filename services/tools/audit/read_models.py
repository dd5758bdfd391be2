"""Read models rebuilt from scratch from the stores: table history and bettor history.

Both are plain data derived only from the rebuilt :class:`History` (stored
order, no clocks, no randomness); :func:`canonical_bytes` renders them as
canonical JSON (sorted keys, fixed separators), so rebuilding twice from the
same stores gives the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from services.tools.history.views import History


def table_history(history: History) -> dict[str, Any]:
    """Per table: its settings and every coup (cards, result, voids, money)."""
    tables: dict[str, Any] = {}
    for table_id in sorted(history.tables):
        table = history.tables[table_id]
        coups = []
        for coup_id in table.coups:
            coup = history.coups[(table_id, coup_id)]
            book = history.books.get((table_id, coup_id))
            staked = paid = 0
            if book is not None:
                staked = sum(bet.amount for bet in book.accepted.values())
                paid = sum(line.returned for s in book.settlements[:1] for line in s.lines)
            resolution = coup.resolved
            fact = None if resolution is None else resolution.fact
            coups.append(
                {
                    "coup_id": coup_id,
                    "coup_number": coup.coup_number,
                    "shoe_id": coup.shoe_id,
                    "opened_at": coup.opened_at,
                    "player_cards": None if fact is None else fact.player_cards,
                    "banker_cards": None if fact is None else fact.banker_cards,
                    "outcome": None if fact is None else fact.outcome,
                    "voided_by": [v.supervisor_id for v in coup.voids],
                    "bets": 0 if book is None else len(book.accepted),
                    "rejected": 0 if book is None else len(book.rejected),
                    "staked": staked,
                    "paid": paid,
                }
            )
        tables[table_id] = {
            "paytable": table.settings.paytable,
            "decks": table.settings.decks,
            "currency": table.settings.currency,
            "closed_at": table.closed_at,
            "coups": coups,
        }
    return tables


def bettor_history(history: History) -> dict[str, Any]:
    """Per bettor: every bet (accepted or refused) with its settlement and refund."""
    bettors: dict[str, list[dict[str, Any]]] = {}
    for (table_id, coup_id), book in history.books.items():
        settled = {line.bet_id: line for s in book.settlements[:1] for line in s.lines}
        refunded = {line.bet_id: line for r in book.refunds[:1] for line in r.lines}
        for bet_id, bet in book.accepted.items():
            line = settled.get(bet_id)
            back = refunded.get(bet_id)
            returned = 0 if line is None else int(line.returned)
            adjustment = 0 if back is None else int(back.adjustment)
            bettors.setdefault(bet.bettor_id, []).append(
                {
                    "bet_id": bet_id,
                    "table_id": table_id,
                    "coup_id": coup_id,
                    "bet_type": bet.bet_type,
                    "amount": bet.amount,
                    "result": None if line is None else line.result,
                    "returned": returned,
                    "refund_adjustment": adjustment,
                    "net": returned + adjustment - bet.amount,
                }
            )
        for bet_id, rejected in book.rejected.items():
            bettors.setdefault(rejected.bettor_id, []).append(
                {
                    "bet_id": bet_id,
                    "table_id": table_id,
                    "coup_id": coup_id,
                    "bet_type": rejected.bet_type,
                    "amount": rejected.amount,
                    "rejected": rejected.reason_code,
                }
            )
    out: dict[str, Any] = {}
    for bettor_id in sorted(bettors):
        bets = bettors[bettor_id]
        out[bettor_id] = {
            "bets": bets,
            "staked": sum(b["amount"] for b in bets if "rejected" not in b),
            "net": sum(b.get("net", 0) for b in bets),
        }
    return out


def canonical_bytes(model: Any) -> bytes:
    return (
        json.dumps(model, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        + b"\n"
    )


def read_models(history: History) -> dict[str, bytes]:
    """``{"table-history.json": ..., "bettor-history.json": ...}`` as canonical bytes."""
    return {
        "table-history.json": canonical_bytes(table_history(history)),
        "bettor-history.json": canonical_bytes(bettor_history(history)),
    }


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
