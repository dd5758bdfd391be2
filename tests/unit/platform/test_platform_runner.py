"""A service without Kafka: application, tasks and shutdown."""

import gc
import weakref
from collections.abc import Iterator

import pytest

from services.shared.platform.host import KafkaService, ServiceDefinition, faststream
from services.shared.platform.settings import Settings
from tests.unit.platform.fakes import CounterApp


def test_settings_must_match_the_service() -> None:
    definition = ServiceDefinition(name="counter", application=lambda env: CounterApp(env=env))
    with pytest.raises(ValueError, match="not 'counter'"):
        KafkaService(definition, Settings.from_env("shoe", {}))


def test_the_platform_modules_import_each_other_without_cycles() -> None:
    """No import cycle among services.shared.platform's modules (type-only imports count)."""
    import grimp

    graph = grimp.build_graph("services", include_external_packages=False)
    package = "services.shared.platform"
    modules = {m for m in graph.modules if m.startswith(package + ".")}
    cycles = [
        (module, other)
        for module in modules
        for other in graph.find_modules_directly_imported_by(module)
        if other in modules
        and graph.chain_exists(importer=other, imported=module, as_packages=False)
    ]
    assert cycles == []


class _Offsets:
    """A batch processor as the service's fetch sees it."""

    def __init__(self) -> None:
        self.commits = 0

    async def commit_pending(self) -> None:
        self.commits += 1


async def test_a_fetch_that_brings_nothing_commits_the_offsets_handled() -> None:
    definition = ServiceDefinition(name="counter", application=lambda env: CounterApp(env=env))
    service = KafkaService(definition, Settings.from_env("counter", {}))
    offsets = _Offsets()
    service.consumer = offsets  # type: ignore[assignment]
    await service._fetched(3)
    assert offsets.commits == 0  # busy: records in hand
    await service._fetched(0)
    assert offsets.commits == 1  # idle: commit now


class _Node:
    me: object = None


class _Service:
    """A running service as the collector sees it: idle or not."""

    def __init__(self, idle: bool = True) -> None:
        self.now_idle = idle

    def idle(self) -> bool:
        return self.now_idle


@pytest.fixture
def collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No service runs in the process (whatever ran before); the collector as it was after."""
    monkeypatch.setattr(faststream, "_running", [])
    thresholds = gc.get_threshold()
    gc.collect()  # every generation's count from 0
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_a_stopped_services_objects_are_collected_while_others_run_in_the_process(
    collector: None,
) -> None:
    """Running services' objects are frozen (fewer GC scans). A cell starting beside others
    (a partitioned process) freezes what lives, not their garbage; when one of several stops,
    its objects must be collected and what remains frozen again; when the last stops,
    collection is as usual."""
    first, second = _Service(), _Service()
    faststream._freeze(first)  # a first cell
    kept, waste = _Node(), _Node()
    kept.me, waste.me = kept, waste  # cycles: only the collector frees them
    wasted = weakref.ref(waste)
    del waste  # garbage made while the first cell runs
    faststream._freeze(second)  # a second cell starts: what lives is frozen, not the garbage
    assert wasted() is None
    gone = weakref.ref(kept)
    del kept  # the first cell's objects, garbage once it stops
    gc.collect()
    assert gone() is not None  # frozen: no collection sees it
    faststream._thaw(first)  # one stops, the other runs on
    assert gone() is None and gc.get_freeze_count() > 0
    faststream._thaw(second)  # the last stops
    assert gc.get_freeze_count() == 0


def test_running_services_collect_between_bursts_and_the_process_gets_its_thresholds_back(
    collector: None,
) -> None:
    """While services run, the process collects on its own only at BUSY_COLLECTION objects (a
    collection fell inside a coup's settling: tens of ms); what GC_THRESHOLDS make due is
    collected once every service of the process is idle. When the last stops, the process
    collects as it did."""
    gc.set_threshold(700, 10, 10)
    busy, other = _Service(idle=False), _Service()
    faststream._freeze(busy)
    faststream._freeze(other)
    assert faststream.GC_THRESHOLDS == (10_000, 10, 10)
    assert gc.get_threshold() == (faststream.BUSY_COLLECTION, 10, 10)
    assert faststream.collect_when_due() is None  # nothing pending yet
    # kept, so counted as pending (with room: a list from the free list is not counted)
    made = [[] for _ in range(faststream.GC_THRESHOLDS[0] + 1_000)]
    assert gc.get_count()[0] >= faststream.GC_THRESHOLDS[0]
    assert faststream.collect_when_due() is None  # one service is busy
    busy.now_idle = True
    assert faststream.collect_when_due() == 0  # all idle: the young generation
    assert gc.get_count()[0] < faststream.GC_THRESHOLDS[0]
    for _ in range(faststream.GC_THRESHOLDS[1]):  # enough young collections for an older one
        gc.collect(0)
    made += [[] for _ in range(faststream.GC_THRESHOLDS[0] + 1_000)]
    assert faststream.collect_when_due() == 1
    faststream._thaw(busy)
    assert gc.get_threshold() == (faststream.BUSY_COLLECTION, 10, 10)  # one still runs
    faststream._thaw(other)
    assert gc.get_threshold() == (700, 10, 10)
    made += [[] for _ in range(faststream.GC_THRESHOLDS[0] + 1_000)]
    assert faststream.collect_when_due() is None  # no service: Python's own collector
    del made


def test_a_busy_process_collects_on_its_own_once_much_is_pending(collector: None) -> None:
    """A load without a pause must not grow its garbage without bound."""
    collections: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    busy = _Service(idle=False)
    faststream._freeze(busy)
    gc.callbacks.append(seen)
    try:
        made = [[] for _ in range(faststream.BUSY_COLLECTION // 2)]
        assert collections == []  # many objects, not yet that many
        made += [[] for _ in range(faststream.BUSY_COLLECTION // 2 + 1_000)]
        assert collections  # collected on its own, busy as it is
        del made
    finally:
        gc.callbacks.remove(seen)
        faststream._thaw(busy)
