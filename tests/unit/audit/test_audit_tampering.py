"""Each change to stored rows is found and located (the seals), or caught by recomputation."""

from __future__ import annotations

from typing import Any

import pytest

from services.tools.audit.findings import Code, Severity
from services.tools.audit.stores import Row
from tests.unit.audit.helpers import (
    TOPIC_SETTLED,
    Played,
    audit_rows,
    codes,
    edit_state,
    only,
    play_history,
)


@pytest.fixture(scope="module")
def played() -> Played:
    return play_history(coups=10, tables=1)


def _index(rows: list[Row], topic_end: str, nth: int = 0) -> int:
    found = [i for i, row in enumerate(rows) if row.topic.endswith(topic_end)]
    return found[nth]


def test_editing_a_stored_event_is_located(played: Played) -> None:
    rows = played.rows()
    settlement = rows["settlement"]
    i = _index(settlement, "BetsAnswered", 3)

    def bigger(state: dict[str, Any]) -> None:
        state["lines"][0][3] += 1  # one more cent on an accepted bet

    settlement[i] = edit_state(settlement[i], bigger)
    report = audit_rows(rows)
    altered = only(report, Code.ROW_ALTERED)
    assert [f.notification_id for f in altered] == [settlement[i].notification_id]
    assert altered[0].store == "settlement" and altered[0].table_id == "t1"
    assert altered[0].coup_id is not None
    assert "seal 1" in altered[0].message


def test_deleting_a_stored_event_is_located(played: Played) -> None:
    rows = played.rows()
    dealing = rows["dealing"]
    i = _index(dealing, "Coup.CardDealt", 5)
    gone = dealing.pop(i)
    report = audit_rows(rows)
    assert [f.notification_id for f in only(report, Code.ROW_DELETED)] == [gone.notification_id]
    assert Code.VERSION_GAP in codes(report)
    assert Code.TABLEAU_VIOLATED in codes(report) or Code.WRONG_RESULT in codes(report)


def test_inserting_an_event_is_located(played: Played) -> None:
    rows = played.rows()
    shoe = rows["shoe"]
    i = _index(shoe, "CardsDrawn", 2)
    # Make room by renumbering everything after i, as someone editing the table must.
    copy = shoe[i]
    shifted = [r._replace(notification_id=r.notification_id + 1) for r in shoe[i + 1 :]]
    last_version = max(r.originator_version for r in shoe if r.originator_id == copy.originator_id)
    forged = copy._replace(
        notification_id=copy.notification_id + 1, originator_version=last_version + 1
    )
    rows["shoe"] = [*shoe[: i + 1], forged, *shifted]
    report = audit_rows(rows)
    inserted = only(report, Code.ROW_INSERTED)
    assert [f.notification_id for f in inserted] == [forged.notification_id]
    assert inserted[0].shoe_id is not None
    moved = only(report, Code.ROW_MOVED)
    assert moved and "renumbered" in moved[0].message


def test_swapping_two_events_is_located(played: Played) -> None:
    rows = played.rows()
    dealing = rows["dealing"]
    i, j = _index(dealing, "Coup.CardDealt", 0), _index(dealing, "Coup.CardDealt", 1)
    a, b = dealing[i], dealing[j]
    dealing[i] = b._replace(notification_id=a.notification_id)
    dealing[j] = a._replace(notification_id=b.notification_id)
    report = audit_rows(rows)
    swapped = only(report, Code.ROWS_SWAPPED)
    assert len(swapped) == 1
    assert f"{a.notification_id} and {b.notification_id}" in swapped[0].message
    assert swapped[0].coup_id is not None


def test_removing_a_seal_breaks_the_chain(played: Played) -> None:
    played.system.command(_close_betting(played))  # more rows, then a second seal
    played.system.seal()
    rows = played.rows()
    seals = [r for r in rows["dealing"] if r.topic.endswith("SealLedger.Sealed")]
    assert len(seals) == 2
    rows["dealing"].remove(seals[0])
    report = audit_rows(rows)
    assert Code.SEAL_CHAIN_BROKEN in codes(report)


