"""`punto-banco up` as a person runs it: plays, checks its books, stops everything it started."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path

import psutil
import pytest

from services.dev.demo.processes import PROJECT_ROOT
from services.dev.demo.system import LocalSystem
from services.dev.infra.kafka_clients import GATEWAY
from services.shared.rules.paytable import get_paytable
from tests import kafka_logins
from tests.e2e.helpers import assert_books_clean, open_table, wait
from tests.kafka_cleanup import created_under

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def up_env(store: Mapping[str, str]) -> dict[str, str]:
    """Our environment without persistence settings, then the test's store."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("POSTGRES_", "PB_POSTGRES", "PB_PERSISTENCE", "PB_TOPIC_PREFIX"))
    }
    env.update(store)
    env["PB_PERSISTENCE"] = "postgres" if store else "sqlite"
    env["COLUMNS"] = "120"
    env["PB_HTTP_PORT"] = "0"  # the services' endpoints on any free port: tests run side by side
    return env


def up_command(kafka: str, prefix: str, data_dir: Path, *options: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "services.tools.cli.main",
        "up",
        "--kafka",
        kafka,
        "--topic-prefix",
        prefix,
        "--data-dir",
        str(data_dir),
        "--bettors",
        "15",
        "--wildness",
        "0.3",
        "--decks",
        "1",
        "--cut-card",
        "14",
        "--betting-window-ms",
        "1000",  # `up`'s own; 200 ms lost every bet to BETTING_CLOSED on a loaded machine
        *options,
    ]


