"""Settlement's bet ids as rows of its side table ``bet_ids`` (``side_tables.BET_IDS``).

Settlement's idempotency of bet ids lives in its store, not in memory: the first answer to
an (operator, bet id) is a row at version 1, inserted in the same transaction as the answer
itself (the book's ``BetsAnswered``, the desk's ``BetRejected``) by the recorder
(``UnitOfWork.add_rows``). The table's primary key (operator, bet id, version) makes a second
writer of the same bet id fail its whole transaction instead of accepting the bet twice.

The rows are derived state: no domain event, no notification id, never published nor
sealed; everything in them is in the answers' events too (``bet_index_store`` rebuilds them
from there). Each row holds the whole state (the bet's content and its answer), so the row of
the highest version says all. Later versions exist only for bets held by earlier versions of
settlement (see ``desk``): the answer when a held bet is judged, and a row without content
(``bet`` NULL) when it is refused NO_SUCH_COUP / NO_SUCH_TABLE (its id may be used again: a
later answer is the next version). Rows are never updated nor deleted, so the service's role
needs only SELECT and INSERT on the table, as on its events.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from json.encoder import encode_basestring_ascii
from typing import Any

from services.settlement.bet_index import Answered, BetAnswer, BetKey, BetRequest, Change, Stored
from services.shared.platform.store import BET_IDS, Row, SideRows

BET_FIELDS = ("table_id", "coup_id", "bettor_id", "bet_type", "amount", "currency")
"""What ``bet`` lists (as JSON), in this order."""


def change_row(key: BetKey, state: Answered | None, version: int) -> Row | None:
    """The row that makes ``key`` (now at ``version``, 0: no row) say ``state`` (None:
    free); None when nothing is to be written."""
    if state is None:
        if version == 0:
            return None
        return (*key, version + 1, None, 0, None, "", 0)
    r, answer = state.request, state.answer
    parts = (r.table_id, r.coup_id, r.bettor_id, r.bet_type, r.amount, r.currency)
    try:  # json.dumps' text, for a third of its cost
        bet = f"[{', '.join(map(encode_basestring_ascii, parts))}]"
    except TypeError:  # a part that is not text
        bet = json.dumps(parts)
    return (  # the flags as 1 / 0: sqlite3 looks a bool's adapter up (a failed lookup, 1 us)
        *key,
        version + 1,
        bet,
        int(answer.reason_code is None and not answer.held),
        answer.reason_code,
        answer.message,
        int(answer.held),
    )


def stored_state(row: Row) -> tuple[BetKey, Stored]:
    """What a row says: its key, the answered bet (None: free) and its version."""
    operator, bet_id, version, bet, accepted, reason_code, message, held = row
    if bet is None:
        return (operator, bet_id), Stored(None, version)
    table_id, coup_id, bettor_id, bet_type, amount, currency = json.loads(bet)
    request = BetRequest(
        table_id, coup_id, bet_id, bettor_id, bet_type, amount, currency, operator=operator
    )
    answer = BetAnswer(bet_id, bool(accepted), reason_code, message, held=bool(held))
    return (operator, bet_id), Stored(Answered(request, answer), version)


def latest(rows: Iterable[Row]) -> dict[BetKey, Stored]:
    """Each key's state at its highest version."""
    found: dict[BetKey, Stored] = {}
    for row in rows:
        key, stored = stored_state(row)
        held = found.get(key)
        if held is None or held.version < stored.version:
            found[key] = stored
    return found


def change_rows(changes: Iterable[Change]) -> SideRows:
    """The rows recording a unit of work's changes (``BetIndex.changes``)."""
    rows: list[Any] = [change_row(key, state, version) for key, state, version in changes]
    return SideRows(BET_IDS, [row for row in rows if row is not None])
