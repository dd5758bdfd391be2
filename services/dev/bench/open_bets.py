"""Memory per open bet in settlement, measured in-process with tracemalloc (no Kafka).

``python -m services.dev.bench.open_bets [--bets N]``: one coup's book on a SQLite store (the
events on disk, as in the service), Python's traced memory after a garbage collection with 0,
N and 2N bets accepted (batches of 500, as the consumer hands them over), then after the coup
is settled. The first N bets also fill the bet index's cache of recent answers (10,000, a
fixed cost once full); the next N are the book's alone: bytes per open bet. A settled book
leaves the aggregate cache: what remains per bet once settled is not the book's. ``--longest``:
every bet id and bettor id as long as the contracts admit (64 and 128 characters, each outside
the Basic Multilingual Plane, so Python keeps 4 bytes a character): the worst case.
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

from contracts import PlaceBet
from services.dev.bench.settle_in_process import (
    BET_TYPES,
    close_book,
    open_book,
    player_natural,
    shoe_cards,
    table_opened,
)
from services.settlement.application import SettlementApplication

TABLE, COUP, SHOE = "mem", "mem.coup-1", "s1"
BATCH = 500
WIDE = "\N{PLAYING CARD ACE OF SPADES}"
"""A character outside the Basic Multilingual Plane: a string holding one takes 4 bytes each."""


def _ids(n: int, longest: bool) -> tuple[str, str]:
    """Bet id and bettor id of bet ``n``; ``longest``: at the contracts' maximum lengths."""
    bet_id, bettor_id = f"bet-{n:08d}", f"bettor-{n:08d}"
    if longest:
        return bet_id.ljust(64, WIDE), bettor_id.ljust(128, WIDE)
    return bet_id, bettor_id


def _traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def _place(app: SettlementApplication, first: int, count: int, longest: bool) -> None:
    for start in range(first, first + count, BATCH):
        batch = []
        for n in range(start, min(start + BATCH, first + count)):
            bet_id, bettor_id = _ids(n, longest)
            batch.append(
                PlaceBet(
                    table_id=TABLE,
                    bet_id=bet_id,
                    coup_id=COUP,
                    bettor_id=bettor_id,
                    bet_type=BET_TYPES[n % 5],
                    amount=100 + n % 900,
                    currency="EUR",
                )
            )
        app.handle_batch(batch, None)


def measure(bets: int, store: Path, longest: bool = False) -> dict[str, float]:
    """Bytes per bet: ``first`` (0 -> N, with the answers' cache), ``open`` (N -> 2N, the book
    alone), ``settled`` (the settled book alone, per bet); ``cache``: the answers' cache, in
    bytes (what the first N cost beyond the book). Traces memory while it runs."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        return _measure(bets, store, longest)
    finally:
        if started:
            tracemalloc.stop()


def _measure(bets: int, store: Path, longest: bool) -> dict[str, float]:
    env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(store)}
    env["PB_MAX_BETS_PER_COUP"] = str(2 * bets)
    app = SettlementApplication(env=env)
    app.handle(table_opened(TABLE))
    app.handle(open_book(TABLE, COUP, SHOE, datetime.now(UTC) + timedelta(hours=1)))
    empty = _traced()
    _place(app, 0, bets, longest)
    first = _traced()
    _place(app, bets, bets, longest)
    second = _traced()
    app.handle(close_book(TABLE, COUP))
    app.handle_batch(shoe_cards(TABLE, COUP, SHOE), None)
    app.handle(player_natural(TABLE, COUP, SHOE))
    settled = _traced()
    book = app.get_book(TABLE, COUP)
    assert book is not None and book.bet_count == 2 * bets, "every bet accepted"
    app.close()
    per_open = (second - first) / bets
    cache = first - empty - per_open * bets
    return {
        "bets": bets,
        "first": (first - empty) / bets,
        "open": per_open,
        "settled": (settled - empty - cache) / (2 * bets),
        "cache": cache,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bets", type=int, default=10_000, help="N (default 10,000)")
    parser.add_argument("--longest", action="store_true", help="ids at their longest (worst)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        figures = measure(args.bets, Path(tmp) / "settlement.sqlite", args.longest)
    print(json.dumps({k: round(v) for k, v in figures.items()}))
    print(
        f"bytes per bet: {figures['open']:.0f} per open bet (the book alone), "
        f"{figures['settled']:.0f} once settled (the book out of memory); "
        f"{figures['first']:.0f} each for the first {args.bets}, with the answers' cache "
        f"({figures['cache'] / 2**20:.1f} MiB)"
    )


if __name__ == "__main__":
    main()
