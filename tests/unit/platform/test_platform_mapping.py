"""The services' mapper reads stored line arrays back as line records, bytes unchanged."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple
from uuid import uuid4

from eventsourcing.domain import Aggregate, event

from services.shared.facts import Fact
from services.shared.facts.topics import record, register_stored_topics
from services.shared.platform.store import ServiceApplication
from services.shared.platform.store.application import FactMapper, lines_of


class Stake(NamedTuple):
    bet_id: str
    amount: int


@dataclass(frozen=True)
class StakedFact(Fact):
    STORED_TOPIC: ClassVar[str] = "tests.mapping:Ledger.Staked"
    table_id: str
    lines: list[Stake]
    total: int


class Ledger(Aggregate):
    class Started(Aggregate.Created):
        table_id: str

    class Staked(StakedFact, Aggregate.Event):
        TOPIC = StakedFact.STORED_TOPIC

        def apply(self, ledger: Ledger) -> None:
            ledger.stakes.extend(self.lines)

    class Noted(Aggregate.Event):
        note: str

    @event(Started)
    def __init__(self, table_id: str) -> None:
        self.table_id = table_id
        self.stakes: list[Stake] = []

    def stake(self, *lines: Stake) -> None:
        record(
            self,
            self.Staked,
            StakedFact(self.table_id, list(lines), sum(line.amount for line in lines)),
        )


register_stored_topics(Ledger)


def app() -> ServiceApplication:
    return ServiceApplication(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})


def test_the_services_use_the_fact_mapper() -> None:
    assert isinstance(app().mapper, FactMapper)


def test_replayed_lines_are_line_records_as_they_were_live() -> None:
    service = app()
    ledger = Ledger(table_id="t1")
    ledger.stake(Stake("b1", 100), Stake("b2", 250))
    service.save(ledger)
    replayed = service.repository.get(ledger.id, version=ledger.version)  # from the store
    assert replayed.stakes == [Stake("b1", 100), Stake("b2", 250)]
    assert all(type(line) is Stake for line in replayed.stakes)
    staked: Any = service.mapper.to_domain_event(service.recorder.select_notifications(2, 1)[0])
    assert type(staked) is Ledger.Staked and type(staked.lines[0]) is Stake
    assert staked.lines[1].amount == 250 and staked.total == 350


def test_stored_bytes_round_trip_unchanged_and_keep_the_stored_topic() -> None:
    service = app()
    ledger = Ledger(table_id="t1")
    ledger.stake(Stake("b1", 100))
    service.save(ledger)
    stored = service.recorder.select_notifications(2, 1)[0]
    assert stored.topic == "tests.mapping:Ledger.Staked"
    assert stored.state.endswith(b'"table_id":"t1","lines":[["b1",100]],"total":100}')
    again = service.mapper.to_stored_event(service.mapper.to_domain_event(stored))
    assert (again.topic, again.state) == (stored.topic, stored.state)


def test_events_without_lines_are_left_as_eventsourcing_reads_them() -> None:
    assert lines_of(Ledger.Noted) == ()
    assert lines_of(Ledger.Staked) == (("lines", Stake),)
    note = Ledger.Noted(
        originator_id=uuid4(),
        originator_version=2,
        timestamp=Ledger.Noted.create_timestamp(),
        note="x",
    )
    mapper = app().mapper
    assert vars(mapper.to_domain_event(mapper.to_stored_event(note))) == vars(note)
