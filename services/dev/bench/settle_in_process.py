"""Time settling one busy coup, in process (no Kafka):
``python -m services.dev.bench.settle_in_process [--bets N] [--rounds R] [--sqlite F]``.

Decodes N PlaceBet from their bytes and places them on one coup (in batches, as the
consumer runtime delivers them: judged and recorded), maps the recorded answers to their
N BetAccepted, then measures CoupResolved -> every bet settled and recorded (one
transaction), and the relay's translation into N+1 contract messages. The relay maps the
events as they were saved (it is told of them: ``add_save_listener``), not decoded again from
the store; so does this. With R rounds, each figure is the best of R (a fresh store each).

Wall time on a shared machine moves by a fifth from run to run; instructions do not. With
``--count PHASE`` (decode, place, answer, settle or translate) one round runs with the
automatic collector off and PHASE inside ``functools.reduce``, the C function callgrind is
told to count in::

    PYTHONHASHSEED=0 valgrind --tool=callgrind --collect-atstart=no \
      --toggle-collect=functools_reduce python -m services.dev.bench.settle_in_process \
      --bets 3000 --count place

Its "Collected" over the bets is the phase's instructions per bet (the same to 0.1 % from run
to run, 1-3 % between builds whose code of the phase is the same).
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from functools import reduce
from pathlib import Path
from typing import Any, TypeVar

from contracts import (
    BET_COMMANDS,
    BetLimitSpec,
    CardDrawn,
    CloseBook,
    CoupResolved,
    OpenBook,
    PlaceBet,
    TableOpened,
    decode,
    encode,
)
from services.settlement.application import SettlementApplication
from services.settlement.messages import to_messages
from services.shared.platform.host import BUSY_COLLECTION, GC_THRESHOLDS
from services.shared.platform.relay import wire

BET_TYPES = ("player", "banker", "tie", "player_pair", "banker_pair")


PLAYER_NATURAL_CARDS = ("9H", "3C", "TD", "4S")
"""The shoe's cards of :func:`player_natural`, in the order they were drawn."""


def open_book(
    table_id: str, coup_id: str, shoe_id: str, closes_at: datetime, maximum: int = 1_000_000
) -> OpenBook:
    """Dealing's mark opening coup 1's book (every bet type from 1 to ``maximum``)."""
    return OpenBook(
        table_id=table_id,
        coup_id=coup_id,
        coup_number=1,
        shoe_id=shoe_id,
        closes_at=closes_at,
        paytable="standard",
        limits={t: BetLimitSpec(minimum=1, maximum=maximum) for t in BET_TYPES},
        currency="EUR",
    )


def close_book(table_id: str, coup_id: str) -> CloseBook:
    return CloseBook(table_id=table_id, coup_id=coup_id)


def shoe_cards(table_id: str, coup_id: str, shoe_id: str) -> list[CardDrawn]:
    """The shoe's CardDrawn behind :func:`player_natural` (positions after a burn of 10)."""
    return [
        CardDrawn(
            table_id=table_id,
            shoe_id=shoe_id,
            coup_id=coup_id,
            request_id=f"{coup_id}.draw-1",
            position=11 + index,
            card=card,
        )
        for index, card in enumerate(PLAYER_NATURAL_CARDS)
    ]


def player_natural(table_id: str, coup_id: str, shoe_id: str) -> CoupResolved:
    """Coup 1 of a table resolved as a Player natural 9 to 7 (no pairs)."""
    return CoupResolved(
        table_id=table_id,
        coup_id=coup_id,
        coup_number=1,
        shoe_id=shoe_id,
        player_cards=["9H", "TD"],
        banker_cards=["3C", "4S"],
        player_total=9,
        banker_total=7,
        outcome="PLAYER",
        natural=True,
        player_pair=False,
        banker_pair=False,
    )


def table_opened(table_id: str) -> TableOpened:
    """Dealing's TableOpened for a bench table: every bet type from 1 to 1,000,000 EUR cents."""
    limits = {t: BetLimitSpec(minimum=1, maximum=1_000_000) for t in BET_TYPES}
    return TableOpened(
        table_id=table_id,
        decks=8,
        paytable="standard",
        limits=limits,
        currency="EUR",
        betting_window_ms=60_000,
        cut_card_from_end=16,
    )


PHASES = ("decode", "place", "answer", "settle", "translate")

T = TypeVar("T")


def run(bets: int, env: dict[str, str], counted: str | None = None) -> dict[str, float]:
    """The in-process floor, with the collector as in a running service: on its own only at
    BUSY_COLLECTION objects, the young generation collected before CoupResolved (a service
    collects when idle, as it is while dealing draws the cards). ``counted``: the phase run
    inside ``functools.reduce``, with the automatic collector off (module docstring)."""
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    gc.set_threshold(BUSY_COLLECTION, *GC_THRESHOLDS[1:])
    if counted is not None:
        gc.disable()
    try:
        return _run(bets, env, counted)
    finally:
        if enabled:
            gc.enable()
        gc.set_threshold(*thresholds)


