"""Honest play beside the attacks: a crowd at one table, explicit bettors at another, and the
end of a test (every table closed, every accepted bet settled once with the right amount)."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Iterable, Sequence

from contracts import (
    TABLE_EVENTS,
    BetAccepted,
    BetRejected,
    BetsClosed,
    BettingOpened,
    CloseBetting,
    CloseTable,
    CoupResolved,
    CoupSettled,
    PlaceBet,
)
from services.dev.demo.orchestrator import TableDriver
from services.dev.demo.system import LocalSystem
from tests.e2e.helpers import (
    answers,
    assert_books_clean,
    bet,
    betting_opened,
    crowd_driver,
    new_table_id,
    open_table,
    place_when_known,
)
from tests.e2e.hostile.attacker import HostileSystem, until

STAKES: tuple[tuple[str, str, int], ...] = (
    ("alice", "player", 1000),
    ("bob", "banker", 2000),
    ("carol", "tie", 500),
    ("dave", "player_pair", 300),
    ("erin", "banker_pair", 300),
)
"""Honest bettors of an explicit table: one bet of each type."""


async def pause(system: LocalSystem, seconds: float) -> None:
    """Keep pumping events for ``seconds`` (nothing awaited)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await system.pump(timeout_ms=100)


async def crowd(
    system: LocalSystem, bettors: int = 8, betting_window_ms: int = 300
) -> tuple[TableDriver, str]:
    """The demo's crowd at a table of its own, started; (driver, table id)."""
    driver = crowd_driver(system, bettors=bettors, betting_window_ms=betting_window_ms)
    await driver.start()
    [table] = driver.tables
    await until(system, lambda: betting_opened(system, table), 60, "the crowd's table to open")
    return driver, table


async def table_apart(
    system: HostileSystem, away_from: Iterable[str] = (), betting_window_ms: int = 60_000
) -> str:
    """Open a table whose partitions hold none of ``away_from``'s messages (so the relay
    traffic of those tables does not interleave with what the test forges for this one)."""
    taken = {await system.attacker.partition_of(TABLE_EVENTS, t.encode()) for t in away_from}
    for _ in range(100):
        table_id = new_table_id()
        if await system.attacker.partition_of(TABLE_EVENTS, table_id.encode()) not in taken:
            break
    return await open_table(system, table_id=table_id, betting_window_ms=betting_window_ms)


def resolved(system: LocalSystem, table_id: str) -> list[CoupResolved]:
    """The table's coups resolved so far (each once, as dealing published them)."""
    found = {m.coup_id: m for m in system.seen(CoupResolved) if m.table_id == table_id}
    return sorted(found.values(), key=lambda m: m.coup_number)


def settled(system: LocalSystem, coup_id: str) -> bool:
    return any(m.coup_id == coup_id for m in system.seen(CoupSettled))


def books_closed(system: LocalSystem, coup_id: str) -> bool:
    return any(m.coup_id == coup_id for m in system.seen(BetsClosed))


def coup_opened(system: LocalSystem, table_id: str, number: int) -> BettingOpened | None:
    return next((m for m in betting_opened(system, table_id) if m.coup_number == number), None)


def last_answer(system: LocalSystem, bet_id: str) -> BetAccepted | BetRejected | None:
    found = answers(system, bet_id)
    return found[-1] if found else None


def honest_bets(
    table_id: str, coup_id: str, stakes: Sequence[tuple[str, str, int]] = STAKES
) -> list[PlaceBet]:
    return [bet(table_id, coup_id, who, kind, amount) for who, kind, amount in stakes]


async def place_all(system: LocalSystem, bets: Sequence[PlaceBet], timeout: float = 30) -> None:
    """Place ``bets`` (the first until settlement knows the coup) and wait for every answer."""
    await place_when_known(system, bets[0])
    for command in bets[1:]:
        await system.sender.send(command)
    await system.sender.flush()
    await until(
        system,
        lambda: all(answers(system, b.bet_id) for b in bets),
        timeout,
        "an answer to every honest bet",
    )


async def accepted_all(system: LocalSystem, bets: Sequence[PlaceBet]) -> None:
    await place_all(system, bets)
    refused = [(b.bet_id, last_answer(system, b.bet_id)) for b in bets]
    assert all(isinstance(a, BetAccepted) for _, a in refused), refused


async def play_coup(
    system: LocalSystem, table_id: str, number: int, timeout: float = 60
) -> BettingOpened:
    """Honest bets on the table's coup ``number``, betting closed at once, the coup settled."""
    await until(
        system, lambda: coup_opened(system, table_id, number), timeout, f"coup {number} to open"
    )
    opened = coup_opened(system, table_id, number)
    assert opened is not None
    await accepted_all(system, honest_bets(table_id, opened.coup_id))
    await system.sender.send_now(CloseBetting(table_id=table_id, coup_id=opened.coup_id))
    await until(system, lambda: settled(system, opened.coup_id), timeout, f"coup {number} settled")
    return opened


async def crowd_goes_on(system: LocalSystem, table_id: str, coups: int = 2) -> None:
    """The crowd's table resolves ``coups`` more coups from now."""
    start = len(resolved(system, table_id))
    await until(
        system,
        lambda: len(resolved(system, table_id)) >= start + coups,
        90,
        f"{coups} more coups at the crowd's table {table_id}",
    )


async def finish(
    system: LocalSystem,
    driver: TableDriver | None = None,
    tables: Sequence[str] = (),
    timeout: float = 120,
) -> None:
    """Close every table, deal the coups under way, wait until every bet is answered and
    every accepted one settled (or refunded) and every shoe revealed; then the ledger must
    find every amount right and nothing settled twice."""
    if driver is not None:
        await driver.close_all("test over")
    for table_id in tables:
        await system.sender.send_now(CloseTable(table_id=table_id, reason="test over"))
    every = set(tables) | set(driver.tables if driver is not None else ())
    hurried: set[str] = set()

    async def hurry() -> None:  # explicit tables have long windows: close them now
        for table_id in tables:
            for opened in betting_opened(system, table_id):
                if opened.coup_id not in hurried:
                    hurried.add(opened.coup_id)
                    await system.sender.send(
                        CloseBetting(table_id=table_id, coup_id=opened.coup_id)
                    )
        await system.sender.flush()

    def drained() -> bool:
        ledger = system.ledger
        return (
            every <= ledger.closed_tables
            and not any(s.closed is None for s in ledger.shoes.values() if s.table_id in every)
            and not ledger.unanswered()
            and not ledger.unsettled()
        )

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not drained():
        await hurry()
        if loop.time() > deadline:
            ledger = system.ledger
            raise AssertionError(
                f"not drained after {timeout:.0f} s: tables open "
                f"{sorted(every - ledger.closed_tables)}, unsettled {ledger.unsettled()[:10]}, "
                f"unanswered {ledger.unanswered()[:10]}\n{system.log_tails(25)}"
            )
        await system.pump(timeout_ms=100)
    assert_books_clean(system.ledger)


async def metric(system: HostileSystem, service: str, name: str) -> float | None:
    """The sum of a Prometheus metric's samples at ``service``'s /metrics (None: unreadable)."""
    base = system.http.get(service)
    if base is None:
        return None

    def read() -> str:
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
            return str(response.read().decode())

    try:
        text = await asyncio.to_thread(read)
    except OSError:
        return None
    values = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    ]
    return sum(values) if values else None
