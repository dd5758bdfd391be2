"""Settlement's start-up and per-bet cost against the number of bets in its store (no Kafka).

``python -m services.dev.bench.settlement_start build FILE N``: a SQLite store with N accepted
bets (1,000 per coup, in batches of 500, as the consumer hands them over), timed per bet.
``... start FILE``: open ``SettlementApplication`` on it: seconds and resident memory (MiB)
before and after. Only the Application's public entry points are used, so the same command
measures any version (run it with that version's folder on ``PYTHONPATH``).
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime, timedelta

import psutil

from contracts import BetLimitSpec, CloseBook, Message, OpenBook, PlaceBet, TableOpened
from services.settlement.application import SettlementApplication

T0 = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
LIMITS = {"player": BetLimitSpec(minimum=1, maximum=1_000_000)}
BATCH = 500


def _env(path: str) -> dict[str, str]:
    return {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": path}


def _bets(coup_id: str, first: int) -> list[PlaceBet]:
    return [
        PlaceBet(
            occurred_at=T0,
            table_id="t1",
            coup_id=coup_id,
            bet_id=f"{coup_id}-b{n}",
            bettor_id=f"p{n}",
            bet_type="player",
            amount=1000,
            currency="EUR",
        )
        for n in range(first, first + BATCH)
    ]


def _open_book(coup: int) -> OpenBook:
    return OpenBook(
        table_id="t1",
        coup_id=f"c{coup}",
        coup_number=coup + 1,
        shoe_id="s1",
        closes_at=T0 + timedelta(minutes=5),
        paytable="standard",
        limits=LIMITS,
        currency="EUR",
    )


def build(path: str, count: int) -> dict[str, float]:
    """Write ``count`` accepted bets (a multiple of 1,000); the time per bet."""
    app = SettlementApplication(env=_env(path), clock=lambda: T0)
    table = TableOpened(
        table_id="t1",
        decks=8,
        paytable="standard",
        limits=LIMITS,
        currency="EUR",
        betting_window_ms=300_000,
        cut_card_from_end=16,
    )
    app.handle(table)
    started = time.perf_counter()
    for coup in range(count // 1000):
        app.handle_batch([_open_book(coup)], None, placed_at=[T0])
        for first in range(0, 1000, BATCH):
            bets: list[Message] = list(_bets(f"c{coup}", first))
            app.handle_batch(bets, None, placed_at=[T0 + timedelta(minutes=1)] * len(bets))
        close = CloseBook(table_id="t1", coup_id=f"c{coup}")
        app.handle_batch([close], None, placed_at=[T0 + timedelta(minutes=5)])
    elapsed = time.perf_counter() - started
    app.close()
    return {"bets": count, "seconds": round(elapsed, 2), "us_per_bet": round(elapsed / count * 1e6)}


def start(path: str) -> dict[str, float]:
    """Open the Application on ``path``: seconds, and resident memory before and after."""
    process = psutil.Process()
    before = process.memory_info().rss
    started = time.perf_counter()
    app = SettlementApplication(env=_env(path))
    seconds = time.perf_counter() - started
    after = process.memory_info().rss
    app.close()
    return {
        "seconds": round(seconds, 3),
        "rss_before_mib": round(before / 2**20, 1),
        "rss_growth_mib": round((after - before) / 2**20, 1),
    }


def main(argv: list[str]) -> None:
    if len(argv) == 3 and argv[0] == "build":
        print(json.dumps(build(argv[1], int(argv[2]))))
    elif len(argv) == 2 and argv[0] == "start":
        print(json.dumps(start(argv[1])))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