async def run_to_end(
    command: list[str], env: Mapping[str, str], timeout: float = 180, cwd: Path = PROJECT_ROOT
) -> str:
    """Run a command (`up`, the example client) to its end; its exit status must be 0. Its
    output."""
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=cwd,
        env=dict(env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    text = output.decode(errors="replace")
    assert process.returncode == 0, text
    return text


def leftovers(prefix: str) -> list[str]:
    """Processes still running with this run's topic prefix in their environment."""
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        try:
            if process.environ().get("PB_TOPIC_PREFIX") == prefix:
                found.append(f"{process.pid} {' '.join(process.info['cmdline'] or [])}")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


@pytest.mark.timeout(240)
async def test_up_plays_n_coups_checks_the_books_and_stops_everything(
    kafka_bootstrap: str, store: Mapping[str, str], tmp_path: Path
) -> None:
    prefix = created_under(f"e2e-up-{uuid.uuid4().hex[:10]}.")
    command = up_command(kafka_bootstrap, prefix, tmp_path / "var", "--coups", "6")
    text = await run_to_end(command, up_env(store))
    assert "OK: " in text
    assert "6 with bets of 6 per table" in text
    assert "0 errors" in text
    assert ("PostgreSQL" if store else "SQLite") in text
    assert not leftovers(prefix)
    for name in ("shoe", "dealing", "settlement"):
        assert (tmp_path / "var" / "logs" / f"{name}.log").is_file()
        if not store:
            assert (tmp_path / "var" / f"{name}.sqlite").is_file()


@pytest.mark.timeout(240)
async def test_up_studio_deals_a_table_from_the_simulated_shoe_with_clean_books(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """`up --studio`: the first table is dealt by the simulated card-reading shoe through the
    device bridge, the second by a software shoe; both end OK, every payout recomputed."""
    prefix = created_under(f"e2e-up-{uuid.uuid4().hex[:10]}.")
    env = {**up_env({}), "PB_HTTP_PORT_DASHBOARD": "off"}
    command = up_command(kafka_bootstrap, prefix, tmp_path / "var", "--coups", "4")
    text = await run_to_end([*command, "--studio", "--tables", "2"], env)
    assert "OK: " in text and "0 errors" in text
    bridge_log = (tmp_path / "var" / "logs" / "studio-bridge.log").read_text()
    assert "connected to device shoe-1" in bridge_log
    assert not leftovers(prefix)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("paytable", ["no-commission", "ez-baccarat"])
async def test_up_plays_a_paytable_with_its_side_bets_and_recomputes_every_payout(
    kafka_bootstrap: str, tmp_path: Path, paytable: str
) -> None:
    """The bettors play the paytable's side bets; `up` ends OK only if every payout equals its
    recomputation from the cards (the ledger's end-of-run check)."""
    prefix = created_under(f"e2e-up-{uuid.uuid4().hex[:10]}.")
    env = {**up_env({}), "PB_HTTP_PORT_DASHBOARD": "off", "COLUMNS": "400"}
    command = up_command(kafka_bootstrap, prefix, tmp_path / "var", "--coups", "5")
    text = await run_to_end([*command, "--paytable", paytable, "--seed", "7"], env)
    assert "OK: " in text and "0 errors" in text
    offered = {bet.value for bet in get_paytable(paytable).offered}
    settled = {bet for bet in offered if re.search(rf"\b{bet} [1-9]", text)}  # "settled" row
    assert len(settled - {"player", "banker", "tie"}) >= 3, text
    assert not leftovers(prefix)


@pytest.mark.timeout(240)
async def test_up_with_two_operators_plays_both_gateways_at_one_table_with_clean_books(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """PB_OPERATORS=acme,bravo: the simulated bettors bet through both operators' gateway
    topics at one table; every answer and settlement comes back on its operator's topic
    (the books check clean), and the house's topics stay empty."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from contracts import BET_COMMANDS, BET_EVENTS, bet_commands_topic, bet_events_topic

    prefix = created_under(f"e2e-up-{uuid.uuid4().hex[:10]}.")
    env = {**up_env({}), "PB_OPERATORS": "acme,bravo", "PB_HTTP_PORT_DASHBOARD": "off"}
    text = await run_to_end(
        up_command(kafka_bootstrap, prefix, tmp_path / "var", "--coups", "4"), env
    )
    assert "OK: " in text and "0 errors" in text
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap, group_id=None, **kafka_logins.options()
    )
    await consumer.start()
    try:
        await consumer._client.force_metadata_update()
        counts = {}
        for logical in (
            BET_COMMANDS,
            BET_EVENTS,
            *(bet_commands_topic(op) for op in ("acme", "bravo")),
            *(bet_events_topic(op) for op in ("acme", "bravo")),
        ):
            topic = prefix + logical
            partitions = consumer.partitions_for_topic(topic) or set()
            ends = await consumer.end_offsets([TopicPartition(topic, p) for p in partitions])
            counts[logical] = sum(ends.values())
    finally:
        await consumer.stop()
    assert counts[BET_COMMANDS] == counts[BET_EVENTS] == 0, counts
    for operator in ("acme", "bravo"):  # both gateways bet, and both got answers
        assert counts[bet_commands_topic(operator)] > 0, counts
        assert counts[bet_events_topic(operator)] > 0, counts
    assert not leftovers(prefix)


@pytest.mark.timeout(240)
async def test_ctrl_c_stops_up_cleanly_with_its_summary(
    kafka_bootstrap: str, store: Mapping[str, str], tmp_path: Path
) -> None:
    prefix = created_under(f"e2e-up-{uuid.uuid4().hex[:10]}.")
    log = tmp_path / "up.out"
    with open(log, "wb") as out:
        process = await asyncio.create_subprocess_exec(
            *up_command(kafka_bootstrap, prefix, tmp_path / "var"),
            cwd=PROJECT_ROOT,
            env=up_env(store),
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )
    try:
        deadline = asyncio.get_running_loop().time() + 120
        while "services ready" not in log.read_text():
            assert process.returncode is None, log.read_text()
            assert asyncio.get_running_loop().time() < deadline, log.read_text()
            await asyncio.sleep(0.5)
        await asyncio.sleep(4)  # a few coups
        process.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(process.wait(), 90)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    text = log.read_text()
    assert code == 130, text
    assert "STOPPED, books clean" in text
    assert not leftovers(prefix)


@pytest.fixture(scope="module")
def integrator_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python with the contracts distribution alone (and aiokafka): what an integrator has."""
    venv = tmp_path_factory.mktemp("integrator") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    constraints = str(PROJECT_ROOT / "constraints.txt")
    contracts = str(PROJECT_ROOT / "contracts")
    pip = [str(python), "-m", "pip", "install", "-q", "-c", constraints, contracts, "aiokafka"]
    subprocess.run(pip, check=True)
    return python


@pytest.mark.timeout(300)
async def test_the_example_client_places_bets_and_gets_its_settlements(
    system: LocalSystem, integrator_python: Path, tmp_path: Path
) -> None:
    """examples/place_bets.py, run with the contracts distribution alone, plays a real coup."""
    table = await open_table(system, betting_window_ms=4000)
    command = [
        str(integrator_python),
        str(PROJECT_ROOT / "examples" / "place_bets.py"),
        "--bootstrap",
        system.settings.bootstrap,
        "--topic-prefix",
        system.settings.topic_prefix,
        "--table",
        table,
        "--timeout",
        "90",
    ]
    env = {**os.environ, **system.settings.logins.env(GATEWAY)}  # as an integrator logs in
    # cwd: nothing of the checkout importable but what the integrator's venv installed
    text = await run_to_end(command, env, timeout=120, cwd=tmp_path)
    assert text.count("accepted ") == 3, text
    assert "BELOW_MINIMUM" in text
    assert text.count("settled  ") == 3, text
    assert "coup " in text and " settled: " in text
    await wait(system, lambda: system.ledger.summary(checks=False).bets_settled >= 3, 30, "books")
    assert_books_clean(system.ledger)
