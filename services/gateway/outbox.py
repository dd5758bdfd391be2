"""The wallet outbox: every wallet call a bet needs, made until the wallet answers.

The calls are the bets' facts (``domain.Bet``): a call is requested by the fact that needs it
and done once its answer is recorded, so what is still to call is read from the store, never
from memory. :class:`WalletOutbox` keeps the bets that are not done yet (*open*: unanswered,
unsettled, or with a call not confirmed): those the Application saved in this process (its
save listener), and at start those with facts after the *low-water mark*, a tracking record
(``gateway:open-from``) of the first fact of the oldest open bet, moved on as bets are done.
So a restart after any crash finds every call still to make.

Each open bet that changed is read again and its due calls (``Bet.due``) are made, at most
``PB_WALLET_MAX_IN_FLIGHT`` at once, one at a time per call; an answer is recorded at once
(``GatewayApplication.record_call``), and a call without a usable answer is tried again after
``PB_WALLET_RETRY``'s next delay, for ever. A debit is tried ONCE: one this process did not
request itself (found at start: the gateway stopped while it was on its way) or without a usable
answer has an unknown fate, and is rolled back (the rollback's 404 says the wallet never had it;
a wallet refuses a debit whose rollback it took, 409). A correction's debit is retried like a
credit until the wallet takes it (a refusal is an incident, raised once per call and
process).

Without a wallet the outbox only keeps the open bets: the rounds not settled yet.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Recording

from services.gateway.application import Call, GatewayApplication
from services.gateway.batching import Batcher
from services.gateway.config import GatewayConfig
from services.gateway.domain import CORRECTION_CALLS, Bet, Kind, Status, Transaction
from services.gateway.wallet import Answer, WalletClient, judge
from services.shared.platform.host import ServiceContext

log = logging.getLogger(__name__)

LOW_WATER = "gateway:open-from"
"""Tracking name: the notification the outbox's start reads bets from."""
LOW_WATER_EVERY = 5.0
"""Seconds between moves of the low-water mark."""

CallKey = tuple[UUID, Kind, str]
"""A call of a bet: the bet, the kind of call and (a correction's call) the correction."""


@dataclass
class CallStats:
    """What the metrics and /ready read."""

    calls: dict[tuple[str, str], int] = field(default_factory=dict)  # (kind, answer) -> count
    seconds: float = 0.0  # time spent in answered calls, in all
    last_answer: float | None = None  # monotonic time of the last usable answer
    waiting_since: float | None = None  # oldest call without an answer since

    def count(self, kind: Kind, answer: str) -> None:
        key = (kind.value, answer)
        self.calls[key] = self.calls.get(key, 0) + 1