def best(rounds: Sequence[dict[str, float]]) -> dict[str, float]:
    """Each figure's best (least) over ``rounds``, each figure on its own (the parts of a
    floor may come from different rounds): the floor, not where a collection fell."""
    return {key: min(each[key] for each in rounds) for key in rounds[0]}


def _timed(phase: str, counted: str | None, work: Callable[[], T]) -> tuple[T, float]:
    """``work()`` and its wall time, inside ``functools.reduce`` when ``phase`` is counted."""
    twice: tuple[Any, Any] = (0, 0)  # reduce calls the function once, on the two
    started = time.perf_counter()
    done: T = reduce(lambda _, __: work(), twice) if phase == counted else work()
    return done, time.perf_counter() - started


def _messages(
    app: SettlementApplication, saved: dict[int, object], after: int, most: int
) -> list[bytes]:
    """The relay's records of the (at most ``most``) events recorded after ``after``: each
    event as saved (``saved``, by notification id), else decoded from the store."""
    payloads: list[bytes] = []
    for notification in app.recorder.select_notifications(after + 1, most):
        event = saved.pop(notification.id, None) or app.mapper.to_domain_event(notification)
        messages = to_messages(event)
        payloads += [wire(messages, index) for index in range(len(messages))]
    return payloads


def _run(bets: int, env: dict[str, str], counted: str | None = None) -> dict[str, float]:
    env = {**env, "PB_MAX_BETS_PER_COUP": str(max(bets, 1))}  # one coup takes them all
    app = SettlementApplication(env=env)
    saved: dict[int, object] = {}  # as the relay keeps them (relay.Relay._on_saved)
    app.add_save_listener(
        lambda found: saved.update((r.notification.id, r.domain_event) for r in found)
    )
    table = "bench"
    app.handle(table_opened(table))
    coup = "bench.coup-1"
    closes = datetime.now(UTC) + timedelta(hours=1)
    app.handle(open_book(table, coup, "s", closes))
    records = [
        encode(
            PlaceBet(
                table_id=table,
                bet_id=f"b{n}",
                coup_id=coup,
                bettor_id=f"p{n}",
                bet_type=BET_TYPES[n % 5],
                amount=100 + n % 900,
                currency="EUR",
            )
        )
        for n in range(bets)
    ]
    placed, decoding = _timed(  # as the consumer reads them
        "decode", counted, lambda: [decode(BET_COMMANDS, record) for record in records]
    )
    before = app.recorder.max_notification_id() or 0
    placed_at = closes - timedelta(minutes=1)

    def place() -> None:
        for first in range(0, bets, 500):  # as the consumer runtime delivers them
            batch = placed[first : first + 500]
            app.handle_batch(batch, None, [placed_at] * len(batch))

    _, placing = _timed("place", counted, place)
    answers, answering = _timed("answer", counted, lambda: _messages(app, saved, before, bets))
    assert len(answers) == bets, len(answers)
    app.handle(close_book(table, coup))
    app.handle_batch(shoe_cards(table, coup, "s"), None)
    before = app.recorder.max_notification_id() or 0
    gc.collect(0)  # a service collects while idle (host.faststream.collect_when_due)
    resolved = player_natural(table, coup, shoe_id="s")
    _, settle = _timed("settle", counted, lambda: app.handle(resolved))
    payloads, relay = _timed("translate", counted, lambda: _messages(app, saved, before, bets))
    assert len(payloads) == bets + 1, len(payloads)
    t2 = time.perf_counter()
    restarted = SettlementApplication(env=env) if "SQLITE_DBNAME" in env else None
    book = restarted.get_book(table, coup) if restarted else None
    restart = time.perf_counter() - t2
    if restarted is not None:
        assert book is not None and book.bet_count == bets
    return {
        "decode": decoding,
        "place": placing,
        "answer": answering,
        "settle": settle,
        "translate": relay,
        "restart": restart,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bets", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=1, help="best of this many (fresh stores)")
    parser.add_argument("--sqlite", type=Path, default=None, help="SQLite file (default: temp)")
    parser.add_argument("--count", choices=PHASES, help="run PHASE for callgrind (docstring)")
    args = parser.parse_args()
    rounds: list[dict[str, float]] = []
    for round_ in range(1 if args.count else args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            path = args.sqlite or Path(tmp) / "settlement.sqlite"
            if args.sqlite and args.rounds > 1:
                path = Path(f"{args.sqlite}.{round_}")  # a fresh store each round
            env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)}
            rounds.append(run(args.bets, env, args.count))
    if args.count:
        return  # callgrind's count is the figure
    figures = best(rounds)
    per_bet = {key: figures[key] / args.bets * 1e6 for key in ("decode", "place", "answer")}
    print(
        f"{args.bets} bets: decoding {per_bet['decode']:.1f} us, judging and recording "
        f"{per_bet['place']:.1f} us and mapping the answers {per_bet['answer']:.1f} us per bet, "
        f"settling (CoupResolved -> all recorded) {figures['settle'] * 1000:.0f} ms, "
        f"translating to {args.bets + 1} messages {figures['translate'] * 1000:.0f} ms, "
        f"restart (index + book replay) {figures['restart']:.2f}s"
    )


if __name__ == "__main__":
    main()
