"""What dealing does with a record its consumer read outside its table's partition
(``intake.misplaced``): a table command gets a CommandRejected and nothing else (its command
id stays free, to be sent where it belongs); a service's fact is an incident."""

from __future__ import annotations

from eventsourcing.persistence import Tracking

from contracts import (
    BOOK_EVENTS,
    TABLE_COMMANDS,
    BetsClosed,
    BettingOpened,
    CloseBetting,
    CommandRejected,
    DrawCards,
    IncidentRaised,
    Message,
    TableOpened,
)
from services.dealing.application import DealingApplication
from services.dealing.messages import to_messages
from services.dealing.service import _subscriptions
from services.shared.platform.consumer import Delivery
from services.shared.platform.consumer.intake import misplaced
from services.shared.platform.relay import with_incidents
from services.shared.platform.security import Where
from tests.supervisors import keyring
from tests.unit.dealing.harness import Driver, ScriptedShoe, open_table, shuffled_order

POPO = {"PERSISTENCE_MODULE": "eventsourcing.popo"}
positions = iter(range(1, 10_000))


def deliver(app: DealingApplication, topic: str, message: Message, partition: int) -> None:
    """``message`` (keyed by its table) as dealing's consumer of ``topic``'s ``partition`` of
    three hands it over (t1 belongs in partition 1)."""
    handler = {s.topic: s.handler for s in _subscriptions(app)}[topic]
    refusal = misplaced(message, b"t1", Where("", topic, partition), 3)
    tracking = Tracking(f"{topic}:{partition}", next(positions))
    delivery = Delivery(message, topic, partition, 5, "t1", None, tracking, refusal=refusal)
    handler([delivery], tracking)


def published(app: DealingApplication, after: int = 0) -> list[Message]:
    """What the relay publishes of the events after notification ``after``."""
    mapper = with_incidents(to_messages)
    notifications = app.recorder.select_notifications(after + 1, 1000)
    return [m for n in notifications for m in mapper(app.mapper.to_domain_event(n))]


def test_a_table_command_read_in_another_partition_is_refused_and_its_id_stays_free() -> None:
    app = DealingApplication(env=POPO, supervisors=keyring())
    command = open_table()
    deliver(app, TABLE_COMMANDS, command, partition=0)
    [answer] = published(app)
    assert isinstance(answer, CommandRejected) and answer.reason_code == "WRONG_PARTITION"
    assert answer.command_id == command.event_id and "murmur2" in answer.message
    assert app.get_table("t1") is None and app.table_ids() == []
    seen = app.recorder.max_notification_id() or 0
    deliver(app, TABLE_COMMANDS, command, partition=1)  # the same command, where it belongs
    assert any(isinstance(m, TableOpened) for m in published(app, seen))


def test_a_fact_read_in_another_partition_is_an_incident_and_changes_nothing() -> None:
    app = DealingApplication(env=POPO, supervisors=keyring())
    driver = Driver(app, ScriptedShoe([shuffled_order(1, seed=7)]), settlement=False)
    app.handle(open_table(betting_window_ms=600_000))
    driver.pump()
    coup_id = driver.of_type(BettingOpened)[-1].coup_id
    app.handle(CloseBetting(table_id="t1", coup_id=coup_id))
    driver.pump()
    seen = app.recorder.max_notification_id() or 0
    closed = BetsClosed(table_id="t1", coup_id=coup_id, bets=0, staked=0, currency="EUR")
    deliver(app, BOOK_EVENTS, closed, partition=2)
    [incident] = published(app, seen)
    assert isinstance(incident, IncidentRaised) and incident.code == "WRONG_PARTITION"
    assert incident.evidence_id == closed.event_id and incident.service == "dealing"
    assert not driver.of_type(DrawCards)  # no cards asked for on a misplaced close
    deliver(app, BOOK_EVENTS, closed, partition=1)
    assert [m.coup_id for m in published(app, seen) if isinstance(m, DrawCards)] == [coup_id]
