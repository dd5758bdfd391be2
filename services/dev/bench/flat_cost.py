"""A batch's cost against what came before it: late bets and refused commands (no Kafka).

Settlement: batches of late bets name a settled coup (each refused ``BETTING_CLOSED``), on a
store where nothing came before (a fresh settled coup per run) and on one where ``earlier``
(100,000) late bets named the coup before. Dealing: batches of table commands for one table
id, each refused (``CloseBetting`` of a table never opened: ``NO_SUCH_TABLE``), on a store
with none refused before (a fresh table id per run) and on one that refused ``earlier`` for
the table id. Each on its SQLite store (the events on disk, as in the service), through the
Applications' batch entry points as the consumer hands batches over, the two stores' batches
timed in turns. A batch costs the same whatever came before: each ratio stays under
:data:`RATIO_LIMIT`.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from itertools import count
from pathlib import Path

from eventsourcing.persistence import Tracking

from contracts import CloseBetting, Message, PlaceBet
from services.dealing.application import DealingApplication
from services.dev.bench.report import Figure
from services.dev.bench.settle_in_process import (
    BET_TYPES,
    close_book,
    open_book,
    player_natural,
    shoe_cards,
    table_opened,
)
from services.settlement.application import SettlementApplication

BATCH = 500
"""Messages per measured batch (and per batch of the history before it)."""
EARLIER = 100_000
QUICK_EARLIER = 20_000
RATIO_LIMIT = 1.5
TABLE = "late"


def _sqlite(path: Path) -> dict[str, str]:
    return {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)}


def _timed(action: Callable[[], object]) -> float:
    """Seconds ``action`` took."""
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


class _Settlement:
    """A settlement Application with a table whose coups are settled on demand."""

    def __init__(self, store: Path) -> None:
        self.app = SettlementApplication(env=_sqlite(store))
        self.app.handle(table_opened(TABLE))
        self.positions = count(1)
        self.ids = count()

    def settle(self, coup: str, bets: int = 100) -> None:
        """Open ``coup``'s book, take ``bets`` bets, close it and settle it."""
        self.app.handle(open_book(TABLE, coup, f"{coup}.shoe", datetime.now(UTC) + timedelta(1)))
        self.app.handle_batch(self.bets(coup, bets), self._tracking())
        self.app.handle(close_book(TABLE, coup))
        self.app.handle_batch(shoe_cards(TABLE, coup, f"{coup}.shoe"), None)
        self.app.handle(player_natural(TABLE, coup, f"{coup}.shoe"))
        book = self.app.get_book(TABLE, coup)
        assert book is not None and book.status == "SETTLED", f"{coup} not settled"

    def bets(self, coup: str, n: int) -> list[Message]:
        return [
            PlaceBet(
                table_id=TABLE,
                coup_id=coup,
                bet_id=f"b{index}",
                bettor_id=f"p{index}",
                bet_type=BET_TYPES[index % 2],  # player / banker: each bettor bets once
                amount=100 + index % 900,
                currency="EUR",
            )
            for index in (next(self.ids) for _ in range(n))
        ]

    def late_batch(self, coup: str) -> float:
        """One batch of late bets naming ``coup`` (every one refused): seconds to handle it."""
        batch, tracking = self.bets(coup, BATCH), self._tracking()
        return _timed(partial(self.app.handle_batch, batch, tracking))

    def _tracking(self) -> Tracking:
        return Tracking("bench:bet-commands:0", next(self.positions))


class _Dealing:
    """A dealing Application refusing table commands in batches."""

    def __init__(self, store: Path) -> None:
        self.app = DealingApplication(env=_sqlite(store))
        self.positions = count(1)

    def refused_batch(self, table_id: str) -> float:
        """One batch of table commands for ``table_id`` (never opened: each refused): seconds
        to handle it."""
        batch: list[Message] = [
            CloseBetting(table_id=table_id, coup_id=f"c{n}") for n in range(BATCH)
        ]
        tracking = Tracking("bench:table-commands:0", next(self.positions))
        return _timed(partial(self.app.handle_batch, batch, tracking))


