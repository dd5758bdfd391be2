"""Game recall: a table's last N coups as the stores recorded them.

For each coup: the cards in the order they were dealt (side, card, shoe
position), the totals and outcome dealing recorded, the paytable, every bet with
its settlement (and refund) and what the cards gave it under the paytable (the
rules' case and odds: ``by 9: 30 to 1``), bets refused, and voids with who and why. A coup
of a studio table's shoe also has the device's reads around its cards (from the one after the
card before it to the one before the card after it: unreadable cards, re-scans, the confirm,
the time waited) and the holds raised while it was dealt, with their reasons.
"""

from __future__ import annotations

from typing import Any

from services.shared.facts.settlement import RefundLine, SettledLine
from services.shared.rules.cards import CardParseError, parse_cards
from services.shared.rules.paytable import CASE_NAMES, PAYTABLES, WIN, BetType, ratio
from services.shared.rules.settlement import payoff
from services.shared.rules.tableau import CoupResult, NotEnoughCards, dealing_order, resolve_coup
from services.tools.history.views import BookView, CoupView, History, Read, Studio


class UnknownTable(LookupError):
    """No table of that id in the dealing store."""


def recall(history: History, table_id: str, last: int = 10) -> list[dict[str, Any]]:
    """The last ``last`` coups of ``table_id`` (oldest first), as plain data."""
    table = history.tables.get(table_id)
    if table is None:
        known = ", ".join(sorted(history.tables)) or "none"
        raise UnknownTable(f"no table {table_id!r} in the dealing store (tables: {known})")
    coup_ids = table.coups[-last:] if last > 0 else []
    out = []
    for coup_id in coup_ids:
        coup = history.coups[(table_id, coup_id)]
        shoe = history.shoes.get((table_id, coup.shoe_id))
        studio = None if shoe is None else shoe.studio
        out.append(_coup(coup, history.books.get((table_id, coup_id)), studio))
    return out


def _coup(coup: CoupView, book: BookView | None, studio: Studio | None = None) -> dict[str, Any]:
    resolution = coup.resolved
    fact = None if resolution is None else resolution.fact
    status = "voided" if coup.voids else "resolved" if fact is not None else "in play"
    out: dict[str, Any] = {
        "coup_id": coup.coup_id,
        "coup_number": coup.coup_number,
        "shoe_id": coup.shoe_id,
        "opened_at": coup.opened_at,
        "status": status,
        "cards": [{"side": d.side, "card": d.card, "position": d.position} for d in coup.dealt],
        "player_cards": None if fact is None else fact.player_cards,
        "banker_cards": None if fact is None else fact.banker_cards,
        "player_total": None if fact is None else fact.player_total,
        "banker_total": None if fact is None else fact.banker_total,
        "outcome": None if fact is None else fact.outcome,
        "natural": None if fact is None else fact.natural,
        "player_pair": None if fact is None else fact.player_pair,
        "banker_pair": None if fact is None else fact.banker_pair,
        "voids": [
            {
                "supervisor_id": v.supervisor_id,
                "reason": v.reason,
                "at": v.at,
                "after_result": v.was_resolved,
            }
            for v in coup.voids
        ],
        "bets": [],
        "rejected_bets": [],
    }
    if studio is not None:
        out["reads"] = [
            {
                "seq": r.seq,
                "what": r.what,
                "card": r.card,
                "button": r.button,
                "position": r.position,
                "held": r.held,
                "waited_ms": r.waited_ms,
                "read_at": r.read_at,
            }
            for r in _coup_reads(coup, studio.reads)
        ]
        out["holds"] = [
            {"reason": h.reason, "detail": h.detail, "seq": h.seq}
            for h in studio.holds
            if h.coup_id == coup.coup_id
        ]
    if book is None:
        return out
    out["paytable"] = book.paytable
    result = None if fact is None else _result(fact.player_cards, fact.banker_cards)
    settled: dict[str, SettledLine] = {}
    for settlement in book.settlements:
        for line in settlement.lines:
            settled.setdefault(line.bet_id, line)
    refunded: dict[str, RefundLine] = {}
    for refund in book.refunds:
        for back in refund.lines:
            refunded.setdefault(back.bet_id, back)
    for bet_id, bet in book.accepted.items():
        entry: dict[str, Any] = {
            "bet_id": bet_id,
            "bettor_id": bet.bettor_id,
            "bet_type": bet.bet_type,
            "amount": bet.amount,
            "currency": bet.currency,
            "placed_at": bet.placed_at,
            "settlement": None,
            "refund": None,
        }
        settled_line = settled.get(bet_id)
        if settled_line is not None:
            entry["settlement"] = {
                "result": settled_line.result,
                "payout": settled_line.payout,
                "returned": settled_line.returned,
                "on": _on(bet.bet_type, result, book.paytable),
            }
        refund_line = refunded.get(bet_id)
        if refund_line is not None:
            entry["refund"] = {"stake": refund_line.stake, "adjustment": refund_line.adjustment}
        out["bets"].append(entry)
    out["rejected_bets"] = [
        {
            "bet_id": bet_id,
            "bettor_id": r.bettor_id,
            "bet_type": r.bet_type,
            "amount": r.amount,
            "reason_code": r.reason_code,
            "message": r.message,
        }
        for bet_id, r in book.rejected.items()
    ]
    return out


