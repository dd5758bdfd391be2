"""Formatting of the end-to-end benchmark's Markdown (pure)."""

from __future__ import annotations

from services.dev.bench.profiling import GLUE, step_shares, top_functions
from services.dev.bench.report import CellRow, cells_table, latency_summary, memory_table


def _row(**changes: object) -> CellRow:
    values: dict[str, object] = {
        "store": "sqlite",
        "tables": 10,
        "bets": 1_000,
        "coups": 2,
        "settled": 20_000,
        "seconds": 8.0,
        "bets_per_second": 2_500.0,
        "closed_p50": 0.25,
        "closed_p99": 1.5,
        "resolved_p50": 0.2,
        "resolved_p99": 1.25,
        "received_p99": 1.3,
    }
    values.update(changes)
    return CellRow(**values)  # type: ignore[arg-type]


def test_cells_table_shows_rates_and_latencies_in_ms() -> None:
    table = cells_table([_row(), _row(store="postgres", closed_p50=None, closed_p99=None)])
    lines = table.splitlines()
    assert lines[0].startswith("| Store | Tables | Bets/coup |")
    assert lines[2] == (
        "| sqlite | 10 | 1,000 | 2 | 20,000 | 8.0 | 2,500 | 250 / 1,500 | 200 / 1,250 | 1,300 |"
    )
    assert "| postgres |" in lines[3] and "| - / - |" in lines[3]


def test_latency_summary_of_nothing_is_unknown() -> None:
    assert latency_summary([]) == (None, None)
    p50, p99 = latency_summary([1.0, 2.0, 3.0])
    assert p50 == 2.0 and p99 is not None and 2.9 < p99 <= 3.0


def test_memory_table_in_mebibytes() -> None:
    text = memory_table({"sqlite": {"settlement": 150 * 2**20, "shoe": 64 * 2**20}}, "the load")
    assert "during the load" in text
    assert "| sqlite | 150 MiB | 64 MiB |" in text


def test_top_functions_counts_inclusive_and_own_samples() -> None:
    collapsed = "main;relay;send 3\nmain;worker 1\n"
    inclusive = dict(top_functions(collapsed))
    assert inclusive["main"] == 1.0 and inclusive["relay"] == 0.75
    own = dict(top_functions(collapsed, own=True))
    assert own == {"send": 0.75, "worker": 0.25}


def test_a_stack_counts_for_its_most_specific_step() -> None:
    """The same JSON encoder is the store's transcoding under eventsourcing's mapper and the
    relay's encoding under its mapping; a stack no step names is glue."""
    store = (
        "handle (services/settlement/service.py:52);"
        "Mapper.to_stored_event (eventsourcing/persistence.py:392);"
        "JSONEncoder.iterencode (json/encoder.py:258)"
    )
    relay = (
        "RecordEncoder.chunks (services/shared/platform/relay/records.py:181);"
        "JSONEncoder.iterencode (json/encoder.py:258)"
    )
    judge = "handle (services/settlement/service.py:52);BetBook._drafted (x.py:1)"
    collapsed = f"{store} 2\n{relay} 1\n{judge} 1\nEpollSelector.select (selectors.py:468) 4\n"
    assert step_shares(collapsed) == {
        "transcode": 0.25,
        "encode": 0.125,
        "judge": 0.125,
        GLUE: 0.5,
    }


def test_an_aggregates_event_method_is_judging_and_its_save_recording() -> None:
    """eventsourcing runs an ``@event`` method's body under its domain module: that is the
    service's judging; its application's save and its database are the recording."""
    judged = (
        "handle (services/settlement/service.py:52);"
        "trigger_event (eventsourcing/domain.py:1);apply (eventsourcing/domain.py:2);"
        "settle (services/shared/rules/settlement.py:108)"
    )
    saved = (
        "handle (services/settlement/service.py:52);"
        "Application.save (eventsourcing/application.py:1);"
        "SQLiteCursor.executemany (eventsourcing/sqlite.py:55)"
    )
    assert step_shares(f"{judged} 3\n{saved} 1\n") == {"judge": 0.75, "record": 0.25}
