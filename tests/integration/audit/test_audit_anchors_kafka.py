"""``audit --anchors`` on a real Kafka: stores rewritten by someone with write access are found.

The three real Applications play on SQLite files or PostgreSQL schemas and seal twice; each
service's outbox relay (its real mapper, its signing key) publishes the seals' anchors to
``punto-banco.seals``. Then a store is changed AND its seal chain recomputed (the store's own
chain verifies again), or cut at a seal boundary: the anchors on Kafka find both.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from psycopg import sql
from typer.testing import CliRunner

from contracts import SEALS
from services.dealing.messages import to_messages as dealing_messages
from services.dev.infra.kafka_clients import ADMIN, AUDITOR
from services.dev.simulation import LocalSystem, play
from services.settlement.messages import to_messages as settlement_messages
from services.shared.platform.host import KafkaService, ServiceDefinition
from services.shared.platform.kafka import ensure_topics
from services.shared.platform.relay import OutboxRelay, with_anchors, with_incidents
from services.shared.platform.security import load_keyring, signer_for
from services.shared.platform.settings import Settings
from services.shoe.messages import to_messages as shoe_messages
from services.tools.audit.anchor_reader import read_anchors
from services.tools.audit.auditor import AuditReport, audit
from services.tools.audit.findings import Code
from services.tools.audit.stores import Row, SqliteStore, open_stores
from services.tools.cli.main import app
from tests import kafka_logins
from tests.integration.audit.helpers import TallyApp
from tests.integration.platform.kafka_tools import settings_for
from tests.kafka_cleanup import created_under
from tests.signing_keys import key_env
from tests.unit.audit.anchoring import reseal, seal_rows
from tests.unit.audit.helpers import edit_state

MAPPERS: dict[str, Callable[[Any], Sequence[Any]]] = {
    "shoe": shoe_messages,
    "dealing": dealing_messages,
    "settlement": settlement_messages,
}
SEAL_CODES = {Code.ROW_ALTERED, Code.SEAL_BROKEN, Code.SEAL_CHAIN_BROKEN, Code.UNSEALED_TAIL}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def env(request: pytest.FixtureRequest, tmp_path: Path, kafka_bootstrap: str) -> dict[str, str]:
    """The settings' environment of one test: its own topic prefix, stores and keys."""
    tag = f"anchors{secrets.token_hex(3)}"
    created_under(f"{tag}.")
    kafka_logins.secure(f"{tag}.")  # on an authenticating broker: topics and ACLs per prefix
    values = {
        **kafka_logins.env(ADMIN),  # the test's own set-up (its relays write as any service)
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "PB_TOPIC_PREFIX": f"{tag}.",
        "PB_DATA_DIR": str(tmp_path),
        "PB_PERSISTENCE": request.param,
        "PB_POSTGRES_SCHEMA_PREFIX": f"{tag}_",
        **key_env(),
    }
    if request.param == "postgres":
        values.update(request.getfixturevalue("postgres_env"))
    return values


def _play_and_anchor(settings: Settings) -> None:
    """Two tables, one after the other, every store sealed after each; then each service's
    relay publishes what its store holds (the seals' anchors among it)."""
    with LocalSystem.from_settings(settings) as system:
        for number in (1, 2):
            play(system, f"t{number}", 3, bets_per_coup=3, decks=1, seed=number)
            system.pump()
            system.seal()
        asyncio.run(_publish(settings, system))


async def _publish(settings: Settings, system: LocalSystem) -> None:
    await ensure_topics(settings)
    for name, mapper in MAPPERS.items():
        own = settings.for_service(name)
        relay = OutboxRelay(
            system.apps[name],
            own,
            with_incidents(with_anchors(mapper, name)),
            signer=signer_for(own, load_keyring(own)),
            tracking_name=f"kafka:{name}",  # the local system's relays never touched Kafka
        )
        await relay.start()
        try:
            await relay.publish_pending()
        finally:
            await relay.stop()


def _audit(settings: Settings, *, anchors: bool = True) -> AuditReport:
    found = asyncio.run(read_anchors(settings, load_keyring(settings))) if anchors else None
    stores = open_stores(settings)
    try:
        return audit(stores, anchors=found)
    finally:
        for store in stores.values():
            store.close()


@pytest.fixture
def settings(env: dict[str, str]) -> Settings:
    settings = Settings.from_env("shoe", env)
    _play_and_anchor(settings)
    return settings


def test_untampered_stores_match_the_anchors_on_kafka(
    settings: Settings, env: dict[str, str]
) -> None:
    report = _audit(settings)
    assert report.findings == [], [str(f) for f in report.findings]
    assert report.anchors is not None
    for name, anchors in report.anchors.items():
        assert (anchors.anchors, anchors.matched, anchors.head_seal) == (2, 2, 2), name
        assert anchors.head_digest == report.seals[name].head_digest
    where = ["--postgres"] if env["PB_PERSISTENCE"] == "postgres" else []
    result = CliRunner().invoke(
        app, ["audit", "--anchors", "--json", *where], env={**env, **kafka_logins.env(AUDITOR)}
    )
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)["anchors"]
    assert shown["topic"] == settings.topic(SEALS)
    assert shown["stores"]["dealing"]["head_seal"] == 2