def _close_betting(played: Played) -> Any:
    from contracts import CloseBetting

    coup_id = played.system.current_coup("t1")
    assert coup_id is not None
    return CloseBetting(table_id="t1", coup_id=coup_id)


def _settled_book(rows: list[Row]) -> tuple[int, dict[str, Any]]:
    import json

    for i, row in enumerate(rows):
        if row.topic == TOPIC_SETTLED:
            state = json.loads(row.state)
            if any(line[3] == "WIN" for line in state["lines"]):
                return i, state
    raise AssertionError("no settled coup with a winner")


def test_a_payout_changed_consistently_is_caught_by_recomputation() -> None:
    rows = play_history(coups=8, tables=1, seal=False).rows()
    settlement = rows["settlement"]
    i, state = _settled_book(settlement)
    line = next(line for line in state["lines"] if line[3] == "WIN")

    def richer(changed: dict[str, Any]) -> None:
        for each in changed["lines"]:
            if each[0] == line[0]:
                each[5] += 1_000
                each[6] += 1_000
        changed["paid"] += 1_000  # totals kept consistent with the lines

    settlement[i] = edit_state(settlement[i], richer)
    report = audit_rows(rows)
    wrong = only(report, Code.WRONG_SETTLEMENT)
    assert [f.bet_id for f in wrong] == [line[0]]
    assert Code.WRONG_TOTALS not in codes(report)
    assert f"payout {line[5] + 1_000}" in wrong[0].message


def test_a_dropped_bet_settlement_is_caught_as_unsettled() -> None:
    rows = play_history(coups=8, tables=1, seal=False).rows()
    settlement = rows["settlement"]
    i, state = _settled_book(settlement)
    dropped = state["lines"][0]

    def drop(changed: dict[str, Any]) -> None:
        changed["lines"] = changed["lines"][1:]
        changed["staked"] -= dropped[4]
        changed["paid"] -= dropped[6]

    settlement[i] = edit_state(settlement[i], drop)
    report = audit_rows(rows)
    unsettled = only(report, Code.NEVER_SETTLED)
    assert [f.bet_id for f in unsettled] == [dropped[0]]
    assert all(f.severity is Severity.ERROR for f in unsettled)


def test_an_accepted_bet_outside_the_limits_is_caught() -> None:
    rows = play_history(coups=4, tables=1, seal=False).rows()
    settlement = rows["settlement"]
    i = _index(settlement, "BetsAnswered", 1)
    changed: dict[str, Any] = {}

    def huge(state: dict[str, Any]) -> None:
        line = state["lines"][0]
        line[3] = 10**9  # far above any maximum
        changed["bet"] = line[0]

    settlement[i] = edit_state(settlement[i], huge)
    report = audit_rows(rows)
    invalid = only(report, Code.ACCEPTED_INVALID)
    assert [f.bet_id for f in invalid] == [changed["bet"]]
    assert "above the table maximum" in invalid[0].message


def test_a_bet_accepted_although_placed_after_betting_closed_is_caught() -> None:
    rows = play_history(coups=4, tables=1, seal=False).rows()
    settlement = rows["settlement"]
    i = _index(settlement, "BetsAnswered", 1)
    changed: dict[str, Any] = {}

    def too_late(state: dict[str, Any]) -> None:
        late = "2099-01-01T00:00:00+00:00"
        line = state["lines"][0]
        changed["bet"] = line[0]
        if len(line) > 7:
            line[7] = late
        else:
            state["placed_at"][0] = late

    settlement[i] = edit_state(settlement[i], too_late)
    report = audit_rows(rows)
    assert [f.bet_id for f in only(report, Code.ACCEPTED_AFTER_CLOSE)] == [changed["bet"]]
