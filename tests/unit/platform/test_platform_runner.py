"""A service without Kafka: application, tasks and shutdown."""

import gc
import weakref

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


class _Node:
    me: object = None


def test_a_stopped_services_objects_are_collected_while_others_run_in_the_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Running services' objects are frozen (fewer GC scans). When one of several stops (a
    partitioned process's cell moving away), its objects must be collected and what remains
    frozen again; when the last stops, collection is as usual."""
    monkeypatch.setattr(faststream, "_running_hosts", 0)
    try:
        faststream._freeze()  # a first cell
        node = _Node()
        node.me = node  # a cycle: only the collector frees it
        gone = weakref.ref(node)
        del node
        faststream._freeze()  # a second cell starts: the garbage is frozen with the rest
        gc.collect()
        assert gone() is not None  # frozen: no collection sees it
        faststream._thaw()  # one stops, the other runs on
        assert gone() is None and gc.get_freeze_count() > 0
        faststream._thaw()  # the last stops
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()


def test_running_services_collect_young_objects_in_larger_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While a service runs, the collector's first generation holds 10,000 objects (a coup's
    burst of them otherwise sets off full collections of the heap); the thresholds the process
    had come back when the last service stops."""
    monkeypatch.setattr(faststream, "_running_hosts", 0)
    before = gc.get_threshold()
    try:
        faststream._freeze()
        faststream._freeze()
        assert gc.get_threshold() == faststream.GC_THRESHOLDS == (10_000, 10, 10)
        faststream._thaw()
        assert gc.get_threshold() == faststream.GC_THRESHOLDS  # one still runs
        faststream._thaw()
        assert gc.get_threshold() == before
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