def _interleaved(
    fresh: Callable[[int], float], loaded: Callable[[], float], runs: int
) -> tuple[list[float], list[float]]:
    """Seconds of ``runs`` batches on each store, taken in turns (0 before, ``earlier``
    before, 0 before, ...): a machine busier at one moment weighs on both alike."""
    times: tuple[list[float], list[float]] = ([], [])
    for run in range(runs):
        times[0].append(fresh(run))
        times[1].append(loaded())
    return times


def settlement_times(
    earlier: int, runs: int, folder: Path, progress: Callable[[str], None]
) -> tuple[list[float], list[float]]:
    """Seconds per batch of late bets: on a store with none before (a fresh settled coup per
    run), and on one whose coup had ``earlier`` before."""
    fresh, loaded = _Settlement(folder / "fresh.sqlite"), _Settlement(folder / "loaded.sqlite")
    for run in range(runs):
        fresh.settle(f"c{run}")
    loaded.settle("c0")
    for done in range(0, earlier, BATCH):
        if done % 10_000 == 0:
            progress(f"settlement: {done:,} of {earlier:,} late bets before")
        loaded.late_batch("c0")
    times = _interleaved(
        lambda run: fresh.late_batch(f"c{run}"), partial(loaded.late_batch, "c0"), runs
    )
    fresh.app.close()
    loaded.app.close()
    return times


def dealing_times(
    earlier: int, runs: int, folder: Path, progress: Callable[[str], None]
) -> tuple[list[float], list[float]]:
    """Seconds per batch of refused commands: on a store with none before (a fresh table id
    per run), and on one that refused ``earlier`` for the table id before."""
    fresh, loaded = _Dealing(folder / "fresh.sqlite"), _Dealing(folder / "loaded.sqlite")
    for done in range(0, earlier, BATCH):
        if done % 10_000 == 0:
            progress(f"dealing: {done:,} of {earlier:,} refused commands before")
        loaded.refused_batch(TABLE)
    times = _interleaved(
        lambda run: fresh.refused_batch(f"fresh-{run}"), partial(loaded.refused_batch, TABLE), runs
    )
    fresh.app.close()
    loaded.app.close()
    return times


def figures(
    service: str, what: str, earlier: int, fresh: list[float], after: list[float]
) -> list[Figure]:
    """A service's two batch times and their ratio."""
    before_ms = statistics.median(fresh) * 1e3
    after_ms = statistics.median(after) * 1e3
    batch = f"one batch of {BATCH} {what}, SQLite, in process"
    return [
        Figure(f"{service} batch, 0 before", before_ms, "ms", runs=len(fresh), note=batch),
        Figure(
            f"{service} batch, {earlier:,} before",
            after_ms,
            "ms",
            runs=len(after),
            note=f"the same after {earlier:,} {what} before it (in turns with the first)",
        ),
        Figure(
            f"{service} ratio",
            after_ms / before_ms,
            "x",
            RATIO_LIMIT,
            runs=len(after),
            note="the second over the first: flat means the history before does not count",
        ),
    ]


def run(quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    """The group's figures (``punto-banco bench --only flat``)."""
    earlier = QUICK_EARLIER if quick else EARLIER
    runs = 7 if quick else 15
    with tempfile.TemporaryDirectory(prefix="pb-flat-") as tmp:
        (Path(tmp) / "settlement").mkdir()
        (Path(tmp) / "dealing").mkdir()
        settled = settlement_times(earlier, runs, Path(tmp) / "settlement", progress)
        dealt = dealing_times(earlier, runs, Path(tmp) / "dealing", progress)
    return [
        *figures("Settlement", "late bets on a settled coup", earlier, *settled),
        *figures("Dealing", "refused table commands for one table id", earlier, *dealt),
    ]