def _coup_reads(coup: CoupView, reads: list[Read]) -> list[Read]:
    """The reads of a coup: from the one after the card or CONFIRM before its first card to
    its CONFIRM (or the card read after its last; none: it was dealt no card)."""
    positions = [dealt.position for dealt in coup.dealt]
    if not positions:
        return []
    first, last = min(positions), max(positions)
    start, end, reached, dealt = 0, len(reads), False, False
    for index, read in enumerate(reads):
        position = None if read.held else read.position  # a card placed in the shoe
        confirmed = read.button == "CONFIRM" and not read.held
        if (position is not None and position > last) or (dealt and confirmed):
            end = index + (1 if confirmed else 0)
            break
        if not reached and (confirmed or (position is not None and position < first)):
            start = index + 1
        reached = reached or (position is not None and position >= first)
        dealt = dealt or position == last
    return reads[start:end]


def _result(player: list[str], banker: list[str]) -> CoupResult | None:
    """The coup the recorded hands make (None: they make none; the audit says why)."""
    try:
        return resolve_coup(parse_cards(dealing_order(player, banker)))
    except (CardParseError, NotEnoughCards, ValueError):
        return None


def _on(bet_type: str, result: CoupResult | None, paytable: str) -> str | None:
    """What the cards gave this bet under the paytable: ``19 to 20``, ``by 9: 30 to 1``,
    ``tie: push`` (None: it lost, or the cards, bet type or paytable are unknown)."""
    table = PAYTABLES.get(paytable)
    if result is None or table is None or bet_type not in table.pays:
        return None
    got = payoff(BetType(bet_type), result, table)
    if got.case is None:
        return None
    return ratio(got.odds) if got.case == WIN else f"{CASE_NAMES[got.case]}: {ratio(got.odds)}"


def recall_text(table_id: str, coups: list[dict[str, Any]]) -> str:
    lines = [f"Table {table_id}: last {len(coups)} coups (oldest first)"]
    for coup in coups:
        lines.append("")
        lines.append(
            f"Coup {coup['coup_number']} ({coup['coup_id']}, shoe {coup['shoe_id']}, "
            f"opened {coup['opened_at']}): {coup['status']}"
        )
        if coup["cards"]:
            dealt = ", ".join(f"{c['side'][0]}:{c['card']}@{c['position']}" for c in coup["cards"])
            lines.append(f"  cards in order: {dealt}")
        if coup["outcome"] is not None:
            pairs = [
                name
                for name, flag in (
                    ("Player pair", coup["player_pair"]),
                    ("Banker pair", coup["banker_pair"]),
                )
                if flag
            ]
            lines.append(
                f"  Player {' '.join(coup['player_cards'])} = {coup['player_total']}, "
                f"Banker {' '.join(coup['banker_cards'])} = {coup['banker_total']}: "
                f"{coup['outcome']}{' (natural)' if coup['natural'] else ''}"
                + (f"; {', '.join(pairs)}" if pairs else "")
                + (f"; paytable {coup['paytable']}" if coup.get("paytable") else "")
            )
        if coup.get("reads"):
            lines.append("  device reads: " + ", ".join(_read_text(r) for r in coup["reads"]))
        for hold in coup.get("holds", ()):
            lines.append(f"  HELD {hold['reason']} at read {hold['seq']}: {hold['detail']}")
        for void in coup["voids"]:
            lines.append(
                f"  VOIDED by {void['supervisor_id']} at {void['at']}"
                f"{' after the result' if void['after_result'] else ''}: {void['reason']}"
            )
        for bet in coup["bets"]:
            text = (
                f"  bet {bet['bet_id']} by {bet['bettor_id']}: {bet['bet_type']} "
                f"{bet['amount']:,} {bet['currency']}"
            )
            if bet["settlement"]:
                s = bet["settlement"]
                on = f" ({s['on']})" if s.get("on") else ""
                text += f" -> {s['result']}{on}, payout {s['payout']:,}, returned {s['returned']:,}"
            if bet["refund"]:
                r = bet["refund"]
                text += f"; refunded {r['stake']:,} (adjustment {r['adjustment']:+,})"
            if not bet["settlement"] and not bet["refund"]:
                text += " (not settled yet)"
            lines.append(text)
        for bet in coup["rejected_bets"]:
            lines.append(
                f"  rejected {bet['bet_id']} by {bet['bettor_id']}: {bet['bet_type']} "
                f"{bet['amount']} ({bet['reason_code']}: {bet['message']})"
            )
    return "\n".join(lines) + "\n"


def _read_text(read: dict[str, Any]) -> str:
    """``12 CARD 9S@4``, ``13 UNREADABLE``, ``14 BUTTON CONFIRM``, ``(held)`` when kept held."""
    text = f"{read['seq']} {read['what'].upper()}"
    if read["card"] is not None:
        text += f" {read['card']}" + ("" if read["position"] is None else f"@{read['position']}")
    if read["button"] is not None:
        text += f" {read['button']}"
    if read["waited_ms"] is not None:
        text += f" (waited {read['waited_ms']} ms)"
    return text + (" (held)" if read["held"] else "")
