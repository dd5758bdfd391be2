"""The service runner on a store with its writer lease."""

import asyncio

from services.shared.platform.host import KafkaService, ServiceContext, ServiceDefinition
from services.shared.platform.settings import Settings
from tests.unit.platform.fakes import Counter, CounterApp


def settings(tmp: str) -> Settings:
    return Settings.from_env("counter", {"PB_DATA_DIR": tmp})


async def test_tasks_run_in_the_worker_and_stop_cleanly(tmp_path: object) -> None:
    seen: list[int] = []
    saved = asyncio.Event()

    async def ticker(ctx: ServiceContext[CounterApp]) -> None:
        def save() -> int:
            ctx.app.save(Counter(table_id="t1"))
            return 1

        seen.append(await ctx.call(save))
        saved.set()
        await ctx.stopping.wait()

    definition = ServiceDefinition(
        name="counter", application=lambda env: CounterApp(env=env), tasks=[ticker]
    )
    async with KafkaService(definition, settings(str(tmp_path)), create_topics=False) as host:
        await host.wait_ready()
        await asyncio.wait_for(saved.wait(), 60)  # the task's save went through the worker
        assert host.app.repository.get(Counter.create_id("t1")).table_id == "t1"
    assert seen == [1]
    assert not host.failed


async def test_a_crashed_task_stops_the_service(tmp_path: object) -> None:
    async def broken(ctx: ServiceContext[CounterApp]) -> None:
        raise RuntimeError("timer bug")

    definition = ServiceDefinition(
        name="counter", application=lambda env: CounterApp(env=env), tasks=[broken]
    )
    async with KafkaService(definition, settings(str(tmp_path)), create_topics=False) as host:
        await asyncio.wait_for(host.stopping.wait(), 60)
    assert host.failed
