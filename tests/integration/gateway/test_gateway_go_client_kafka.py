"""The Go client of ``examples/go-client`` (standard library only), built and run against the
running gateway: it signs its requests, places bets on the open coup, waits for their
settlement and reads the round."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from tests.gateway_harness import LONG_WINDOW, ROOT, GatewaySystem, gateway_system

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

GO = shutil.which("go")


@pytest.mark.skipif(GO is None and not os.environ.get("CI"), reason="no Go toolchain")
async def test_the_go_client_bets_and_reads_the_round(tmp_path: Path, kafka_bootstrap: str) -> None:
    assert GO is not None, "CI builds the Go client: install Go (.ci/run installs golang-go)"
    env = {
        **os.environ,
        "GOFLAGS": "-mod=mod",
        "GOPROXY": "off",  # the standard library only: nothing to download
        "GOCACHE": str(tmp_path / "go-cache"),
        "GOPATH": str(tmp_path / "go-path"),
    }
    binary = tmp_path / "pb-go-client"
    build = await asyncio.create_subprocess_exec(
        GO, "build", "-o", str(binary), ".", cwd=ROOT / "examples" / "go-client", env=env
    )
    assert await build.wait() == 0
    async with gateway_system(tmp_path, kafka_bootstrap) as system:
        await system.open_table(window_ms=LONG_WINDOW)
        coup = await system.open_coup()
        client = await asyncio.create_subprocess_exec(
            str(binary),
            env={
                **env,
                "PB_GATEWAY_URL": system.api.url,
                "PB_API_OPERATOR": "acme",
                "PB_API_SECRET": system.keys.api_secret,
            },
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        assert client.stdout is not None
        text = await asyncio.wait_for(run_client(system, coup, client.stdout), 150)
        assert await client.wait() == 0, text
        assert text.count(": ACCEPTED") == 3, text
        assert "round " in text and "3 of our bets" in text, text


async def run_client(system: GatewaySystem, coup: str, output: asyncio.StreamReader) -> str:
    """The client's output; betting closes once it has placed its three bets (it prints an
    answer per bet, ``bet <id>: <status> <reason>``, before it waits for their settlement)."""
    lines: list[str] = []
    while line := (await output.readline()).decode():
        lines.append(line)
        if len(lines) == 3:
            assert all(seen.startswith("bet ") for seen in lines), lines
            await system.close_betting(coup)
    return "".join(lines)