class WalletOutbox:
    """Makes one operator's wallet calls (see the module docstring)."""

    def __init__(
        self,
        config: GatewayConfig,
        client: WalletClient | None,
        operator: str,
    ) -> None:
        self.config = config
        self.client = client
        self.operator = operator
        self.open: dict[UUID, int] = {}  # open bet -> notification id of its first fact seen
        self.fresh_debits: set[UUID] = set()  # debits requested by this process
        self._dirty: set[UUID] = set()
        self._in_flight: set[CallKey] = set()
        self._attempts: dict[CallKey, int] = {}
        self._retry_at: dict[CallKey, float] = {}
        self._alarmed: dict[CallKey, tuple[str, str]] = {}  # the incident raised for a call
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots = asyncio.Semaphore(config.wallet_max_in_flight)
        self._calls: set[asyncio.Task[None]] = set()
        self.stats = CallStats()
        self.started = asyncio.Event()
        self._records: Batcher[Call, Bet | None] | None = None

    # -- what the Application saved ----------------------------------------------------
    def on_saved(self, recordings: Sequence[Recording[UUID]]) -> None:
        """The save listener (the saving thread): note the bets that changed."""
        changed = False
        for recording in recordings:
            event = recording.domain_event
            if not isinstance(event, Bet.Event):
                continue
            bet = event.originator_id
            self.open.setdefault(bet, recording.notification.id)
            if isinstance(event, Bet.Requested) and event.debit:
                self.fresh_debits.add(bet)
            self._dirty.add(bet)
            changed = True
        loop = self._loop
        if changed and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake.set)

    # -- the task --------------------------------------------------------------------------
    async def run(self, ctx: ServiceContext[GatewayApplication]) -> None:
        """The service's task: until ``ctx.stopping``."""
        self._loop = asyncio.get_running_loop()
        self._records = Batcher(lambda calls: ctx.call(ctx.app.record_calls, calls))
        ctx.app.add_save_listener(self.on_saved)
        try:
            await self._load_open(ctx)
            self.started.set()
            moved = time.monotonic()
            while not ctx.stopping.is_set():
                self._wake.clear()
                await self._work(ctx)
                if time.monotonic() - moved > LOW_WATER_EVERY:
                    await ctx.call(self._move_low_water, ctx.app)
                    moved = time.monotonic()
                await self._sleep(ctx.stopping)
        finally:
            ctx.app.remove_save_listener(self.on_saved)
            if self._calls:
                await asyncio.wait(self._calls, timeout=self.config.wallet_timeout + 1)
            if self.client is not None:
                await self.client.close()

    async def _sleep(self, stopping: asyncio.Event) -> None:
        now = time.monotonic()
        due = min(self._retry_at.values(), default=now + 1.0)
        timeout = max(0.0, min(1.0, due - now))
        waiter = asyncio.ensure_future(self._wake.wait())
        stopper = asyncio.ensure_future(stopping.wait())
        await asyncio.wait({waiter, stopper}, timeout=timeout, return_when="FIRST_COMPLETED")
        waiter.cancel()
        stopper.cancel()

    async def _load_open(self, ctx: ServiceContext[GatewayApplication]) -> None:
        """The bets with facts after the low-water mark (the open ones among them stay)."""
        position = await ctx.call(ctx.app.tracked_position, LOW_WATER)
        while True:
            ids, last = await ctx.call(ctx.app.bets_after, position)
            if last == position:
                break
            for bet_id in ids:
                self.open.setdefault(bet_id, position + 1)
                self._dirty.add(bet_id)
            position = last
        log.info("%s: %d bets to look at after the last start", self.operator, len(self._dirty))

    def _move_low_water(self, app: GatewayApplication) -> None:
        """Record where the next start reads from: the oldest open bet's first fact."""
        if self.open:
            mark = min(self.open.values()) - 1
        else:
            mark = app.process_recorder.max_notification_id() or 0
        if mark > app.tracked_position(LOW_WATER):
            app.record_position(LOW_WATER, mark)

    async def _work(self, ctx: ServiceContext[GatewayApplication]) -> None:
        now = time.monotonic()
        due = [key for key, at in self._retry_at.items() if at <= now]
        for key in due:
            del self._retry_at[key]
            self._dirty.add(key[0])
        dirty, self._dirty = list(self._dirty), set()
        bets = await ctx.call(lambda: [ctx.app.bet_by_id(bet_id) for bet_id in dirty])
        for bet_id, bet in zip(dirty, bets, strict=True):
            if bet is None or bet.done:
                self.open.pop(bet_id, None)
                for calls in (self._attempts, self._alarmed):  # a call dropped by a void
                    for key in [key for key in calls if key[0] == bet_id]:
                        del calls[key]
                continue
            if self.client is None:
                continue
            for tx in bet.due():
                key = (bet_id, *tx.key)
                if key in self._in_flight or key in self._retry_at:
                    continue
                if tx.kind is Kind.ROLLBACK and (bet_id, Kind.DEBIT, "") in self._in_flight:
                    continue  # never before the debit it reverses has its answer
                if tx.kind is Kind.CORRECTION_ROLLBACK and any(
                    (bet_id, made, tx.correction) in self._in_flight for made in CORRECTION_CALLS
                ):
                    continue  # nor before the correction's call it reverses
                if tx.kind is Kind.DEBIT and bet_id not in self.fresh_debits:
                    await self._debit_lost(ctx, bet)
                    continue
                self._in_flight.add(key)
                task = asyncio.create_task(self._call(ctx, bet, tx))
                self._calls.add(task)
                task.add_done_callback(self._calls.discard)

    async def _debit_lost(self, ctx: ServiceContext[GatewayApplication], bet: Bet) -> None:
        verdict = judge(Kind.DEBIT, Answer(None, error="the gateway stopped during the call"))
        await self._record(
            Call(
                bet.bet_id,
                Kind.DEBIT,
                verdict.outcome,
                None,
                None,
                verdict.reason_code,
                verdict.message,
            )
        )

    async def _call(
        self, ctx: ServiceContext[GatewayApplication], bet: Bet, tx: Transaction
    ) -> None:
        key = (bet.id, *tx.key)
        try:
            async with self._slots:
                if self.stats.waiting_since is None:
                    self.stats.waiting_since = time.monotonic()
                assert self.client is not None
                answer = await self.client.call(tx.kind, wallet_body(bet, tx))
            verdict = judge(tx.kind, answer)
            self.stats.count(tx.kind, str(answer.status or "none"))
            if answer.status is not None:
                self.stats.seconds += answer.seconds
            if verdict.outcome != "retry":
                self.stats.last_answer = time.monotonic()
                self.stats.waiting_since = None
            if tx.kind is Kind.DEBIT:
                self.fresh_debits.discard(bet.id)  # tried once, whatever came of it
            if verdict.outcome == "retry":
                attempt = self._attempts.get(key, 0) + 1
                self._attempts[key] = attempt
                delay = self.config.retry_delay(attempt)
                log.warning(
                    "%s: wallet %s %s for bet %s: %s; again in %.1f s",
                    self.operator,
                    tx.kind.path,
                    tx.transaction_id,
                    bet.bet_id,
                    verdict.message,
                    delay,
                )
                self._retry_at[key] = time.monotonic() + delay
                if verdict.incident is not None and self._alarmed.get(key) != verdict.incident:
                    self._alarmed[key] = verdict.incident  # once, not at every retry
                    await self._record(
                        Call(
                            bet.bet_id,
                            tx.kind,
                            "retry",
                            answer.status,
                            None,
                            incident=verdict.incident,
                            correction=tx.correction,
                        )
                    )
                return
            self._attempts.pop(key, None)
            self._alarmed.pop(key, None)
            await self._record(
                Call(
                    bet.bet_id,
                    tx.kind,
                    verdict.outcome,
                    answer.status,
                    answer.balance,
                    verdict.reason_code,
                    verdict.message,
                    verdict.incident,
                    tx.correction,
                )
            )
        except Exception:
            log.exception("%s: wallet %s for bet %s failed", self.operator, tx.kind, bet.bet_id)
            self._retry_at[key] = time.monotonic() + self.config.retry_delay(1)
        finally:
            self._in_flight.discard(key)
            self._dirty.add(bet.id)
            self._wake.set()

    async def _record(self, call: Call) -> None:
        """Record a call's outcome, with the others answered meanwhile (one transaction)."""
        assert self._records is not None
        await self._records.submit(call)

    # -- what the API and the operations endpoints read ----------------------------------
    def silent_for(self) -> float | None:
        """Seconds the wallet has left calls unanswered (None: it answers)."""
        since = self.stats.waiting_since
        if since is None or not (self._in_flight or self._retry_at):
            return None
        return time.monotonic() - since

    def unconfirmed_calls(self) -> int:
        """Calls on their way, or waiting to be tried again."""
        return len(self._in_flight) + len(self._retry_at)

    def open_bets(self) -> list[UUID]:
        return list(self.open)


