"""Messages from dealing and bettors, and an in-memory relay, for settlement tests."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from eventsourcing.persistence import Tracking

from contracts import (
    BetLimitSpec,
    CardDrawn,
    CloseBook,
    CoupResolved,
    CoupVoided,
    Message,
    OpenBook,
    PlaceBet,
    TableClosed,
    TableOpened,
    decode,
    encode,
    topic_for,
)
from services.settlement.application import SettlementApplication
from services.settlement.messages import to_messages
from services.shared.platform.relay import wire, with_incidents
from tests.payout_oracle import oracle_returned

M = TypeVar("M", bound=Message)

POPO = {"PERSISTENCE_MODULE": "eventsourcing.popo"}  # eventsourcing's in-memory store

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
    """Dealing's side (and the shoe's cards): each message with the next tracking position of
    its source, as the consumer would hand it over."""

    def __init__(self, app: SettlementApplication, table_id: str = "t1") -> None:
        self.app = app
        self.table_id = table_id
        self.positions = itertools.count(1)
        self.marks = itertools.count(1)
        self.cards = itertools.count(1)
        self.shoe_position = itertools.count(11)  # after a burn
        self.sent: list[tuple[Message, Tracking]] = []
        self.paytable = "standard"
        self.limits: dict[str, tuple[int, int]] = dict(LIMITS)
        self.numbers: dict[str, int] = {}

    def send(
        self,
        message: Message,
        tracking: Tracking | None = None,
        placed_at: datetime | None = None,
    ) -> None:
        tracking = tracking or Tracking("dealing:punto-banco.table-events:0", next(self.positions))
        self.sent.append((message, tracking))
        self.app.handle(message, tracking, placed_at=placed_at)

    def open_table(
        self, paytable: str = "standard", limits: dict[str, tuple[int, int]] = LIMITS
    ) -> None:
        self.paytable, self.limits = paytable, dict(limits)
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

    def open_betting(
        self,
        coup_id: str,
        number: int = 1,
        closes_at: datetime = CLOSES_AT,
        at: datetime | None = None,
    ) -> None:
        """Dealing's OpenBook in the bets' partition (appended ``at``, default T0)."""
        self.numbers[coup_id] = number
        self.send(
            OpenBook(
                table_id=self.table_id,
                coup_id=coup_id,
                coup_number=number,
                shoe_id="s1",
                closes_at=closes_at,
                paytable=self.paytable,
                limits={
                    k: BetLimitSpec(minimum=lo, maximum=hi) for k, (lo, hi) in self.limits.items()
                },
                currency="EUR",
            ),
            Tracking("bet-commands:0", next(self.marks)),
            placed_at=at or T0,
        )

    def close_betting(self, coup_id: str, at: datetime = CLOSES_AT) -> None:
        """Dealing's CloseBook, appended to the bets' partition ``at`` (default: the window's
        end)."""
        self.send(
            CloseBook(table_id=self.table_id, coup_id=coup_id),
            Tracking("bet-commands:0", next(self.marks)),
            placed_at=at,
        )

    def draw(
        self, coup_id: str, cards: list[str], at: datetime = CLOSES_AT + timedelta(seconds=1)
    ) -> list[CardDrawn]:
        """The shoe's CardDrawn for ``cards`` (in shoe order), at the next positions, appended
        ``at`` (by default just after the window's end, when close_betting closes it)."""
        drawn = [
            CardDrawn(
                table_id=self.table_id,
                shoe_id="s1",
                coup_id=coup_id,
                request_id=f"{coup_id}.draw-1",
                position=next(self.shoe_position),
                card=card,
            )
            for card in cards
        ]
        for message in drawn:
            tracking = Tracking("shoe:punto-banco.shoe-events:0", next(self.cards))
            self.send(message, tracking, placed_at=at)
        return drawn

    def resolve(
        self, coup_id: str, player: list[str], banker: list[str], draw: bool = True
    ) -> CoupResolved:
        """Dealing's CoupResolved for these hands (a correct claim); first the shoe's
        CardDrawn of the same cards unless ``draw`` is False."""
        if draw:
            self.draw(coup_id, dealing_order(player, banker))
        message = claim(self.table_id, coup_id, self.numbers.get(coup_id, 1), player, banker)
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


def dealing_order(player: list[str], banker: list[str]) -> list[str]:
    """The cards of a coup in the order they left the shoe: P, B, P, B, P3, B3."""
    return [player[0], banker[0], player[1], banker[1], *player[2:], *banker[2:]]


def claim(
    table_id: str, coup_id: str, number: int, player: list[str], banker: list[str]
) -> CoupResolved:
    """The CoupResolved dealing publishes for these hands (totals and facts computed here)."""
    p, b = hand_total(player), hand_total(banker)
    return CoupResolved(
        table_id=table_id,
        coup_id=coup_id,
        coup_number=number,
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


VALUES = {"A": 1, "T": 0, "J": 0, "Q": 0, "K": 0} | {str(n): n for n in range(2, 10)}


def hand_total(cards: list[str]) -> int:
    return sum(VALUES[card[0]] for card in cards) % 10


def expected_returned(
    bet_type: str, stake: int, coup: CoupResolved, paytable: str = "standard"
) -> int:
    """What the bettor gets back, computed from the cards alone by the tests' oracle."""
    cards = dealing_order(coup.player_cards, coup.banker_cards)
    return oracle_returned(bet_type, stake, cards, paytable)


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
        amount=amount if isinstance(amount, int | str) else str(amount),
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
                event = self.app.mapper.to_domain_event(notification)
                messages = with_incidents(to_messages)(event)
                for index, message in enumerate(messages):
                    # What the relay publishes reads back as the same message, byte for
                    # byte (the bulk messages are built without validation: contracts.trusted;
                    # a fact's lines are written from a template: the same bytes).
                    data = encode(message)
                    again = decode(topic_for(message), data)
                    assert again == message and encode(again) == data, data
                    assert wire(messages, index) == data, data
                    self.published.append(message)

    def of_type(self, kind: type[M]) -> list[M]:
        return [m for m in self.published if isinstance(m, kind)]


def random_bets(
    coup_id: str, count: int, seed: int, bet_types: list[str] | None = None
) -> list[PlaceBet]:
    """``count`` bets of ``bet_types`` (default: those of LIMITS), some out of the limits."""
    rng = random.Random(seed)
    bets = []
    for n in range(count):
        kind = rng.choice(bet_types or list(LIMITS))
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
