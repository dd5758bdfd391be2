"""The gateway's HTTP API for casino platforms (FastAPI; OpenAPI 3.1 at ``/openapi.json``).

Every ``/v1`` request is signed (``auth.py``) by an operator the process serves, within the
operator's rate limit (429 with ``Retry-After``), with a body of at most ``PB_GATEWAY_MAX_BODY``
bytes (413) whose every field is bounded as the contracts bound it (422). An operator sees only
its own bets (404 for any other). Errors are RFC 9457 problem details
(``application/problem+json``), from one exception handler. ``docs/integrating.md`` describes
each endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, date, datetime
from http import HTTPStatus
from typing import Annotated, Any, Literal, Protocol
from urllib.parse import quote

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, Strict
from sse_starlette import EventSourceResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from contracts.envelope import MAX_STAKE, BetId, BetTypeName, Currency, Identifier, TableId
from services.gateway.application import BetRequest, Conflict, GatewayApplication
from services.gateway.auth import (
    OPERATOR_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    RateLimit,
    verify,
)
from services.gateway.config import GatewayConfig
from services.gateway.domain import FIGURES, Bet, Kind, Status, Table
from services.gateway.operators import OperatorKeys
from services.gateway.outbox import WalletOutbox, unconfirmed, unsettled_rounds

PROBLEM = "application/problem+json"
MAX_ROUND_BETS = 1000
"""The most of an operator's bets a round's answer lists (``bets_count`` says how many)."""


class Problem(Exception):
    """An RFC 9457 problem: the one way the API answers an error."""

    def __init__(
        self, status: int, title: str, detail: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.headers = headers or {}


class OperatorHandle(Protocol):
    """What the API uses of one operator's running gateway (``host.OperatorGateway``)."""

    keys: OperatorKeys
    limit: RateLimit
    outbox: WalletOutbox

    @property
    def app(self) -> GatewayApplication: ...

    def call(self, fn: Callable[..., Any], /, *args: Any) -> Awaitable[Any]: ...

    async def request(self, request: BetRequest) -> Bet: ...

    def waiter(self, bet_id: str) -> asyncio.Future[None]: ...

    def forget(self, bet_id: str, waiter: asyncio.Future[None]) -> None: ...

    def table_ids(self) -> list[str]: ...

    async def table_changed(self, table_id: str, timeout: float) -> None: ...


class Operators(Protocol):
    config: GatewayConfig

    def operator(self, name: str) -> OperatorHandle | None: ...


