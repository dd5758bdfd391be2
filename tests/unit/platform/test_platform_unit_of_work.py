import pytest
from eventsourcing.persistence import IntegrityError, Tracking

from tests.unit.platform.fakes import Counter, CounterApp, popo_env


def test_events_and_tracking_are_recorded_together() -> None:
    app = CounterApp(env=popo_env())
    with app.unit_of_work(Tracking("dealing:t:0", 7)) as uow:
        counter = Counter(table_id="t1")
        counter.add(table_id="t1", amount=5)
        uow.add(counter)
    assert app.tracked_position("dealing:t:0") == 7
    assert app.repository.get(counter.id).total == 5


def test_get_returns_the_same_object_within_a_unit() -> None:
    app = CounterApp(env=popo_env())
    app.save(Counter(table_id="t1"))
    with app.unit_of_work(Tracking("x:0", 1)) as uow:
        first = uow.get(Counter.create_id("t1"), Counter)
        assert first is not None
        first.add(table_id="t1", amount=1)
        second = uow.get(Counter.create_id("t1"), Counter)
        assert second is first
        second.add(table_id="t1", amount=2)
    assert app.repository.get(Counter.create_id("t1")).total == 3


def test_missing_aggregate_is_none() -> None:
    app = CounterApp(env=popo_env())
    with app.unit_of_work() as uow:
        assert uow.get(Counter.create_id("nope"), Counter) is None


def test_an_error_records_nothing() -> None:
    app = CounterApp(env=popo_env())
    app.save(Counter(table_id="t1"))
    with pytest.raises(RuntimeError), app.unit_of_work(Tracking("x:0", 1)) as uow:
        counter = uow.get(Counter.create_id("t1"), Counter)
        assert counter is not None
        counter.add(table_id="t1", amount=1)
        raise RuntimeError("boom")
    assert app.tracked_position("x:0") == 0
    assert app.repository.get(Counter.create_id("t1")).total == 0


def test_tracking_without_events_is_recorded() -> None:
    app = CounterApp(env=popo_env())
    with app.unit_of_work(Tracking("x:0", 3)):
        pass
    assert app.tracked_position("x:0") == 3


def test_single_row_tracking_refuses_an_old_position() -> None:
    app = CounterApp(
        env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": ":memory:"}
    )
    app.record_position("x:0", 5)
    with pytest.raises(IntegrityError):
        app.record_position("x:0", 5)
    with pytest.raises(IntegrityError):
        app.record_position("x:0", 4)
    app.record_position("x:0", 6)
    assert app.tracked_position("x:0") == 6


def test_save_listeners_are_called_after_saving() -> None:
    app = CounterApp(env=popo_env())
    calls: list[str] = []
    app.add_save_listener(lambda recordings: calls.append(f"saved {len(recordings)}"))
    app.save(Counter(table_id="t1"))
    with app.unit_of_work(Tracking("x:0", 1)):
        pass  # nothing new: no call
    assert calls == ["saved 1"]


def _recorded(app: CounterApp) -> list[tuple[str, int]]:
    out = []
    for notification in app.recorder.select_notifications(1, 100):
        event = app.mapper.to_domain_event(notification)
        if isinstance(event, Counter.Added):
            out.append((event.table_id, event.amount))
    return out


@pytest.mark.parametrize("checkpoints", [False, True])
def test_checkpoints_record_a_batch_in_the_order_it_happened(checkpoints: bool) -> None:
    """Without checkpoints a unit records aggregate by aggregate; with one after each
    message, in the order the messages were handled (what a batch must publish)."""
    app = CounterApp(env=popo_env())
    app.save(Counter(table_id="a"), Counter(table_id="b"))
    with app.unit_of_work(Tracking("x:0", 1)) as uow:
        for table_id, amount in [("a", 1), ("b", 2), ("a", 3)]:
            counter = uow.get(Counter.create_id(table_id), Counter)
            assert counter is not None
            counter.add(table_id=table_id, amount=amount)
            if checkpoints:
                uow.checkpoint()
    expected = [("a", 1), ("b", 2), ("a", 3)] if checkpoints else [("a", 1), ("a", 3), ("b", 2)]
    assert _recorded(app) == expected
    assert app.repository.get(Counter.create_id("a")).total == 4


def test_a_cached_aggregate_is_read_without_the_store() -> None:
    """One writer, every write through the Application: a cached aggregate is current, so a
    unit reads it without a query (the store is not fast-forwarded on each get)."""
    app = CounterApp(env=popo_env())
    counter = Counter(table_id="t1")
    app.save(counter)
    with app.unit_of_work(Tracking("x:0", 1)) as uow:
        found = uow.get(counter.id, Counter)
        assert found is not None
        found.add(table_id="t1", amount=2)
    reads: list[object] = []
    store = app.repository.event_store
    real = store.get
    store.get = lambda *a, **k: reads.append(a) or real(*a, **k)  # type: ignore[method-assign]
    with app.unit_of_work(Tracking("x:0", 2)) as uow:
        found = uow.get(counter.id, Counter)
        assert found is not None and found.total == 2 and found.version == 2
    assert reads == []


def test_a_unit_whose_commit_raised_though_it_landed_reads_the_store_next() -> None:
    """A commit may land and still report a failure: what the unit touched leaves the cache,
    so the next unit reads the aggregate as stored (not a version behind, which would fail
    on every later change)."""
    app = CounterApp(env=popo_env())
    counter = Counter(table_id="t1")
    app.save(counter)
    real = app.events.put

    def put_then_fail(*args: object, **kwargs: object) -> object:
        real(*args, **kwargs)  # type: ignore[arg-type]
        raise OSError("the connection dropped after the commit")

    app.events.put = put_then_fail  # type: ignore[method-assign]
    with pytest.raises(OSError), app.unit_of_work(Tracking("x:0", 1)) as uow:
        found = uow.get(counter.id, Counter)
        assert found is not None
        found.add(table_id="t1", amount=2)
    app.events.put = real  # type: ignore[method-assign]
    with app.unit_of_work(Tracking("x:0", 2)) as uow:
        found = uow.get(counter.id, Counter)
        assert found is not None and found.total == 2
        found.add(table_id="t1", amount=3)
    assert app.repository.get(counter.id).total == 5