def test_the_seals_topic_keeps_every_record_forever(settings: Settings) -> None:
    async def configs() -> dict[str, str]:
        admin = AIOKafkaAdminClient(
            bootstrap_servers=settings.kafka_bootstrap_servers, **kafka_logins.options()
        )
        await admin.start()
        try:
            resource = ConfigResource(ConfigResourceType.TOPIC, settings.topic(SEALS))
            (response,) = await admin.describe_configs([resource])
        finally:
            await admin.close()
        entries = response.resources[0][4]
        return {str(entry[0]): str(entry[1]) for entry in entries}

    found = asyncio.run(configs())
    assert found["retention.ms"] == "-1" and found["cleanup.policy"] == "delete"


def test_a_rewritten_chain_and_a_truncated_store_are_found(
    settings: Settings, env: dict[str, str]
) -> None:
    with _store(settings, "dealing") as dealing:
        rows = dealing.rows()
        first_seal = seal_rows(rows)[0].notification_id
        i = next(
            i
            for i, row in enumerate(rows)
            if row.topic.endswith("Table.Opened") and row.notification_id < first_seal
        )
        rows[i] = edit_state(rows[i], lambda state: state.update(paytable="tie-9-to-1"))
        dealing.write(reseal(rows))
    with _store(settings, "shoe") as shoe:
        shoe.cut_after(seal_rows(shoe.rows())[0].notification_id)

    hidden = _audit(settings, anchors=False)
    assert not {f.code for f in hidden.findings} & SEAL_CODES  # each chain verifies on its own
    report = _audit(settings)
    mismatch = [f for f in report.errors if f.code is Code.ANCHOR_DIGEST_MISMATCH]
    assert [(f.store, f.notification_id) for f in mismatch] == [
        ("dealing", first_seal),
        ("dealing", None),
    ]
    assert "the chain was recomputed from seal 1 on" in mismatch[1].message
    (missing,) = [f for f in report.errors if f.code is Code.ANCHOR_MISSING_IN_STORE]
    assert missing.store == "shoe" and "truncated" in missing.message
    where = ["--postgres"] if env["PB_PERSISTENCE"] == "postgres" else []
    result = CliRunner().invoke(
        app, ["audit", "--anchors", *where], env={**env, **kafka_logins.env(AUDITOR)}
    )
    assert result.exit_code == 1, result.output
    assert "ERROR anchor_missing_in_store: shoe store" in result.stdout


class _Store:
    """One service's stored rows, read and rewritten in place (SQLite or PostgreSQL)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.postgres = settings.persistence == "postgres"
        if self.postgres:
            pg = settings.postgres
            self.connection: Any = psycopg.connect(
                host=pg.host, port=pg.port, dbname=pg.dbname, user=pg.user, password=pg.password
            )
            table = sql.Identifier(settings.postgres_schema, f"{settings.service}_events")
            self.select = sql.SQL(
                "SELECT notification_id, originator_id, originator_version, topic, state "
                "FROM {} ORDER BY notification_id"
            ).format(table)
            self.update = sql.SQL("UPDATE {} SET state = %s WHERE notification_id = %s").format(
                table
            )
            self.delete = sql.SQL("DELETE FROM {} WHERE notification_id > %s").format(table)
        else:
            self.connection = sqlite3.connect(settings.sqlite_path)
            self.select = (
                "SELECT rowid, originator_id, originator_version, topic, state "
                "FROM stored_events ORDER BY rowid"
            )
            self.update = "UPDATE stored_events SET state = ? WHERE rowid = ?"
            self.delete = "DELETE FROM stored_events WHERE rowid > ?"

    def rows(self) -> list[Row]:
        found = self.connection.execute(self.select).fetchall()
        return [
            Row(int(n), _uuid_bytes(oid), int(version), str(topic), bytes(state))
            for n, oid, version, topic, state in found
        ]

    def write(self, rows: list[Row]) -> None:
        before = {row.notification_id: row.state for row in self.rows()}
        for row in rows:
            if before[row.notification_id] != row.state:
                self.connection.execute(self.update, (row.state, row.notification_id))
        self.connection.commit()

    def cut_after(self, notification_id: int) -> None:
        self.connection.execute(self.delete, (notification_id,))
        self.connection.commit()


def _uuid_bytes(value: Any) -> bytes:
    return value.bytes if isinstance(value, UUID) else UUID(str(value)).bytes


@contextmanager
def _store(settings: Settings, service: str) -> Iterator[_Store]:
    store = _Store(settings.for_service(service))
    try:
        yield store
    finally:
        store.connection.close()


async def test_a_service_anchors_the_seal_it_makes_when_stopping(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """The platform's own wiring: the relay publishes the shutdown seal before it stops, so a
    store at rest has every seal anchored (none waits for the next start)."""
    # no periodic seal: only the one at shutdown
    settings = settings_for("tally", kafka_bootstrap, data_dir=tmp_path, seal_interval="off")
    definition = ServiceDefinition(
        name="tally", application=lambda env: TallyApp(env=env), to_messages=lambda event: []
    )
    async with KafkaService(definition, settings) as host:
        await host.worker.call(host.app.add, 4)
    found = await read_anchors(settings, load_keyring(settings))
    assert sorted(found.books["tally"].anchors) == [1] and found.findings == []
    # The auditor knows three stores by name: audit the tally store as one of them.
    found.books["settlement"] = found.books.pop("tally")
    store = SqliteStore("tally", settings.sqlite_path)
    try:
        report = audit({"settlement": store}, anchors=found)
    finally:
        store.close()
    assert report.findings == []
    assert report.anchors is not None and report.anchors["settlement"].matched == 1