# -- the models (every field bounded) ------------------------------------------------------
class PlaceBetBody(BaseModel):
    """A bet (``POST /v1/bets``): amounts in integer minor units, never a float."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bet_id: BetId = Field(description="Your id for the bet, 1-64 characters: idempotency key.")
    player_id: Identifier = Field(description="Your player (the wallet's account).")
    table_id: TableId = Field(description="The table (`GET /v1/tables`).")
    coup_id: Identifier = Field(description="The coup open for bets at the table.")
    bet_type: BetTypeName = Field(description="player, banker, tie, player_pair, banker_pair.")
    amount: Annotated[int, Strict(), Field(ge=1, le=MAX_STAKE)] = Field(
        description="The stake, minor units (2500 = 25.00)."
    )
    currency: Currency = Field(description="The table's currency (ISO 4217).")


class BetAnswer(BaseModel):
    bet_id: str
    status: Literal["ACCEPTED", "REJECTED", "PENDING"]
    reason: str | None = Field(None, description="Why refused: settlement's or the wallet's code.")
    message: str | None = None


class Transaction(BaseModel):
    kind: Literal[
        "debit",
        "credit",
        "rollback",
        "credit-rollback",
        "correction-credit",
        "correction-debit",
        "correction-rollback",
    ]
    correction_id: str | None = Field(None, description="A correction's call: the correction.")
    transaction_id: str
    amount: int
    state: Literal["requested", "confirmed", "failed"]
    status: int | None = Field(None, description="The wallet's HTTP status, once answered.")
    balance: int | None = Field(None, description="The balance the wallet said (not trusted).")


class Settlement(BaseModel):
    result: Literal["WIN", "LOSE", "PUSH"]
    stake: int
    payout: int = Field(description="Net winnings.")
    returned: int = Field(description="What goes back to the player: stake + payout, or 0.")


class Refund(BaseModel):
    stake: int
    adjustment: int = Field(description="Relative to what was paid already (+ credit, - debit).")


class BetView(BetAnswer):
    player_id: str
    table_id: str
    coup_id: str
    bet_type: str
    amount: int
    currency: str
    settlement: Settlement | None = None
    refund: Refund | None = None
    transactions: list[Transaction]


class Limit(BaseModel):
    minimum: int
    maximum: int


class OpenCoup(BaseModel):
    coup_id: str
    coup_number: int
    closes_at: datetime


class TableView(BaseModel):
    table_id: str
    currency: str
    paytable: str
    limits: dict[str, Limit]
    betting_window_ms: int
    coup: OpenCoup | None = Field(description="The coup open for bets, if any.")


class Card(BaseModel):
    position: int
    side: Literal["PLAYER", "BANKER"]
    card: str


class RoundView(BaseModel):
    table_id: str
    coup_id: str
    coup_number: int | None
    closes_at: datetime | None
    cards: list[Card] = Field(description="In the order they were dealt.")
    player_total: int | None = None
    banker_total: int | None = None
    outcome: Literal["PLAYER", "BANKER", "TIE"] | None = None
    natural: bool | None = None
    player_pair: bool | None = None
    banker_pair: bool | None = None
    voided: bool = False
    void_supervisor: str | None = None
    void_reason: str | None = None
    bets_count: int
    bets: list[BetView] = Field(description=f"Your bets on it (the first {MAX_ROUND_BETS}).")


class Figures(BaseModel):
    currency: str
    bets: int
    staked: int
    returned: int = Field(description="Paid back to players by settled bets, stakes included.")
    payout: int = Field(description="Net winnings of the settled bets.")
    refunds: int
    refunded: int = Field(description="Stakes of the bets refunded (voided coups).")
    adjusted: int = Field(description="Sum of the refunds' adjustments.")
    corrections: int = Field(description="Settled bets whose result was corrected (BetCorrected).")
    corrected: int = Field(description="Sum of the corrections' differences (owed to players).")
    net: int = Field(description="staked - returned - corrected - adjusted: the operator's result.")
    debits: int
    debited: int
    credits: int
    credited: int
    rollbacks: int
    rolled_back: int
    credit_rollbacks: int
    credits_rolled_back: int
    correction_credits: int
    correction_credited: int
    correction_debits: int
    correction_debited: int
    correction_rollbacks: int
    corrections_rolled_back: int


class UnsettledRound(BaseModel):
    table_id: str
    coup_id: str
    bets: int


class Unconfirmed(BaseModel):
    bet_id: str
    kind: str
    transaction_id: str
    amount: int
    currency: str


class Reconciliation(BaseModel):
    day: date
    currencies: list[Figures]
    unsettled_rounds: list[UnsettledRound]
    unconfirmed_transactions: list[Unconfirmed]


async def authenticated(request: Request) -> OperatorHandle:
    """The signed request's operator, within its rate limit (a dependency)."""
    operators: Operators = request.app.state.operators
    config = operators.config
    body = await request.body()
    name = request.headers.get(OPERATOR_HEADER, "")
    handle = operators.operator(name) if len(name) <= 32 else None
    why = "no such operator here" if handle is None else None
    if handle is not None:
        why = verify(
            handle.keys.api_secrets,
            request.headers.get(TIMESTAMP_HEADER),
            request.headers.get(SIGNATURE_HEADER),
            request.method,
            signed_path(request.scope),
            body,
            time.time(),
            config.clock_skew,
        )
    if handle is None or why is not None:
        raise Problem(401, "Unauthorized", f"the request is not signed by an operator here ({why})")
    wait = handle.limit.take()
    if wait is not None:
        raise Problem(
            429,
            "Too many requests",
            f"operator {name} is over its rate limit; try again in {wait} s",
            {"Retry-After": str(wait)},
        )
    return handle


Caller = Annotated[OperatorHandle, Depends(authenticated)]


