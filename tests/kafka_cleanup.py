"""Kafka topics this test session created, deleted when the session ends.

Tests run against a broker that may outlive them (``make test`` and a developer's own
``punto-banco infra up``); every test's topic names start with a prefix of its own, and
whoever makes one registers it here (``created_under``), so the session deletes exactly
its own topics, never those of another run on the same broker.
"""

from __future__ import annotations

import asyncio
import contextlib

from aiokafka.admin import AIOKafkaAdminClient

PREFIXES: set[str] = set()


def created_under(prefix: str) -> str:
    """Register a topic prefix (or a whole topic name) of this session; returns it."""
    PREFIXES.add(prefix)
    return prefix


async def _delete(bootstrap: str, prefixes: tuple[str, ...]) -> int:
    from tests.kafka_logins import options

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60_000, **options())
    await asyncio.wait_for(admin.start(), 30)
    try:
        names = [t for t in await admin.list_topics() if t.startswith(prefixes)]
        for start in range(0, len(names), 200):
            await asyncio.wait_for(admin.delete_topics(names[start : start + 200]), 60)
        return len(names)
    finally:
        await admin.close()


def delete_created_topics(bootstrap: str) -> None:
    """Delete the topics under every registered prefix (best effort: never fails a run)."""
    prefixes = tuple(sorted(p for p in PREFIXES if p))
    if not prefixes:
        return
    with contextlib.suppress(Exception):
        asyncio.run(_delete(bootstrap, prefixes))
    PREFIXES.clear()