def wallet_body(bet: Bet, tx: Transaction) -> dict[str, Any]:
    """The JSON body of a call (``docs/integrating.md``, the wallet contract)."""
    body: dict[str, Any] = {
        "transaction_id": tx.transaction_id,
        "bet_id": bet.bet_id,
        "player_id": bet.bettor_id,
        "amount": tx.amount,
        "currency": bet.currency,
    }
    if tx.reference is not None:
        body["reference_transaction_id"] = tx.reference
    if tx.kind.path != "rollback":
        body["table_id"] = bet.table_id
        body["coup_id"] = bet.coup_id
    if tx.correction:
        body["correction_id"] = tx.correction
    return body


def unconfirmed(bets: Sequence[Bet]) -> list[dict[str, Any]]:
    """Every call still without its answer, for the reconciliation."""
    return [
        {"bet_id": bet.bet_id, "kind": tx.kind.value, "transaction_id": tx.transaction_id}
        | {"amount": tx.amount, "currency": bet.currency}
        for bet in bets
        for tx in bet.unconfirmed()
    ]


def unsettled_rounds(bets: Sequence[Bet]) -> list[dict[str, Any]]:
    """The rounds with accepted bets of the operator not yet settled or refunded."""
    rounds: dict[tuple[str, str], int] = {}
    for bet in bets:
        if bet.status is Status.ACCEPTED and bet.settlement is None and bet.refund is None:
            key = (bet.table_id, bet.coup_id)
            rounds[key] = rounds.get(key, 0) + 1
    return [
        {"table_id": table_id, "coup_id": coup_id, "bets": count}
        for (table_id, coup_id), count in sorted(rounds.items())
    ]
