"""The dashboard's device panel: a studio table's reads, gaps, unreadable cards and holds, from
the studio reads and the incidents on Kafka; a software table has none."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from contracts import (
    BetLimitSpec,
    CutCardReached,
    IncidentRaised,
    StudioRead,
    StudioShoeOpened,
    TableOpened,
)
from services.tools.dashboard.device import STALE_AFTER
from services.tools.dashboard.model import DashboardModel
from tests.unit.dashboard.test_dashboard_model import T0, Clock, T, a_coup, opened

DEVICE = "shoe-7"


def studio_table(model: DashboardModel) -> None:
    model.apply(
        TableOpened(
            table_id=T,
            decks=6,
            paytable="standard",
            limits={"player": BetLimitSpec(minimum=100, maximum=10_000)},
            currency="EUR",
            betting_window_ms=1000,
            cut_card_from_end=16,
            card_source="studio",
        )
    )
    model.apply(StudioShoeOpened(table_id=T, shoe_id="s1", decks=6, card_count=312))


def read(seq: int, what: str, seconds: float, **fields: Any) -> StudioRead:
    return StudioRead(
        table_id=T,
        device=DEVICE,
        seq=seq,
        what=what,  # type: ignore[arg-type]
        read_at=T0 + timedelta(seconds=seconds),
        **fields,
    )


def hold(reason: str, seconds: float) -> IncidentRaised:
    return IncidentRaised(
        table_id=T,
        occurred_at=T0 + timedelta(seconds=seconds),
        service="shoe",
        code="STUDIO_HOLD",
        message=f"{reason}: shoe s1 holds (no card leaves it until a supervisor's decision): x",
    )


def table_of(model: DashboardModel) -> dict[str, Any]:
    [table] = model.snapshot()["tables"]
    return table


def test_a_studio_table_without_reads_shows_an_empty_device_panel_and_its_shoe() -> None:
    clock = Clock()
    model = DashboardModel(clock=clock)
    studio_table(model)
    table = table_of(model)
    assert table["device"] is not None
    assert (table["device"]["reads"], table["device"]["last_read_at"]) == (0, None)
    assert table["device"]["stale"] is False and table["device"]["last_hold"] is None
    shoe = table["shoe"]
    assert (shoe["studio"], shoe["number"], shoe["card_count"], shoe["cards_left"]) == (
        True,
        1,
        312,
        312,
    )
    assert shoe["cut_card_index"] is None and shoe["cards_to_cut"] is None  # not read yet
    assert shoe["closed"] is False


def test_reads_unreadables_rescans_and_gaps_are_counted_once_each() -> None:
    clock = Clock()
    model = DashboardModel(clock=clock)
    studio_table(model)
    card = read(3, "card", 2.0, card="9S")
    for message in (
        read(1, "shoe-in", 0.0),
        read(2, "unreadable", 1.0),
        card,
        card,  # a redelivery counts once
        read(4, "button", 2.5, button="RESCAN"),
        read(5, "card", 3.0, card="2D"),
        read(6, "gap", 4.0, last_seq=8),  # seq 6, 7 and 8 never received
        read(9, "card", 5.0, card="TH"),
    ):
        model.apply(message)
    clock.now = T0.timestamp() + 12.0
    device = table_of(model)["device"]
    assert device["device"] == DEVICE
    assert (device["reads"], device["cards"], device["unreadable"], device["rescans"]) == (
        6,
        3,
        1,
        1,
    )
    assert (device["gaps"], device["missing"], device["last_seq"]) == (1, 3, 9)
    assert device["last_read_at"] == (T0 + timedelta(seconds=5)).isoformat(timespec="seconds")
    assert (device["silent_for"], device["stale"]) == (7.0, False)
    clock.now = T0.timestamp() + 5.0 + STALE_AFTER + 1
    assert table_of(model)["device"]["stale"] is True


def test_a_hold_shows_its_reason_time_and_the_coups_resolved_since() -> None:
    clock = Clock()
    model = DashboardModel(clock=clock)
    studio_table(model)
    model.apply(read(6, "gap", 1.0))
    model.apply(hold("GAP", 1.5))
    device = table_of(model)["device"]
    assert device["holds"] == 1
    assert device["last_hold"] == {
        "reason": "GAP",
        "at": (T0 + timedelta(seconds=1.5)).isoformat(timespec="seconds"),
        "coups_resolved_since": 0,  # nothing since: the table may still be held
        "coups_voided_since": 0,
    }
    a_coup(model, clock)  # a supervisor corrected the coup: it resolves
    assert table_of(model)["device"]["last_hold"]["coups_resolved_since"] == 1
    model.apply(hold("SUPERVISOR_CALLED", 9.0))
    device = table_of(model)["device"]
    assert device["holds"] == 2
    assert device["last_hold"]["reason"] == "SUPERVISOR_CALLED"
    assert device["last_hold"]["coups_resolved_since"] == 0


def test_a_studio_shoe_shows_its_cut_card_once_read() -> None:
    model = DashboardModel(clock=Clock())
    studio_table(model)
    a_coup(model, Clock())  # 7 cards out: the burn and a coup
    model.apply(CutCardReached(table_id=T, shoe_id="s1", coup_id="c1", position=7))
    shoe = table_of(model)["shoe"]
    assert (shoe["cards_left"], shoe["cut_card_index"], shoe["cards_to_cut"]) == (305, 7, 0)
    assert shoe["cut_card_out"] is True


def test_a_software_table_has_no_device_panel_and_other_incidents_are_not_shown() -> None:
    model = DashboardModel(clock=Clock())
    for message in opened():
        model.apply(message)  # type: ignore[arg-type]
    for table_id in (T, "elsewhere"):
        model.apply(
            IncidentRaised(
                table_id=table_id,
                service="dealing",
                code="OUTCOME_MISMATCH",
                message="the result does not match the cards",
            )
        )
    table = table_of(model)  # no table made for "elsewhere"
    assert table["device"] is None
    assert table["shoe"]["studio"] is False and table["shoe"]["cut_card_index"] == 312 - 16
