"""A fetched batch in one transaction deals exactly as one transaction per message."""

from __future__ import annotations

from typing import Any

from eventsourcing.persistence import Tracking

from contracts import CloseBetting, Message, VoidCoup
from services.dealing.application import DealingApplication
from tests.supervisors import keyring, supervisor
from tests.unit.dealing.harness import Driver, ScriptedShoe, open_table, shuffled_order

POPO = {"PERSISTENCE_MODULE": "eventsourcing.popo"}
TABLES = ("t1", "t2", "t3")
VARYING = {"event_id", "occurred_at", "causation_id", "correlation_id", "closes_at", "request_id"}


class ShoePerTable(ScriptedShoe):
    """Each table gets its own known orders, whatever order the shuffles come in."""

    def __init__(self) -> None:
        super().__init__([])
        self.by_table = {
            table: [shuffled_order(1, seed=10 * n + k) for k in range(3)]
            for n, table in enumerate(TABLES)
        }

    def handle(self, command: Message) -> list[Message]:
        table_id = getattr(command, "table_id", "")
        if type(command).__name__ == "ShuffleShoe" and command.shoe_id not in self.shoes:  # type: ignore[attr-defined]
            self.orders = [self.by_table[table_id].pop(0)]
        return super().handle(command)


def _play(batched: bool) -> list[dict[str, Any]]:
    app = DealingApplication(env=POPO, supervisors=keyring())
    driver = Driver(app, ShoePerTable(), batched=batched)
    position = 0

    def send(commands: list[Message]) -> None:
        nonlocal position
        if batched:
            position += len(commands)
            app.handle_batch(commands, Tracking("ops:table-commands:0", position))
        else:
            for command in commands:
                position += 1
                app.handle(command, Tracking("ops:table-commands:0", position))

    send([open_table(table, decks=1) for table in TABLES])
    driver.pump()
    for _ in range(12):  # past the cut card of a one-deck shoe: a new shoe on every table
        closing: list[CloseBetting] = []
        for table in TABLES:
            current = app.get_table(table)
            assert current is not None and current.current_coup_id is not None
            closing.append(CloseBetting(table_id=table, coup_id=current.current_coup_id))
        # A supervisor voids t1's coup after the others closed: one batch touches t1's coup
        # and table, then t2's and t3's, then t1's again (the order a batch must keep).
        void: VoidCoup = supervisor().void("t1", closing[0].coup_id, "misdeal")
        send([*closing, void])
        driver.pump()
    return [message.model_dump(mode="json", exclude=VARYING) for message in driver.published]


def test_batches_publish_the_events_in_the_order_one_by_one_would() -> None:
    batched, one_by_one = _play(batched=True), _play(batched=False)
    assert len(batched) > 250  # coups dealt, resolved, voided and reopened on three tables
    assert {m["type"] for m in batched} >= {"CoupResolved", "CoupVoided", "BettingOpened"}
    assert batched == one_by_one
