"""Messages from dealing and bettors, and an in-memory relay, for settlement tests."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import TypeVar

from eventsourcing.persistence import Tracking

from contracts import (
    BetLimitSpec,
    BettingClosed,
    BettingOpened,
    CoupResolved,
    CoupVoided,
    Message,
    PlaceBet,
    TableClosed,
    TableOpened,
    decode,
    encode,
    topic_for,
)
from services.settlement.application import SettlementApplication
from services.settlement.messages import to_messages
from tests.unit.settlement.stores import POPO

M = TypeVar("M", bound=Message)

T0 = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
CLOSES_AT = T0 + timedelta(minutes=5)
PLACED_AT = T0 + timedelta(minutes=1)


class Clock:
    """Settlement's clock in tests: the time a bet handed over without placed_at counts
    as placed (in the service: when it was received). Starts at PLACED_AT."""

    def __init__(self, now: datetime = PLACED_AT) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def settlement_app(
    env: dict[str, str] | None = None, clock: Clock | None = None
) -> SettlementApplication:
    """A settlement application whose clock stands at PLACED_AT unless ``clock`` says else."""
    return SettlementApplication(env=env or POPO, clock=clock or Clock())


LIMITS = {
    "player": (100, 100_000),
    "banker": (100, 100_000),
    "tie": (100, 10_000),
    "player_pair": (100, 5_000),
    "banker_pair": (100, 5_000),
}


class Dealing:
    """Dealing's side: table events, each with the next tracking position of 'dealing'."""

    def __init__(self, app: SettlementApplication, table_id: str = "t1") -> None:
        self.app = app
        self.table_id = table_id
        self.positions = itertools.count(1)
        self.sent: list[tuple[Message, Tracking]] = []

    def send(self, message: Message, tracking: Tracking | None = None) -> None:
        tracking = tracking or Tracking("dealing:punto-banco.table-events:0", next(self.positions))
        self.sent.append((message, tracking))
        self.app.handle(message, tracking)

    def open_table(
        self, paytable: str = "standard", limits: dict[str, tuple[int, int]] = LIMITS
    ) -> None:
        self.send(
            TableOpened(
                table_id=self.table_id,
                decks=8,
                paytable=paytable,
                limits={k: BetLimitSpec(minimum=lo, maximum=hi) for k, (lo, hi) in limits.items()},
                currency="EUR",
                betting_window_ms=300_000,
                cut_card_from_end=16,
            )
        )

    def open_betting(self, coup_id: str, number: int = 1, closes_at: datetime = CLOSES_AT) -> None:
        self.send(
            BettingOpened(
                table_id=self.table_id,
                coup_id=coup_id,
                coup_number=number,
                shoe_id="s1",
                closes_at=closes_at,
                last_of_shoe=False,
            )
        )

    def close_betting(self, coup_id: str, at: datetime = CLOSES_AT) -> None:
        """Dealing's BettingClosed, occurred ``at`` (by default when the window ends)."""
        self.send(BettingClosed(occurred_at=at, table_id=self.table_id, coup_id=coup_id))

    def resolve(self, coup_id: str, player: list[str], banker: list[str]) -> CoupResolved:
        p, b = hand_total(player), hand_total(banker)
        message = CoupResolved(
            table_id=self.table_id,
            coup_id=coup_id,
            coup_number=1,
            shoe_id="s1",
            player_cards=player,
            banker_cards=banker,
            player_total=p,
            banker_total=b,
            outcome="PLAYER" if p > b else "BANKER" if b > p else "TIE",
            natural=hand_total(player[:2]) >= 8 or hand_total(banker[:2]) >= 8,
            player_pair=player[0][0] == player[1][0],
            banker_pair=banker[0][0] == banker[1][0],
        )
        self.send(message)
        return message

    def void(self, coup_id: str, was_resolved: bool) -> None:
        self.send(
            CoupVoided(
                table_id=self.table_id,
                coup_id=coup_id,
                supervisor_id="sup-1",
                reason="misdeal",
                was_resolved=was_resolved,
            )
        )

    def close_table(self) -> None:
        self.send(TableClosed(table_id=self.table_id))


VALUES = {"A": 1, "T": 0, "J": 0, "Q": 0, "K": 0} | {str(n): n for n in range(2, 10)}


def hand_total(cards: list[str]) -> int:
    return sum(VALUES[card[0]] for card in cards) % 10


def expected_returned(bet_type: str, stake: int, coup: CoupResolved, tie_pays: int = 8) -> int:
    """What the bettor gets back, computed here from the cards alone (not with rules)."""
    p, b = hand_total(coup.player_cards), hand_total(coup.banker_cards)
    if bet_type in ("player", "banker"):
        if p == b:
            return stake
        if bet_type == "player":
            return 2 * stake if p > b else 0
        return stake + int(Fraction(stake * 19, 20)) if b > p else 0
    if bet_type == "tie":
        return stake * (1 + tie_pays) if p == b else 0
    cards = coup.player_cards if bet_type == "player_pair" else coup.banker_cards
    return stake * 12 if cards[0][0] == cards[1][0] else 0


def bet(
    bet_id: str,
    coup_id: str = "c1",
    bettor_id: str = "alice",
    bet_type: str = "player",
    amount: object = 1000,
    currency: str = "EUR",
    table_id: str = "t1",
    occurred_at: datetime = PLACED_AT,
) -> PlaceBet:
    """A PlaceBet; ``occurred_at`` is the client's stamp (settlement does not judge by it)."""
    return PlaceBet(
        occurred_at=occurred_at,
        table_id=table_id,
        bet_id=bet_id,
        coup_id=coup_id,
        bettor_id=bettor_id,
        bet_type=bet_type,
        amount=Decimal(str(amount)),
        currency=currency,
    )


@dataclass
class Relay:
    """Reads the app's notification log like the outbox relay and keeps the messages."""

    app: SettlementApplication
    position: int = 0

    def __post_init__(self) -> None:
        self.published: list[Message] = []

    def pump(self) -> list[Message]:
        start = len(self.published)
        while True:
            batch = self.app.recorder.select_notifications(self.position + 1, 1000)
            if not batch:
                return self.published[start:]
            for notification in batch:
                self.position = notification.id
                for message in to_messages(self.app.mapper.to_domain_event(notification)):
                    # What the relay publishes reads back as the same message, byte for
                    # byte (the bulk messages are built without validation: contracts.trusted).
                    data = encode(message)
                    again = decode(topic_for(message), data)
                    assert again == message and encode(again) == data, data
                    self.published.append(message)

    def of_type(self, kind: type[M]) -> list[M]:
        return [m for m in self.published if isinstance(m, kind)]


def random_bets(coup_id: str, count: int, seed: int) -> list[PlaceBet]:
    rng = random.Random(seed)
    bets = []
    for n in range(count):
        kind = rng.choice(list(LIMITS))
        amount = rng.choice([50, 100, 125, 999, 1000, 2501, 7777, 20_000, 150_000])
        bets.append(
            bet(
                f"{coup_id}-b{n}",
                coup_id=coup_id,
                bettor_id=f"bettor-{rng.randrange(12)}",
                bet_type=kind,
                amount=amount,
            )
        )
    return bets
