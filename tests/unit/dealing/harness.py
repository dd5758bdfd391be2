"""A scripted shoe and a relay in memory, to drive the dealing Application in tests."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TypeVar
from uuid import uuid4

from eventsourcing.persistence import Tracking

from contracts import (
    AcceptCards,
    BetsClosed,
    BettingClosed,
    CardDrawn,
    CardsBurned,
    ClearCoup,
    CloseShoe,
    CutCardReached,
    DrawCards,
    Message,
    OpenTable,
    PositionedCard,
    ShoeClosed,
    ShoeShuffled,
    ShuffleShoe,
)
from services.dealing.application import DealingApplication
from services.dealing.messages import to_messages
from services.shared.rules.cards import Card
from services.shared.rules.shoe import (
    COMMITMENT_SCHEME,
    burn_count,
    commitment,
    composition,
    cut_card_index,
    new_salt,
    shuffle,
)

M = TypeVar("M", bound=Message)

SHOE_COMMAND_TYPES = (ShuffleShoe, DrawCards, CloseShoe, ClearCoup, AcceptCards)


def shuffled_order(decks: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [card.code for card in shuffle(composition(decks), randbelow=rng.randrange)]


@dataclass
class ShoeState:
    order: list[str]
    next_position: int
    cut_index: int
    answered: set[str] = field(default_factory=set)
    closed: bool = False


class ScriptedShoe:
    """Answers ShuffleShoe/DrawCards/CloseShoe like the shoe service, from known orders."""

    def __init__(self, orders: list[list[str]]) -> None:
        self.orders = list(orders)
        self.shoes: dict[str, ShoeState] = {}
        self.salt = new_salt()
        self.decided: list[ClearCoup | AcceptCards] = []  # supervisors' decisions (studio)

    def handle(self, command: Message) -> list[Message]:
        if isinstance(command, ShuffleShoe):
            return self._shuffle(command)
        if isinstance(command, DrawCards):
            return self._draw(command)
        if isinstance(command, CloseShoe):
            return self._close(command)
        if isinstance(command, ClearCoup | AcceptCards):
            self.decided.append(command)
            return []
        raise AssertionError(command)

    def _shuffle(self, command: ShuffleShoe) -> list[Message]:
        if command.shoe_id in self.shoes:
            return []
        order = self.orders.pop(0)
        cards = [Card.parse(c) for c in order]
        burn = burn_count(cards[0])
        cut = cut_card_index(len(order), command.cut_card_from_end)
        self.shoes[command.shoe_id] = ShoeState(order, 1 + burn, cut)
        base = {"table_id": command.table_id, "shoe_id": command.shoe_id}
        return [
            ShoeShuffled(
                **base,
                decks=command.decks,
                card_count=len(order),
                commitment=commitment(cards, self.salt),
                commitment_scheme=COMMITMENT_SCHEME,
                cut_card_index=cut,
            ),
            CardsBurned(
                **base,
                shown_card=order[0],
                burned=[PositionedCard(position=i, card=order[i]) for i in range(1, 1 + burn)],
                next_position=1 + burn,
            ),
        ]

    def _draw(self, command: DrawCards) -> list[Message]:
        shoe = self.shoes[command.shoe_id]
        if command.request_id in shoe.answered:
            return []
        shoe.answered.add(command.request_id)
        out: list[Message] = []
        for _ in range(command.count):
            position = shoe.next_position
            shoe.next_position += 1
            base = {"table_id": command.table_id, "shoe_id": command.shoe_id}
            out.append(
                CardDrawn(
                    **base,
                    coup_id=command.coup_id,
                    request_id=command.request_id,
                    position=position,
                    card=shoe.order[position],
                )
            )
            if position == shoe.cut_index:
                out.append(CutCardReached(**base, coup_id=command.coup_id, position=position))
        return out

    def _close(self, command: CloseShoe) -> list[Message]:
        shoe = self.shoes[command.shoe_id]
        if shoe.closed:
            return []
        shoe.closed = True
        return [
            ShoeClosed(
                table_id=command.table_id,
                shoe_id=command.shoe_id,
                order=shoe.order,
                salt=self.salt.hex(),
                commitment=commitment([Card.parse(c) for c in shoe.order], self.salt),
                cards_dealt=shoe.next_position,
            )
        ]


class Driver:
    """Relays the app's new events like the outbox relay, feeding the shoe's answers back.

    It plays settlement too: each BettingClosed is answered with settlement's
    BetsClosed (unless ``settlement=False``: then the test sends it, see
    :meth:`bets_closed`), which is when dealing asks the shoe for the cards.
    """

    def __init__(
        self,
        app: DealingApplication,
        shoe: ScriptedShoe,
        settlement: bool = True,
        batched: bool = False,
    ) -> None:
        self.app = app
        self.shoe = shoe
        self.settlement = settlement
        self.batched = batched  # the shoe's answers to one relay pass as one batch
        self.position = app.recorder.max_notification_id() or 0
        self.published: list[Message] = []
        self.shoe_events: list[tuple[Message, Tracking]] = []
        self.shoe_notification = 0
        self.settlement_notification = 0

    def bets_closed(self, table_id: str, coup_id: str) -> BetsClosed:
        """Settlement's BetsClosed for a coup, applied under settlement's next position."""
        message = BetsClosed(table_id=table_id, coup_id=coup_id, bets=0, staked=0, currency="EUR")
        self.settlement_notification += 1
        tracking = Tracking("settlement:punto-banco.book-events:0", self.settlement_notification)
        self.app.handle_bet_events([message], tracking)
        return message

    def pump(self) -> list[Message]:
        """Relay until quiet; the messages published in this call."""
        start = len(self.published)
        while True:
            notifications = self.app.recorder.select_notifications(self.position + 1, 1000)
            if not notifications:
                return self.published[start:]
            answers: list[tuple[Message, Tracking]] = []
            for notification in notifications:
                self.position = notification.id
                event = self.app.mapper.to_domain_event(notification)
                for message in to_messages(event):
                    self.published.append(message)
                    if isinstance(message, BettingClosed) and self.settlement:
                        self.bets_closed(message.table_id, message.coup_id)
                    if isinstance(message, SHOE_COMMAND_TYPES):
                        for answer in self.shoe.handle(message):
                            self.shoe_notification += 1
                            tracking = Tracking("shoe", self.shoe_notification)
                            self.shoe_events.append((answer, tracking))
                            if self.batched:
                                answers.append((answer, tracking))
                            else:
                                self.app.handle(answer, tracking)
            if answers:  # as the consumer hands over a fetched batch: the last position
                self.app.handle_batch([answer for answer, _ in answers], answers[-1][1])

    def close_betting_and_pump(self) -> list[Message]:
        far = datetime.now(UTC) + timedelta(days=1)
        self.app.close_expired_betting(far)
        return self.pump()

    def of_type(self, kind: type[M]) -> list[M]:
        return [m for m in self.published if isinstance(m, kind)]


def open_table(table_id: str = "t1", **overrides: object) -> OpenTable:
    fields: dict[str, object] = {
        "table_id": table_id,
        "decks": 1,
        "limits": {
            "player": {"minimum": 100, "maximum": 100_000},
            "banker": {"minimum": 100, "maximum": 100_000},
            "tie": {"minimum": 100, "maximum": 10_000},
        },
        "currency": "EUR",
        "betting_window_ms": 0,
        "cut_card_from_end": 14,
        "event_id": uuid4(),
    }
    fields.update(overrides)
    return OpenTable.model_validate(fields)
