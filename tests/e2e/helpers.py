"""Helpers of the end-to-end tests: open a table, let a crowd play it, wait with a deadline,
and check the books with the demo's independent ledger."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal

from contracts import (
    BetAccepted,
    BetLimitSpec,
    BetRejected,
    BetSettled,
    BettingOpened,
    Message,
    OpenTable,
    PlaceBet,
    amount_for,
)
from services.dev.demo.ledger import Ledger, Severity
from services.dev.demo.orchestrator import DemoConfig, TableDriver
from services.dev.demo.processes import ServiceProcess, run_supervisor, service_env
from services.dev.demo.system import LocalSystem, SystemTimeout
from services.tools.admin.supervisors import (
    SupervisorSigner,
)

LIMITS = {
    name: BetLimitSpec(minimum=100, maximum=100_000)
    for name in ("player", "banker", "tie", "player_pair", "banker_pair")
}


async def wait(
    system: LocalSystem, condition: Callable[[], object], timeout: float, what: str
) -> None:
    """Pump events until ``condition()``; on timeout fail with the services' last log lines."""
    try:
        await system.until(condition, timeout, what)
    except SystemTimeout as error:
        raise AssertionError(f"{error}\n{system.log_tails(25)}") from None


def another(
    system: LocalSystem, service: str, name: str, env: Mapping[str, str] | None = None
) -> ServiceProcess:
    """Start one more process of ``service``, logged to ``<name>.log`` beside the service's log
    and stopped with the others (``env``: settings that differ from the system's)."""
    process = ServiceProcess(
        service,
        {**service_env(system.settings, service=service), **(env or {})},
        system.services[service].log_path.with_name(f"{name}.log"),
    )
    system.services[name] = process
    process.start()
    return process


def supervisor(system: LocalSystem) -> SupervisorSigner:
    """The run's supervisor (``<data dir>/keys/``, in the keyring dealing reads): signs voids."""
    return run_supervisor(system.settings)


def new_table_id() -> str:
    return f"e2e-{uuid.uuid4().hex[:10]}"


async def open_table(
    system: LocalSystem,
    *,
    decks: int = 1,
    cut_card_from_end: int = 14,
    betting_window_ms: int = 300,
    paytable: str = "standard",
    table_id: str | None = None,
) -> str:
    """Open a table and wait for its first BettingOpened; returns the table id."""
    table_id = table_id or new_table_id()
    await system.sender.send_now(
        OpenTable(
            table_id=table_id,
            decks=decks,
            paytable=paytable,
            limits=LIMITS,
            currency="EUR",
            betting_window_ms=betting_window_ms,
            cut_card_from_end=cut_card_from_end,
        )
    )
    await wait(system, lambda: betting_opened(system, table_id), 60, f"table {table_id} to open")
    return table_id


def betting_opened(system: LocalSystem, table_id: str) -> list[BettingOpened]:
    """The BettingOpened events of a table so far, by coup number, without redeliveries."""
    coups = {m.coup_id: m for m in system.seen(BettingOpened) if m.table_id == table_id}
    return sorted(coups.values(), key=lambda m: m.coup_number)


def crowd_driver(
    system: LocalSystem,
    *,
    bettors: int = 20,
    wildness: float = 0.0,
    decks: int = 1,
    cut_card_from_end: int = 14,
    betting_window_ms: int = 300,
    seed: int = 1,
) -> TableDriver:
    """The demo's table driver on one table, reacting to every event the system pumps."""
    config = DemoConfig(
        bettors=bettors,
        wildness=wildness,
        decks=decks,
        cut_card_from_end=cut_card_from_end,
        betting_window_ms=betting_window_ms,
        seed=seed,
    )
    driver = TableDriver(config, system, uuid.uuid4().hex[:10])
    system.reactors.append(driver.react)
    return driver


def bet(
    table_id: str,
    coup_id: str,
    bettor: str,
    bet_type: str,
    amount: int | Decimal | str,
    currency: str = "EUR",
    bet_id: str | None = None,
) -> PlaceBet:
    return PlaceBet(
        table_id=table_id,
        bet_id=bet_id or f"bet-{uuid.uuid4().hex[:16]}",
        coup_id=coup_id,
        bettor_id=bettor,
        bet_type=bet_type,
        amount=amount_for(amount),
        currency=currency,
    )


def assert_books_clean(ledger: Ledger) -> None:
    """No integrity error: every accepted bet settled (or refunded) exactly once, each amount as
    recomputed from the cards, coups by the tableau, shoes as committed."""
    errors = [p for p in ledger.problems(final=True) if p.severity is Severity.ERROR]
    assert not errors, f"{len(errors)} problems, first ones:\n" + "\n".join(
        str(p) for p in errors[:20]
    )


def of_type(messages: list[Message], kind: type[Message]) -> list[Message]:
    return [m for m in messages if isinstance(m, kind)]


async def place_when_known(system: LocalSystem, command: PlaceBet, timeout: float = 20) -> None:
    """Send a bet and wait for its answer; while settlement has not yet seen the coup
    (NO_SUCH_COUP: the bet overtook BettingOpened, which does not use up the bet id), send the
    same bet again, as an integrator would."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        sent_at = len(answers(system, command.bet_id))
        await system.sender.send_now(command)
        await wait(
            system,
            answered(system, command.bet_id, more_than=sent_at),
            max(1.0, deadline - loop.time()),
            f"an answer to bet {command.bet_id}",
        )
        latest = answers(system, command.bet_id)[-1]
        if not (isinstance(latest, BetRejected) and latest.reason_code == "NO_SUCH_COUP"):
            return
        assert loop.time() < deadline, f"settlement never learnt of coup {command.coup_id}"
        await asyncio.sleep(0.2)


def answers(system: LocalSystem, bet_id: str) -> list[BetAccepted | BetRejected]:
    """Every answer to a bet seen so far, in arrival order (redeliveries included)."""
    return [
        r.message
        for r in system.history
        if isinstance(r.message, BetAccepted | BetRejected) and r.message.bet_id == bet_id
    ]


def answered(system: LocalSystem, bet_id: str, more_than: int = 0) -> Callable[[], bool]:
    """A condition: the bet has more than ``more_than`` answers."""
    return lambda: len(answers(system, bet_id)) > more_than


def assert_settled_once(system: LocalSystem) -> None:
    """Every accepted bet settled exactly once, with the amount the ledger recomputes from the
    cards; no bet with two different BetAccepted or BetSettled (a redelivery keeps its id)."""
    assert_books_clean(system.ledger)
    summary = system.ledger.summary()
    assert summary.bets_settled == summary.bets_accepted > 0
    for kind in (BetAccepted, BetSettled):
        events: dict[str, set[object]] = {}
        for message in system.seen(kind):
            events.setdefault(message.bet_id, set()).add(message.event_id)
        assert all(len(ids) == 1 for ids in events.values()), f"a bet with two {kind.__name__}"