# -- the app -----------------------------------------------------------------------------
def create_app(operators: Operators) -> FastAPI:
    """The API of the operators ``operators`` serves."""
    config = operators.config
    app = FastAPI(
        title="punto-banco gateway",
        version="1",
        description="Punto Banco tables for casino platforms: bets, rounds, tables, "
        "reconciliation; signed requests (see docs/integrating.md).",
        openapi_url="/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    app.state.operators = operators
    app.add_middleware(BodyLimit, limit=config.max_body)

    @app.exception_handler(Problem)
    async def problem(request: Request, error: Problem) -> Response:
        return problem_response(error.status, error.title, error.detail, error.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> Response:
        found = [
            f"{'.'.join(str(p) for p in item['loc'][1:]) or 'body'}: {item['msg']}"
            for item in error.errors()[:10]
        ]
        return problem_response(422, "Invalid request", "; ".join(found))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> Response:
        title = HTTPStatus(error.status_code).phrase
        return problem_response(error.status_code, title, str(error.detail))

    @app.post(
        "/v1/bets",
        response_model=BetAnswer,
        responses={202: {"model": BetAnswer}, 409: {}, 401: {}, 413: {}, 422: {}, 429: {}},
    )
    async def place_bet(body: PlaceBetBody, operator: Caller) -> Response:
        """Place a bet and wait for settlement's answer (202 PENDING if it takes too long)."""
        request = BetRequest(**body.model_dump())
        waiter = operator.waiter(body.bet_id)
        try:
            try:
                bet: Bet = await operator.request(request)
            except Conflict:
                raise Problem(
                    409,
                    "Conflict",
                    f"bet id {body.bet_id} was used for another bet: use a new bet id",
                ) from None
            if not bet.answered:
                timeout = await answer_wait(operator, bet, config.answer_wait)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(waiter), timeout)
                bet = await operator.call(operator.app.bet, body.bet_id)
        finally:
            operator.forget(body.bet_id, waiter)
        answer = bet_answer(bet)
        if bet.answered:
            return JSONResponse(answer.model_dump(exclude_none=True))
        location = f"/v1/bets/{quote(bet.bet_id, safe='')}"
        return JSONResponse(answer.model_dump(exclude_none=True), 202, {"Location": location})

    @app.get("/v1/bets/{bet_id:path}", response_model=BetView, responses={404: {}})
    async def get_bet(bet_id: str, operator: Caller) -> BetView:
        """A bet of yours: its answer, settlement or refund, and its wallet calls."""
        found = await operator.call(operator.app.bet, bet_id) if len(bet_id) <= 64 else None
        if found is None:
            raise Problem(404, "Not found", f"you have no bet {bet_id}")
        return bet_view(found)

    @app.get("/v1/tables", response_model=list[TableView])
    async def tables(operator: Caller) -> list[TableView]:
        """The open tables: currency, paytable, limits, the coup open for bets."""
        found = await operator.call(operator.app.tables, operator.table_ids())
        return [table_view(table) for table in found if table.open and table.terms]

    @app.get(
        "/v1/tables/{table_id}/events",
        responses={200: {"content": {"text/event-stream": {}}}, 404: {}},
    )
    async def table_events(
        table_id: TableId,
        operator: Caller,
        request: Request,
        after: Annotated[int | None, Query(ge=0, le=2**53)] = None,
    ) -> Response:
        """The table's public facts as server-sent events (``id`` is the fact's number at the
        table: resume with ``Last-Event-ID`` or ``?after=``)."""
        table = await operator.call(operator.app.table, table_id)
        if table is None:
            raise Problem(404, "Not found", f"there is no table {table_id}")
        last = request.headers.get("last-event-id", "")
        start = int(last) if last.isascii() and last.isdigit() and len(last) <= 16 else after
        return EventSourceResponse(
            feed(operator, table_id, start if start is not None else table.version),
            ping=15,
        )

    @app.get("/v1/rounds/{table_id}/{coup_id}", response_model=RoundView, responses={404: {}})
    async def get_round(table_id: TableId, coup_id: str, operator: Caller) -> RoundView:
        """A round as a recall shows it, and your bets on it."""
        found: RoundView | None = await operator.call(
            round_of, operator.app, table_id, coup_id[:128]
        )
        if found is None:
            raise Problem(404, "Not found", f"no round {coup_id} at table {table_id} here")
        return found

    @app.get(
        "/v1/reconciliation",
        response_model=Reconciliation,
        responses={200: {"content": {"text/csv": {}}}},
    )
    async def reconciliation(
        day: Annotated[date, Query(description="The UTC day, YYYY-MM-DD.")],
        operator: Caller,
        request: Request,
    ) -> Response:
        """The day's figures per currency, the rounds not settled and the calls unconfirmed."""
        found = await operator.call(reconcile, operator.app, day, operator.outbox.open_bets())
        if "text/csv" in request.headers.get("accept", ""):
            return Response(reconciliation_csv(found), media_type="text/csv")
        return JSONResponse(found.model_dump(mode="json"))

    return app


# -- helpers -----------------------------------------------------------------------------
def problem_response(
    status: int, title: str, detail: str, headers: dict[str, str] | None = None
) -> Response:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    return JSONResponse(body, status, headers=headers, media_type=PROBLEM)


def signed_path(scope: Scope) -> str:
    """The path with query exactly as sent (what the signature covers)."""
    raw = scope.get("raw_path") or scope["path"].encode()
    query = scope.get("query_string", b"")
    path = raw.decode("latin-1")
    return f"{path}?{query.decode('latin-1')}" if query else path


class BodyLimit:
    """413 for a body over ``limit`` bytes, declared or streamed (never read whole)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > self.limit:
            await self._refuse(scope, send)
            return
        seen = 0

        async def bounded() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise Problem(413, "Payload too large", f"bodies are at most {self.limit} bytes")
            return message

        await self.app(scope, bounded, send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        response = problem_response(
            413, "Payload too large", f"bodies are at most {self.limit} bytes"
        )
        await response(scope, _nothing, send)


async def _nothing() -> Message:
    return {"type": "http.disconnect"}


async def answer_wait(operator: OperatorHandle, bet: Bet, longest: float) -> float:
    """How long to wait for settlement's answer: until the coup's betting closes (and a
    moment), at most ``longest``."""
    table: Table | None = await operator.call(operator.app.table, bet.table_id)
    if table is None or table.coup is None or table.coup["coup_id"] != bet.coup_id:
        return longest
    closes = datetime.fromisoformat(table.coup["closes_at"])
    left = (closes - datetime.now(UTC)).total_seconds() + 2.0
    return max(1.0, min(longest, left))


def bet_answer(bet: Bet) -> BetAnswer:
    return BetAnswer(
        bet_id=bet.bet_id,
        status=bet.status.value,
        reason=bet.reason_code if bet.status is Status.REJECTED else None,
        message=bet.message or None,
    )


def bet_view(bet: Bet) -> BetView:
    transactions = []
    for tx in bet.calls():
        confirmed = bet.confirmed.get(tx.key)
        failed = tx.kind is Kind.DEBIT and bet.status is Status.REJECTED and not bet.placed
        transactions.append(
            Transaction(
                kind=tx.kind.value,
                correction_id=tx.correction or None,
                transaction_id=tx.transaction_id,
                amount=tx.amount,
                state="confirmed" if confirmed else "failed" if failed else "requested",
                status=confirmed["status"] if confirmed else None,
                balance=confirmed["balance"] if confirmed else None,
            )
        )
    return BetView(
        **bet_answer(bet).model_dump(),
        player_id=bet.bettor_id,
        table_id=bet.table_id,
        coup_id=bet.coup_id,
        bet_type=bet.bet_type,
        amount=bet.amount,
        currency=bet.currency,
        settlement=Settlement(**bet.settlement) if bet.settlement else None,
        refund=Refund(**bet.refund) if bet.refund else None,
        transactions=transactions,
    )


def table_view(table: Table) -> TableView:
    terms = table.terms or {}
    return TableView(
        table_id=table.table_id,
        currency=terms["currency"],
        paytable=terms["paytable"],
        limits=terms["limits"],
        betting_window_ms=terms["betting_window_ms"],
        coup=OpenCoup(**table.coup) if table.coup else None,
    )


async def feed(
    operator: OperatorHandle, table_id: str, after: int
) -> AsyncIterator[dict[str, Any]]:
    """The table's facts after ``after``, then each new one as it comes."""
    while True:
        facts = await operator.call(operator.app.table_facts, table_id, after)
        for version, payload in facts:
            yield {"id": str(version), "event": payload["type"], "data": json.dumps(payload)}
            after = version
        if not facts:
            await operator.table_changed(table_id, 15.0)


def round_of(app: GatewayApplication, table_id: str, coup_id: str) -> RoundView | None:
    """The round from the table's facts, and the operator's bets on it (worker thread)."""
    table = app.table(table_id)
    span = table.rounds.get(coup_id) if table is not None else None
    if span is None:
        return None
    found: dict[str, Any] = {"cards": [], "coup_number": None, "closes_at": None}
    for _version, fact in app.table_facts(table_id, span[0] - 1, span[1], limit=100):
        kind = fact["type"]
        if kind == "BettingOpened":
            found.update(coup_number=fact["coup_number"], closes_at=fact["closes_at"])
        elif kind == "CardDealt":
            found["cards"].append(Card(**{k: fact[k] for k in ("position", "side", "card")}))
        elif kind == "CoupResolved":
            names = ("player_total", "banker_total", "outcome", "natural")
            found.update({k: fact[k] for k in (*names, "player_pair", "banker_pair")})
            found["coup_number"] = fact["coup_number"]
        elif kind == "CoupVoided":
            found.update(voided=True, void_supervisor=fact["supervisor_id"])
            found["void_reason"] = fact["reason"]
    bet_ids = app.round_bets(table_id, coup_id)
    bets = [b for b in (app.bet(bet_id) for bet_id in bet_ids[:MAX_ROUND_BETS]) if b]
    return RoundView(
        table_id=table_id,
        coup_id=coup_id,
        bets_count=len(bet_ids),
        bets=[bet_view(bet) for bet in bets],
        **found,
    )


def reconcile(app: GatewayApplication, day: date, open_bets: list[Any]) -> Reconciliation:
    """The day's figures (its ledger), and what is still open now (worker thread)."""
    ledger = app.ledger(day.isoformat())
    figures = []
    for currency, values in sorted((ledger.figures if ledger else {}).items()):
        counted = {name: values.get(name, 0) for name in FIGURES}
        net = counted["staked"] - counted["returned"] - counted["corrected"] - counted["adjusted"]
        figures.append(Figures(currency=currency, net=net, **counted))
    bets = [b for b in (app.bet_by_id(bet_id) for bet_id in open_bets) if b is not None]
    return Reconciliation(
        day=day,
        currencies=figures,
        unsettled_rounds=[UnsettledRound(**r) for r in unsettled_rounds(bets)],
        unconfirmed_transactions=[Unconfirmed(**u) for u in unconfirmed(bets)],
    )


def reconciliation_csv(found: Reconciliation) -> str:
    """The reconciliation as CSV: one ``record,currency,name,value`` row per figure, per
    unsettled round (name = table/coup, value = bets) and per unconfirmed call (name = kind
    and transaction id, value = amount)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["record", "currency", "name", "value"])
    for figures in found.currencies:
        for name, value in figures.model_dump().items():
            if name != "currency":
                writer.writerow(["figure", figures.currency, name, value])
    for unsettled in found.unsettled_rounds:
        name = f"{unsettled.table_id}/{unsettled.coup_id}"
        writer.writerow(["unsettled_round", "", _cell(name), unsettled.bets])
    for call in found.unconfirmed_transactions:
        name = f"{call.kind} {call.transaction_id} bet {call.bet_id}"
        writer.writerow(["unconfirmed", call.currency, _cell(name), call.amount])
    return out.getvalue()


_FORMULA = re.compile(r"^[=+\-@\t\r]")


def _cell(text: str) -> str:
    """A value a spreadsheet will not run as a formula (ids are the platform's own text)."""
    return "'" + text if _FORMULA.match(text) else text
