"""A studio table end to end: the simulated card-reading shoe -> the device bridge -> real
Kafka -> the shoe, dealing and settlement services (subprocesses, SQLite and PostgreSQL).

The simulated dealer deals a coup each time betting closes (as a dealer waits for "no more
bets"). Its faults: every card unreadable first, then re-scanned (each coup waits for its
cards, then deals on), a read sent twice (taken once), a card whose line is lost (a gap: the
table holds, nothing settles, until a supervisor's signed decision: a void, whose coup's bets
are refunded, or a correction naming the coup's cards, which are dealt and settled on).
Every accepted bet ends exactly once, settled on the cards the device read, or refunded. Then
the first coup's result is found wrong after settlement and corrected: each bet it changes is
paid its difference once (``BetCorrected``), and the audit checks it."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import random
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contracts import (
    INCIDENTS,
    BetAccepted,
    BetCorrected,
    BetRefunded,
    BetSettled,
    BettingClosed,
    BettingOpened,
    CardDrawn,
    CoupResolved,
    CoupSettlementCorrected,
    CoupVoided,
    IncidentRaised,
    Message,
    OpenTable,
    StudioShoeClosed,
)
from services.dev.demo.processes import LOCAL_SUPERVISOR, SERVICES, ServiceSettings, service_env
from services.dev.demo.system import LocalSystem
from services.dev.infra.kafka_clients import AUDITOR, SUPERVISOR
from services.shared.rules.cards import Card
from services.shared.rules.paytable import BetType, get_paytable
from services.shared.rules.settlement import settle_bet
from services.shared.rules.shoe import burn_count
from services.shared.rules.tableau import resolve_coup
from services.studio.simulator import Device, Fault, LoopbackServer
from services.tools.cli.main import app
from tests import kafka_logins
from tests.e2e.helpers import LIMITS, assert_books_clean, bet, new_table_id, supervisor, wait

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

TIE = ["2S", "2D", "7H", "7C"]  # a natural tie, 9 to 9
SEED = 7  # the simulated shoe's shuffle: a test's own random.Random (production: SystemRandom)


def coup_starts(order: list[Card], first: int) -> list[int]:
    """Where each coup of the shoe starts, dealt from ``first`` on without faults."""
    starts = []
    while len(order) - first >= 6:
        starts.append(first)
        first += resolve_coup(order[first:]).cards_used
    return starts


async def test_a_studio_table_deals_what_its_device_reads_and_each_bet_ends_once(
    system_settings: ServiceSettings, tmp_path: Path
) -> None:
    order = list(Device(decks=1, source=random.Random(SEED)).order)
    starts = coup_starts(order, 1 + burn_count(order[0]))
    faults = dict.fromkeys(range(52), Fault.UNREADABLE)  # every card unreadable, re-scanned
    faults[starts[0] + 1] = Fault.DOUBLED
    faults[starts[1] + 1] = Fault.DROPPED  # coup 2's second card never arrives: held, voided
    faults[starts[2] + 1] = Fault.DROPPED  # coup 3's too: held, its cards decided (corrected)
    cut_card_from_end = 52 - (starts[3] + 1)  # out in coup 4 (after the void): coup 5 is the last
    device = Device(
        decks=1, cut_card_from_end=cut_card_from_end, faults=faults, source=random.Random(SEED)
    )
    assert list(device.order) == order
    async with studio_table(system_settings, tmp_path, device) as (system, table_id):
        await wait(system, lambda: holds(system), 120, "the table to hold on the lost read")
        (hold,) = holds(system)
        assert hold.table_id == table_id and hold.message.startswith("GAP: ")
        resolved = [m for m in system.seen(CoupResolved) if m.table_id == table_id]
        assert [m.coup_number for m in resolved] == [1]  # coup 2 waits, nothing settles
        coup_2, coup_3 = f"{table_id}.coup-2", f"{table_id}.coup-3"
        await system.sender.send_now(supervisor(system).void(table_id, coup_2, "lost read"))
        await wait(system, lambda: len(holds(system)) == 2, 120, "the table to hold on coup 3")
        assert holds(system)[1].message.startswith("GAP: ")
        cards = [card.code for card in order[starts[2] : starts[3]]]  # as the video shows
        key = system.settings.data_dir.resolve() / "keys" / "supervisors"
        args = ["supervisor", "correct", "--table", table_id, "--coup", coup_3,
                "--cards", " ".join(cards), "--reason", "the video",
                "--key", str(key / f"{LOCAL_SUPERVISOR}.pem"), "--timeout", "60"]  # fmt: skip
        env = {**service_env(system.settings), **kafka_logins.env(SUPERVISOR)}
        result = await asyncio.to_thread(CliRunner().invoke, app, args, env=env)
        assert result.exit_code == 0, result.output  # it waits for coup 3 to resolve
        assert f"corrected: table {table_id} coup {coup_3} resolved" in result.output

        def shoe_closed() -> list[StudioShoeClosed]:
            return [m for m in system.seen(StudioShoeClosed) if m.table_id == table_id]

        await wait(system, shoe_closed, 180, "the studio shoe to be dealt to its end")
        await wait(system, lambda: settled_or_refunded(system, table_id), 60, "every bet")
        coup_1 = f"{table_id}.coup-1"  # its result found wrong: corrected after settlement
        dealt_1 = [card.code for card in order[starts[0] : starts[1]]]
        right = ["9S", "2D", "TH", "3C"] if dealt_1 != ["9S", "2D", "TH", "3C"] else TIE
        fix = supervisor(system).correct_result(table_id, coup_1, right, "the video")
        await system.sender.send_now(fix)
        await system.sender.send_now(fix)  # sent twice: AUTHORIZATION_REPLAYED, no effect

        def corrected() -> list[CoupSettlementCorrected]:
            return [m for m in system.seen(CoupSettlementCorrected) if m.coup_id == coup_1]

        await wait(system, corrected, 60, "the correction to be settled")

    voided = {m.coup_id for m in system.seen(CoupVoided) if m.table_id == table_id}
    assert voided == {coup_2}
    # The cards dealt are the device's, in its order, but the voided coup's: put aside (its
    # first card too, when it was read before dealing asked for it).
    codes = [card.code for card in order]
    dealt = dict(
        sorted({(m.position, m.card) for m in system.seen(CardDrawn) if m.table_id == table_id})
    )
    assert {p: dealt[p] for p in range(starts[0], starts[1])} == {
        p: codes[p] for p in range(starts[0], starts[1])
    }
    assert dealt.get(starts[1], codes[starts[1]]) == codes[starts[1]]
    after = [p for p in dealt if p > starts[1]]  # coup 3 on: the next position, the next card
    assert after == list(range(starts[1] + 1, starts[1] + 1 + len(after)))
    assert [dealt[p] for p in after] == codes[starts[2] : starts[2] + len(after)]
    (closed,) = shoe_closed()
    kept = len(closed.cards) - (starts[1] + 1)
    assert closed.cards == codes[: starts[1] + 1] + codes[starts[2] : starts[2] + kept]
    assert len(holds(system)) == 2
    coup_3_cards = [m.card for m in system.seen(CardDrawn) if m.coup_id == coup_3]
    assert sorted(set(coup_3_cards), key=coup_3_cards.index) == cards  # dealt as corrected
    assert_books_clean(system.ledger)  # each bet paid as the cards read say
    (total,) = corrected()  # once, for the correction sent twice
    settled = {m.bet_id: m for m in system.seen(BetSettled) if m.coup_id == coup_1}
    result = resolve_coup([Card.parse(code) for code in right])
    owed = {}
    for bet_id, was in settled.items():
        now = settle_bet(BetType(was.bet_type), was.stake, result, get_paytable("standard"))
        if (now.result.value, now.payout) != (was.result, was.payout):
            owed[bet_id] = now.returned - was.returned
    paid = {m.bet_id: m.difference for m in system.seen(BetCorrected) if m.coup_id == coup_1}
    assert paid == owed and total.bets == len(owed) and total.difference == sum(owed.values())
    # The audit of the run's stores passes; a card read changed in the shoe's store is found.
    report = await audit(system)
    assert report["errors"] == 0, report["findings"]
    assert report["checked"]["studio_shoes"] >= 1
    assert report["checked"]["studio_holds"] == 2
    if not system.settings.postgres:
        with sqlite3.connect(system.settings.data_dir / "shoe.sqlite") as store:
            rows = store.execute(
                "SELECT rowid, state FROM stored_events WHERE topic LIKE '%StudioShoe.ReadTaken'"
                " ORDER BY rowid"
            ).fetchall()
            row, read = [(r, json.loads(s)) for r, s in rows if b'"what":"card"' in s][8]
            read["card"] = "KS" if read["card"] != "KS" else "QS"  # a dealt card, read otherwise
            tampered_state = json.dumps(read, separators=(",", ":")).encode()
            store.execute(
                "UPDATE stored_events SET state = ? WHERE rowid = ?", (tampered_state, row)
            )
        tampered = await audit(system)
        assert "card_not_as_read" in {f["code"] for f in tampered["findings"]}


@contextlib.asynccontextmanager
async def studio_table(
    system_settings: ServiceSettings, tmp_path: Path, device: Device
) -> AsyncIterator[tuple[LocalSystem, str]]:
    """The services and the device bridge of a studio table dealt by ``device``, the table
    open; its dealer deals a coup each time betting closes, two bettors bet on each coup."""
    table_id = new_table_id()
    async with LoopbackServer(device, pace=0.01, heartbeat=0.5) as server:
        settings = dataclasses.replace(
            system_settings,
            extra={
                **system_settings.extra,
                "PB_STUDIO_TABLE": table_id,
                "PB_STUDIO_DEVICE_PORT": str(server.port),
            },
        )
        system = LocalSystem(
            settings, tmp_path / "logs", services=(*SERVICES, "studio-bridge"), follow=(INCIDENTS,)
        )

        async def dealer_and_bettors(message: Message) -> None:
            if getattr(message, "table_id", None) != table_id:
                return
            if isinstance(message, BettingOpened):
                for bettor, side in (("b1", "player"), ("b2", "banker")):
                    await system.sender.send_now(bet(table_id, message.coup_id, bettor, side, 500))
            elif isinstance(message, BettingClosed):
                server.release()  # no more bets: the dealer deals the coup

        system.reactors.append(dealer_and_bettors)
        try:
            await system.start(ready_timeout=90)
            opening = OpenTable(
                table_id=table_id,
                decks=1,
                limits=LIMITS,
                currency="EUR",
                betting_window_ms=400,
                cut_card_from_end=16,  # the device's shoe has its own cut card
                card_source="studio",
            )
            await system.sender.send_now(opening)
            yield system, table_id
        finally:
            await system.stop(timeout=15)


def holds(system: LocalSystem) -> list[IncidentRaised]:
    return [m for m in system.seen(IncidentRaised) if m.code == "STUDIO_HOLD"]


async def test_a_late_read_and_a_card_not_asked_for_hold_the_table_until_voided(
    system_settings: ServiceSettings, tmp_path: Path
) -> None:
    """Coup 1's second card arrives after the card behind it (a gap, then the late read: held,
    voided), coup 2 ends with one card more than the tableau asks (held, voided), coup 3's
    card is sent after the device's connection was closed and opened again (nothing to
    decide); then the shoe is dealt to its end, every bet once, and the audit passes."""
    seed = 5
    order = list(Device(decks=1, source=random.Random(seed)).order)
    starts = coup_starts(order, 1 + burn_count(order[0]))
    faults = {
        starts[0] + 1: Fault.OUT_OF_ORDER,
        starts[1]: Fault.EXTRA,
        starts[2] + 2: Fault.DISCONNECT,  # coup 3 starts a card later: coup 2's extra card
    }
    device = Device(decks=1, cut_card_from_end=14, faults=faults, source=random.Random(seed))
    async with studio_table(system_settings, tmp_path, device) as (system, table_id):
        for number, reason in ((1, "GAP"), (2, "UNASKED_CARD")):
            held = lambda n=number: len(holds(system)) == n  # noqa: E731
            await wait(system, held, 120, f"hold {number}")
            assert holds(system)[-1].message.startswith(f"{reason}: ")
            coup = f"{table_id}.coup-{number}"
            await system.sender.send_now(supervisor(system).void(table_id, coup, reason))
        closed = lambda: [m for m in system.seen(StudioShoeClosed) if m.table_id == table_id]  # noqa: E731
        await wait(system, closed, 180, "the studio shoe to be dealt to its end")
        await wait(system, lambda: settled_or_refunded(system, table_id), 60, "every bet")
    voided = {m.coup_id for m in system.seen(CoupVoided) if m.table_id == table_id}
    assert voided == {f"{table_id}.coup-1", f"{table_id}.coup-2"}
    assert len(holds(system)) == 2
    resolved = {m.coup_number for m in system.seen(CoupResolved) if m.table_id == table_id}
    assert min(resolved) == 3 and len(resolved) >= 3
    assert_books_clean(system.ledger)
    report = await audit(system)
    assert report["errors"] == 0, report["findings"]
    assert report["checked"]["studio_holds"] == 2


async def audit(system: LocalSystem) -> dict[str, Any]:
    """``punto-banco audit --json`` of the run's stores, as the auditor."""
    env = {**service_env(system.settings), **kafka_logins.env(AUDITOR)}
    result = await asyncio.to_thread(CliRunner().invoke, app, ["audit", "--json"], env=env)
    assert result.exit_code in (0, 1), result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def settled_or_refunded(system: LocalSystem, table_id: str) -> bool:
    """Every bet accepted at the table ended exactly once (settled, or refunded by a void)."""
    accepted = {m.bet_id for m in system.seen(BetAccepted) if m.table_id == table_id}
    ended: dict[str, set[object]] = {}
    for kind in (BetSettled, BetRefunded):
        for message in system.seen(kind):
            if message.table_id == table_id:
                ended.setdefault(message.bet_id, set()).add(message.event_id)
    assert all(len(ids) == 1 for ids in ended.values()), "a bet that ended twice"
    return bool(accepted) and set(ended) == accepted
