"""The wallet outbox making a correction's calls (on an in-memory store, a scripted wallet): a
correction's debit the wallet refuses is asked for again until it is taken, its incident raised
once, not at every try; a coup voided while a correction's call is on its way rolls that call
back only once its answer is in (a rollback never overtakes the call it reverses)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from contracts import BetRefunded
from services.gateway.application import GatewayApplication
from services.gateway.batching import Batcher
from services.gateway.config import GatewayConfig
from services.gateway.domain import Kind
from services.gateway.outbox import WalletOutbox
from services.gateway.wallet import Answer
from services.shared.platform.store.incidents import IncidentLog
from tests.unit.gateway.test_gateway_bet_ids_taken import (
    REQUEST,
    deliver,
    fields,
    gateway,
)
from tests.unit.gateway.test_gateway_corrections import CORRECTION, corrected_bet


class ScriptedWallet:
    """Answers each call from a script by path (200 once the script is spent); ``hold`` keeps
    the calls of one path on their way until released."""

    def __init__(self, script: dict[str, list[int]]) -> None:
        self.script = script
        self.calls: list[tuple[str, str | None]] = []
        self.hold: str | None = None
        self.release = asyncio.Event()

    async def call(self, kind: Kind, body: dict[str, Any]) -> Answer:
        self.calls.append((kind.value, body.get("correction_id")))
        if kind.path == self.hold:
            await self.release.wait()
        statuses = self.script.get(kind.path, [])
        status = statuses.pop(0) if statuses else 200
        return Answer(status, 5_000 if status == 200 else None)

    async def close(self) -> None:
        pass


class Context:
    """What the outbox needs of a running service: the Application, called in place."""

    def __init__(self, app: GatewayApplication) -> None:
        self.app = app
        self.stopping = asyncio.Event()

    async def call(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)


def outbox_for(app: GatewayApplication, wallet: ScriptedWallet) -> tuple[WalletOutbox, Context]:
    config = GatewayConfig(wallet_retry=(0.0,))
    outbox = WalletOutbox(config, wallet, "acme")  # type: ignore[arg-type]
    ctx = Context(app)
    outbox._records = Batcher(lambda calls: ctx.call(app.record_calls, calls))
    return outbox, ctx


async def rounds(outbox: WalletOutbox, ctx: Context, app: GatewayApplication, n: int) -> None:
    """``n`` rounds of the outbox's work, each waiting for the calls it made."""
    bet = app.bet(REQUEST.bet_id)
    assert bet is not None
    for _ in range(n):
        outbox._dirty.add(bet.id)
        await outbox._work(ctx)  # type: ignore[arg-type]
        for _ in range(100):  # the calls made answer (those not held): loop turns, no clock
            await asyncio.sleep(0)


def incidents(app: GatewayApplication) -> list[str]:
    found = app.process_recorder.select_notifications(1, 1000, topics=[IncidentLog.Raised.TOPIC])
    return [app.mapper.to_domain_event(n).code for n in found]


async def test_a_refused_correction_debit_is_asked_for_until_taken_and_alarmed_once() -> None:
    app = gateway()
    corrected_bet(app)
    wallet = ScriptedWallet({"debit": [402, 402, 402]})
    outbox, ctx = outbox_for(app, wallet)
    await rounds(outbox, ctx, app, 6)
    assert wallet.calls == [("correction-debit", str(CORRECTION))] * 4  # three 402s, then 200
    assert incidents(app) == ["WALLET_CORRECTION_REFUSED"]
    bet = app.bet(REQUEST.bet_id)
    assert bet is not None and bet.done


async def test_a_void_while_a_corrections_call_is_on_its_way_rolls_it_back_after_its_answer() -> (
    None
):
    app: GatewayApplication = gateway()
    corrected_bet(app)
    wallet = ScriptedWallet({})
    wallet.hold = "debit"
    outbox, ctx = outbox_for(app, wallet)
    await rounds(outbox, ctx, app, 1)  # the correction's debit goes out, and waits
    deliver(
        app,
        BetRefunded(
            **{k: v for k, v in fields().items() if k != "bet_type"},
            stake=500,
            refunded=500,
            adjustment=500,  # stake - returned (0 after the correction)
            currency="EUR",
        ),
    )
    await rounds(outbox, ctx, app, 2)
    assert ("correction-rollback", str(CORRECTION)) not in wallet.calls  # not before its answer
    wallet.release.set()
    await rounds(outbox, ctx, app, 4)
    made = [c for c in wallet.calls if c[1] == str(CORRECTION)]
    assert made == [("correction-debit", str(CORRECTION)), ("correction-rollback", str(CORRECTION))]
    bet = app.bet(REQUEST.bet_id)
    assert bet is not None and bet.done
