"""The audit of studio shoes: no commitment exists, so their cards are held to the device's reads.

A studio table beside a software one passes (streamed as the whole history gives it), its holds
are counted by reason and recalled, and each tampered read, hold, burn or closing is found under
its own code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from services.dev.simulation import LocalSystem
from services.tools.audit.auditor import audit, read_history
from services.tools.audit.findings import Code
from services.tools.audit.memory_stores import ListStore
from services.tools.audit.recall import recall, recall_text
from services.tools.audit.report import to_text
from services.tools.audit.stores import Row
from services.tools.history.from_messages import MessageFeed
from services.tools.history.views import History
from tests.unit.audit.helpers import (
    Played,
    StudioPlay,
    audit_rows,
    codes,
    edit_state,
    only,
    play_studio,
    streamed,
    whole_history,
)

State = dict[str, Any]
READ = "StudioShoe.ReadTaken"


def json_state(row: Row) -> State:
    state: State = json.loads(row.state)
    return state


def _index(rows: list[Row], topic_end: str, match: Callable[[Row, State], bool]) -> int:
    """The first row of ``topic_end`` that ``match`` takes."""
    return next(
        i
        for i, row in enumerate(rows)
        if row.topic.endswith(topic_end) and match(row, json_state(row))
    )


@pytest.fixture(scope="module")
def clean() -> Played:
    return play_studio()


@pytest.fixture(scope="module")
def held() -> Played:
    return play_studio(held=True)


def test_a_studio_table_beside_a_software_one_passes(clean: Played) -> None:
    rows = clean.rows()
    report = audit_rows(rows)
    assert report.findings == []
    assert report.checked["studio_shoes"] == 2
    assert report.checked["shoes"] == 3  # t1's software shoe too
    assert report.checked["studio_reads"] == 51
    assert "studio_holds" not in report.checked
    stores = {name: ListStore(name, list(r)) for name, r in rows.items()}
    assert whole_history(stores) == streamed(report)
    assert "2 studio shoes: no commitment" in to_text(report)


def test_recall_shows_a_studio_coups_reads_and_the_wait_for_a_rescan(clean: Played) -> None:
    history = read_history({n: ListStore(n, r) for n, r in clean.rows().items()})[0]
    first = recall(history, "s1")[0]
    reads = [(r["seq"], r["what"], r["card"], r["position"]) for r in first["reads"]]
    assert reads == [
        (5, "burn-end", None, None),
        (6, "card", "9S", 2),
        (7, "unreadable", None, None),
        (8, "button", None, None),
        (9, "card", "2D", 3),
        (10, "card", "TH", 4),
        (11, "card", "3C", 5),
        (12, "button", None, None),
    ]
    assert first["reads"][4]["waited_ms"] == 1000  # UNREADABLE at 3.5 s, the card at 4.5 s
    assert first["holds"] == []
    assert "9 CARD 2D@3 (waited 1000 ms)" in recall_text("s1", [first])
    assert "reads" not in recall(history, "t1")[0]  # a software shoe's coup: as before


def test_a_hold_is_counted_by_its_reason_and_recalled_with_its_coup(held: Played) -> None:
    rows = held.rows()
    report = audit_rows(rows)
    assert report.findings == []  # held and voided by a signed decision: nothing wrong
    assert report.checked["studio_holds"] == 1
    assert report.checked["studio_holds:GAP"] == 1
    assert "1 holds (GAP 1)" in to_text(report)
    history = read_history({n: ListStore(n, r) for n, r in rows.items()})[0]
    second = recall(history, "s1")[1]
    assert second["status"] == "voided"
    assert [(h["reason"], h["seq"]) for h in second["holds"]] == [("GAP", 19)]
    assert second["reads"][-1] == {
        "seq": 19,
        "what": "card",
        "card": "3H",
        "button": None,
        "position": None,
        "held": True,
        "waited_ms": None,
        "read_at": "2026-12-06T12:00:08.500000+00:00",  # its 17th read, 500 ms apart
    }
    assert "HELD GAP at read 19: device sequence numbers 17 to 18 missing" in recall_text(
        "s1", [second]
    )


def test_the_kafka_side_sees_the_studio_shoes_as_the_stores_do(clean: Played) -> None:
    feed = MessageFeed(History())
    for message in clean.system.published:
        feed.apply(message)
    stored = read_history({n: ListStore(n, r) for n, r in clean.rows().items()})[0]
    for key in (("s1", "s1.shoe-1"), ("s1", "s1.shoe-2")):
        shoe, truth = feed.history.shoes[key], stored.shoes[key]
        assert shoe.studio is not None and truth.studio is not None
        assert shoe.burn is not None and truth.burn is not None
        assert shoe.burn[:3] == truth.burn[:3]
        assert shoe.handed_out() == truth.handed_out()
        assert (shoe.studio.closed is None) == (truth.studio.closed is None)
    closed = feed.history.shoes[("s1", "s1.shoe-1")].studio
    assert closed is not None and closed.closed is not None
    assert len(closed.closed.cards) == closed.closed.cards_dealt == 16


def test_a_checkpoint_keeps_an_open_studio_shoe_to_read_again(tmp_path: Path) -> None:
    """Sealed mid-shoe: the checkpoint names the studio shoe as open (its rows are read again
    on resume, as a software shoe's), and the next day's audit resumes from it cleanly."""
    system = LocalSystem.in_memory()
    studio = StudioPlay(system)
    studio.burn("AH", "2S")
    studio.coup("9S", "2D", "TH", "3C")
    system.seal()
    day1 = Played(system, {}).rows()
    studio.coup("2C", "4D", "3H", "TC", "4C", "5H", cut_before=2)
    studio.coup("9C", "8D", "TS", "7D")
    system.seal()
    day2 = Played(system, {}).rows()
    checkpoint = tmp_path / "audit.checkpoint"
    assert audit({n: ListStore(n, r) for n, r in day1.items()}, checkpoint=checkpoint).passed
    opened = next(r for r in day1["shoe"] if r.topic.endswith("StudioShoe.Opened"))
    assert opened.originator_id.hex() in json.loads(checkpoint.read_text())["open"]["shoe"]
    resumed = audit({n: ListStore(n, r) for n, r in day2.items()}, checkpoint=checkpoint)
    assert resumed.passed and audit_rows(day2).passed


def _read_at(position: int) -> Callable[[Row, State], bool]:
    def match(row: Row, state: State) -> bool:
        return state["shoe_id"] == "s1.shoe-1" and state["position"] == position

    return match


def _seq(seq: int) -> Callable[[Row, State], bool]:
    def match(row: Row, state: State) -> bool:
        return state["seq"] == seq

    return match


def _first(row: Row, state: State) -> bool:
    return True


def _set(**values: Any) -> Callable[[State], None]:
    def change(state: State) -> None:
        state.update(values)

    return change


TAMPERS = {
    # The dealt card (4D at position 7) is not the one the read now says; nor is the closing.
    "a read's card changed": (READ, _read_at(7), _set(card="KS"), Code.CARD_NOT_AS_READ),
    "a read made a second 9S of one deck": (
        READ,
        _read_at(7),
        _set(card="9S"),
        Code.CARD_BEYOND_DECKS,
    ),
    "the closing's cards changed": (
        "StudioShoe.Closed",
        _first,
        lambda s: s["cards"].reverse(),
        Code.STUDIO_CLOSE_DIFFERS,
    ),
    "a read's number repeated": (READ, _seq(14), _set(seq=13), Code.READ_SEQUENCE_BROKEN),
    "a read's number moved on": (READ, _seq(14), _set(seq=16), Code.HOLD_NOT_RECORDED),
    "a read marked kept while held": (READ, _seq(9), _set(held=True), Code.HOLD_NOT_RECORDED),
    "a card read placed nowhere": (READ, _read_at(7), _set(position=None), Code.READ_NOT_ACCOUNTED),
    "a card read placed further": (READ, _read_at(7), _set(position=8), Code.READ_POSITIONS_BROKEN),
    "a signal placed as a card": (READ, _seq(7), _set(position=3), Code.READ_NOT_ACCOUNTED),
    "a burn short of the shown card's": (
        "StudioShoe.CardsBurned",
        _first,
        _set(burned_cards=[], next_position=1),
        Code.WRONG_BURN,
    ),
}


@pytest.mark.parametrize("name", TAMPERS)
def test_a_tampered_studio_record_is_found(clean: Played, name: str) -> None:
    topic_end, match, change, code = TAMPERS[name]
    rows = clean.rows()
    shoe = rows["shoe"]
    index = _index(shoe, topic_end, match)
    shoe[index] = edit_state(shoe[index], change)
    report = audit_rows(rows)
    found = only(report, code)
    assert found, f"{name}: {sorted(codes(report))}"
    assert all(f.table_id == "s1" and f.shoe_id for f in found)
    assert Code.ROW_ALTERED in codes(report)  # and the seals say which row changed


def test_a_changed_read_is_named_at_its_position(clean: Played) -> None:
    rows = clean.rows()
    shoe = rows["shoe"]
    index = _index(shoe, READ, _read_at(7))
    shoe[index] = edit_state(shoe[index], _set(card="KS"))
    report = audit_rows(rows)
    (drawn,) = only(report, Code.CARD_NOT_AS_READ)
    assert drawn.message == "drew 4D at position 7, where the device read KS"
    assert drawn.shoe_id == "s1.shoe-1" and drawn.coup_id == "s1.coup-2"
    assert Code.STUDIO_CLOSE_DIFFERS in codes(report)


def test_a_hold_deleted_or_moved_is_found(held: Played) -> None:
    rows = held.rows()
    shoe = rows["shoe"]
    index = _index(shoe, "StudioShoe.Held", _first)
    moved = dict(
        rows, shoe=[*shoe[:index], edit_state(shoe[index], _set(seq=12)), *shoe[index + 1 :]]
    )
    assert Code.HOLD_NOT_RECORDED in codes(audit_rows(moved))
    del shoe[index]
    report = audit_rows(rows)
    assert [f.notification_id for f in only(report, Code.HOLD_NOT_RECORDED)] == [
        row.notification_id for row in shoe if row.topic.endswith(READ) and json_state(row)["held"]
    ]
    assert Code.ROW_DELETED in codes(report)
