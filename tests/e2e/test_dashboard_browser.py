"""The dashboard as a person sees it: Debian's Chromium (headless, Selenium + chromedriver)
against a running table - the three real services on real Kafka, the demo's crowd betting,
the dashboard following Kafka. The page loads, the roads grow as coups resolve, and its numbers
match what the test itself read on Kafka and what the services' /metrics say. A screenshot is
saved to test-artifacts/dashboard.png.

Needs /usr/bin/chromium and /usr/bin/chromedriver (`apt-get install chromium chromium-driver`;
.ci/run installs them); skipped without them.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import tempfile
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts import BetAccepted, BetRejected, BetSettled, CoupResolved, CoupSettled
from services.dev.demo.processes import ServiceSettings
from services.dev.demo.system import LocalSystem
from services.dev.infra.kafka_clients import DASHBOARD
from services.dev.infra.ports import free_port
from services.tools.dashboard.server import Dashboard
from tests import kafka_logins
from tests.e2e.conftest import FAST_SETTINGS
from tests.e2e.helpers import crowd_driver, wait
from tests.kafka_cleanup import created_under

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
COUPS = 8


@pytest.fixture
def browser() -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install them)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="pb-chromium-")
    options = Options()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1700,1150",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()  # ends chromedriver and every chromium process it started
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
async def table_system(kafka_bootstrap: str, tmp_path: Path) -> AsyncIterator[LocalSystem]:
    ports = {name: free_port() for name in ("shoe", "dealing", "settlement")}
    settings = ServiceSettings(
        bootstrap=kafka_bootstrap,
        data_dir=tmp_path / "data",
        logins=kafka_logins.logins(),
        topic_prefix=created_under(f"dash-{uuid.uuid4().hex[:12]}."),
        extra={
            **FAST_SETTINGS,
            **{f"PB_HTTP_PORT_{name.upper()}": str(port) for name, port in ports.items()},
        },
    )
    system = LocalSystem(settings, tmp_path / "logs")
    system.http_ports = ports  # type: ignore[attr-defined]
    try:
        await system.start(ready_timeout=90)
        yield system
    finally:
        await system.stop(timeout=15)
        for child in system.services.values():
            assert not child.running(), f"{child.name} still running after stop"


def text_of(browser: Any, selector: str) -> str:
    from selenium.webdriver.common.by import By

    return str(browser.find_element(By.CSS_SELECTOR, selector).text)


def cells(browser: Any, table_id: str, road: str) -> int:
    from selenium.webdriver.common.by import By

    element = browser.find_element(By.CSS_SELECTOR, f'[data-table="{table_id}"] .{road}')
    return int(element.get_attribute("data-cells"))


async def in_browser(fn: Any, *args: Any) -> Any:
    """Selenium blocks: run it in a thread so the dashboard (same event loop) can answer."""
    return await asyncio.to_thread(fn, *args)


async def page_until(browser: Any, system: LocalSystem, check: Any, what: str) -> Any:
    """Pump Kafka (the crowd keeps betting) until ``check(browser)`` is truthy on the page."""
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        try:
            value = await in_browser(check, browser)
        except Exception:  # the element is being re-rendered
            value = None
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"the page never showed {what}")
        await system.pump(timeout_ms=200)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


def metric_sum(text: str, name: str) -> float:
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{.*}})? ([0-9.e+-]+)$", text, re.M))


def money(minor: int) -> str:
    return f"{minor / 100:,.2f}"


async def test_the_dashboard_follows_a_running_table(
    table_system: LocalSystem, browser: Any
) -> None:
    system = table_system
    async with Dashboard(
        system.settings.bootstrap,
        system.settings.topic_prefix,
        port=0,
        auth=system.settings.logins.auth(DASHBOARD),  # reads every topic, writes none
    ) as dash:
        driver = crowd_driver(
            system, bettors=12, wildness=0.3, decks=6, cut_card_from_end=16, betting_window_ms=250
        )
        [table_id] = driver.tables
        await driver.start()
        await in_browser(browser.get, dash.url)
        assert "punto-banco" in await in_browser(lambda b: b.title, browser)

        def resolved() -> int:
            return driver.tables[table_id].coups_resolved

        # The table appears and the roads grow as coups resolve.
        await wait(system, lambda: resolved() >= 2, 60, "two coups")
        first = await page_until(
            browser,
            system,
            lambda b: cells(b, table_id, "bead-plate") >= 2 and cells(b, table_id, "bead-plate"),
            "the first coups on the bead plate",
        )
        await wait(system, lambda: resolved() >= COUPS, 120, f"{COUPS} coups")
        grown = await page_until(
            browser,
            system,
            lambda b: (
                cells(b, table_id, "bead-plate") >= COUPS and cells(b, table_id, "bead-plate")
            ),
            f"{COUPS} coups on the bead plate",
        )
        assert grown > first
        # One rendering, read at once: the big road has a cell per coup that was not a tie.
        section = f'[data-table="{table_id}"]'
        bead, big_road, ties = await in_browser(
            browser.execute_script,
            "const s = document.querySelector(arguments[0]);"
            "return [+s.querySelector('.bead-plate').dataset.cells,"
            " +s.querySelector('.big-road').dataset.cells,"
            " s.querySelectorAll('.bead-plate .bead.T').length];",
            section,
        )
        assert bead >= COUPS and big_road == bead - ties, (bead, big_road, ties)
        # A software shoe's table has no device panel (a studio table's alone has one).
        devices = await in_browser(
            browser.execute_script,
            "return document.querySelector(arguments[0]).querySelectorAll('[data-k=device]')"
            ".length;",
            section,
        )
        assert devices == 0
        ARTIFACTS.mkdir(exist_ok=True)
        await in_browser(browser.save_screenshot, str(ARTIFACTS / "dashboard.png"))

        # Close the table, let every bet settle, then the page must match Kafka exactly.
        await driver.close_all("browser test done")
        await wait(system, driver.drained, 90, "the table to close and settle")

        def ours() -> list[Any]:
            return [
                r.message
                for r in system.history
                if getattr(r.message, "table_id", None) == table_id
            ]

        def books_settled() -> bool:  # a coup's CoupSettled follows its last BetSettled
            messages = ours()
            betted = {m.coup_id for m in messages if isinstance(m, BetAccepted)}
            return betted <= {m.coup_id for m in messages if isinstance(m, CoupSettled)}

        await wait(system, books_settled, 60, "a CoupSettled for every coup with bets")
        messages = ours()
        accepted = {m.bet_id for m in messages if isinstance(m, BetAccepted)}
        rejected = [m for m in messages if isinstance(m, BetRejected)]
        settled = {m.bet_id for m in messages if isinstance(m, BetSettled)}
        coups = {m.coup_id: m for m in messages if isinstance(m, CoupSettled)}
        resolved_ids = {m.coup_id for m in messages if isinstance(m, CoupResolved)}
        house = sum(m.house_result for m in coups.values())
        staked = sum(m.staked for m in coups.values())
        assert accepted and rejected and settled == accepted

        expected = {
            "badge": "CLOSED",
            "accepted": str(len(accepted)),
            "settled": str(len(settled)),
            "coups": str(len(resolved_ids)),
            "house-result": f"{money(house)} EUR",
            "staked": money(staked),
        }
        page: dict[str, str] = {}

        def final(b: Any) -> bool:  # every figure of one reading (the page follows Kafka)
            page["badge"] = text_of(b, f"{section} .badge")
            for key in expected.keys() - {"badge"}:
                page[key] = text_of(b, f'{section} [data-k="{key}"]')
            return page == expected

        try:
            await page_until(browser, system, final, "the closed table as it is on Kafka")
        except AssertionError as error:
            raise AssertionError(f"{error}: {page} != {expected}") from None

        # The services' own metrics agree with Kafka.
        ports = system.http_ports  # type: ignore[attr-defined]
        settlement = await asyncio.to_thread(scrape, ports["settlement"])
        dealing = await asyncio.to_thread(scrape, ports["dealing"])
        seen = {
            "accepted": metric_sum(settlement, "pb_bets_accepted_total"),
            "rejected": metric_sum(settlement, "pb_bets_rejected_total"),
            "settled": metric_sum(settlement, "pb_bets_settled_total"),
            "coups": metric_sum(dealing, "pb_coups_resolved_total"),
        }
        assert seen == {
            "accepted": len(accepted),
            "rejected": len({m.event_id for m in rejected}),
            "settled": len(settled),
            "coups": len(resolved_ids),
        }, settlement
        latencies = metric_sum(settlement, "pb_settlement_latency_seconds_count")
        assert latencies >= len(coups) - 1, settlement
